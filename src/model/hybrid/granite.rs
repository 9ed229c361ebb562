//! IBM Granite-4.0-H (`"granitemoehybrid"`, HF `GraniteMoeHybridForCausalLM`): per layer a
//! Mamba-2 mixer or attention (`layer_types`), then a mixture of experts beside a shared MLP (or
//! the shared MLP alone when `num_local_experts` is 0), each block's output times
//! `residual_multiplier`; embeddings × `embedding_multiplier`, logits ÷ `logits_scaling`, the
//! softmax scale `attention_multiplier`, RoPE only where `position_embedding_type` is "rope".

use serde_json::Value;

use crate::blocks::{Activation, Block, BlockKind, ExpertLayout, Mlp, MlpNames, Moe, Routing};
use crate::error::{Error, Result};
use crate::model::config::{Arch, Config, Names, Scales};
use crate::model::config_fields::inner_width;
use crate::model::hybrid::{
    LayerType, attention, base, check_len, flag, layer, layer_count, layer_list, mamba_fields, number,
    require_silu, rope, scaled, size,
};

/// config.json of a Granite-4.0-H checkpoint as a [`Config`].
pub(crate) fn parse(v: Value) -> Result<Config> {
    let d = size(&v, "hidden_size", 4096)?;
    let n_layer = layer_count(&v, 32)?;
    let eps = number(&v, "rms_norm_eps", 1e-6)? as f32;
    let heads = size(&v, "num_attention_heads", 32)?;
    let kv_heads = size(&v, "num_key_value_heads", heads)?;
    let head_dim = size(&v, "head_dim", d.checked_div(heads).unwrap_or(0))?;
    require_silu(&v, "Granite-4.0-H")?;
    let act = Activation::Silu;
    let rope = match v.get("position_embedding_type").and_then(Value::as_str) {
        None | Some("nope") => None,
        Some("rope") => Some(rope(&v, head_dim, 1.0, true)?),
        Some(other) => return Err(Error::UnsupportedModel(format!("position_embedding_type {other:?}"))),
    };
    let types = layer_list(&v, "layer_types")?.unwrap_or_else(|| vec![LayerType::Mamba; n_layer]);
    check_len("layer_types", &types, n_layer)?;

    let inner = inner_width(number(&v, "mamba_expand", 2.0)?, d)?;
    let ssd = || mamba_fields(&v, inner, eps);
    let mut attn = attention(heads, kv_heads, head_dim, rope);
    attn.scale = number(&v, "attention_multiplier", 1.0)? as f32;
    attn.qkv_bias = flag(&v, "attention_bias", false)?;
    attn.o_bias = attn.qkv_bias;
    let shared_mlp = Mlp {
        inner: size(&v, "shared_intermediate_size", 1024)?,
        act,
        names: MlpNames::InputOutput,
        bias: false,
        scales: (1.0, 1.0),
    };
    let experts = size(&v, "num_local_experts", 8)?;
    let ffn = if experts > 0 {
        let expert = Mlp { inner: size(&v, "intermediate_size", 11008)?, ..shared_mlp.clone() };
        let moe = Moe {
            n_experts: experts,
            top_k: size(&v, "num_experts_per_tok", 2)?,
            expert,
            routing: Routing::SoftmaxTopK,
            layout: ExpertLayout::Granite,
            stacked: false,
            shared: Some(shared_mlp),
        };
        (BlockKind::Moe(moe), "")
    } else {
        (BlockKind::Mlp(shared_mlp), "shared_mlp.")
    };

    let mut blocks = Vec::with_capacity(2 * n_layer);
    for (i, t) in types.iter().enumerate() {
        let mixer = match t {
            LayerType::Mamba => (BlockKind::Mamba2(ssd()?), "mamba."),
            LayerType::Attention => (BlockKind::Attention(attn.clone()), "self_attn."),
            other => {
                return Err(Error::UnsupportedModel(format!(
                    "layer_types: {other:?} layers in Granite-4.0-H"
                )));
            }
        };
        blocks.push(Block::new(mixer.0, layer(i), "input_layernorm.weight", mixer.1));
        blocks.push(Block::new(ffn.0.clone(), layer(i), "post_attention_layernorm.weight", ffn.1));
    }
    let residual = number(&v, "residual_multiplier", 1.0)? as f32;
    let mut base = base(
        &v,
        Arch::GraniteMoeHybrid,
        (d, eps),
        (32000, false),
        Names { embedding: "model.embed_tokens.weight", norm_f: "model.norm.weight" },
    )?;
    base.scales = Scales {
        embedding: number(&v, "embedding_multiplier", 1.0)? as f32,
        logits: (1.0 / number(&v, "logits_scaling", 1.0)?) as f32,
    };
    base.max_positions = rope.map(|_| size(&v, "max_position_embeddings", 2048)).transpose()?;
    Config::stack(base, scaled(blocks, residual))
}
