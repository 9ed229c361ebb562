//! AI21 Jamba (`"jamba"`, HF `JambaForCausalLM`): per layer a Mamba-1 mixer with RMSNorms (with
//! gains) on Δ's input, B and C — or attention without positions where `i % attn_layer_period
//! == attn_layer_offset` — then a gated MLP, or a mixture of experts (softmax routing, weights
//! not renormalised) where `i % expert_layer_period == expert_layer_offset`.

use serde_json::Value;

use crate::blocks::{Activation, Block, BlockKind, ExpertLayout, Mamba1, Mlp, MlpNames, Moe, Routing};
use crate::error::{Error, Result};
use crate::model::config::{Arch, Config};
use crate::model::config_fields::inner_width;
use crate::model::hybrid::{
    MODEL_NAMES, attention, base, flag, layer, layer_count, number, require_silu, size, size_or_auto,
};

/// config.json of a Jamba checkpoint as a [`Config`].
pub(crate) fn parse(v: Value) -> Result<Config> {
    let d = size(&v, "hidden_size", 4096)?;
    let n_layer = layer_count(&v, 32)?;
    let eps = number(&v, "rms_norm_eps", 1e-6)? as f32;
    require_silu(&v, "Jamba")?;
    let period = |name: &str, default| -> Result<usize> {
        match size(&v, name, default)? {
            0 => Err(Error::Config(format!("{name} must be positive"))),
            p => Ok(p),
        }
    };
    let (attn_period, attn_offset) = (period("attn_layer_period", 8)?, size(&v, "attn_layer_offset", 4)?);
    let (expert_period, expert_offset) =
        (period("expert_layer_period", 2)?, size(&v, "expert_layer_offset", 1)?);
    let experts = match v.get("num_experts").filter(|x| !x.is_null()) {
        Some(_) => size(&v, "num_experts", 16)?,
        None => size(&v, "num_local_experts", 16)?,
    };
    let heads = size(&v, "num_attention_heads", 32)?;
    let kv_heads = size(&v, "num_key_value_heads", heads)?;
    let head_dim = size(&v, "head_dim", d.checked_div(heads).unwrap_or(0))?;
    let attn = attention(heads, kv_heads, head_dim, None);
    let dt_rank = size_or_auto(&v, "mamba_dt_rank", d.div_ceil(16))?;
    let mamba = Mamba1 {
        d_inner: inner_width(number(&v, "mamba_expand", 2.0)?, d)?,
        d_state: size(&v, "mamba_d_state", 16)?,
        d_conv: size(&v, "mamba_d_conv", 4)?,
        dt_rank,
        use_bias: flag(&v, "mamba_proj_bias", false)?,
        use_conv_bias: flag(&v, "mamba_conv_bias", true)?,
        dbc_norm_eps: Some(eps),
        dbc_gains: true,
    };
    let mlp = Mlp {
        inner: size(&v, "intermediate_size", 14336)?,
        act: Activation::Silu,
        names: MlpNames::Separate,
        bias: false,
        scales: (1.0, 1.0),
    };
    let moe = Moe {
        n_experts: experts,
        top_k: size(&v, "num_experts_per_tok", 2)?,
        expert: mlp.clone(),
        routing: Routing::Softmax { renormalize: false },
        layout: ExpertLayout::Jamba,
        stacked: false,
        shared: None,
    };
    let mut blocks = Vec::with_capacity(2 * n_layer);
    for i in 0..n_layer {
        let (kind, at) = if i % attn_period == attn_offset {
            (BlockKind::Attention(attn.clone()), "self_attn.")
        } else {
            (BlockKind::Mamba1(mamba.clone()), "mamba.")
        };
        blocks.push(Block::new(kind, layer(i), "input_layernorm.weight", at));
        let ffn = if experts > 1 && i % expert_period == expert_offset {
            BlockKind::Moe(moe.clone())
        } else {
            BlockKind::Mlp(mlp.clone())
        };
        blocks.push(Block::new(ffn, layer(i), "pre_ff_layernorm.weight", "feed_forward."));
    }
    Config::stack(base(&v, Arch::Jamba, (d, eps), (65536, false), MODEL_NAMES)?, blocks)
}
