//! IBM Bamba (`"bamba"`, HF `BambaForCausalLM`): per layer a Mamba-2 mixer, or attention at
//! `attn_layer_indices` (RoPE on half of each head by default), then a gated MLP.

use serde_json::Value;

use crate::blocks::{Activation, Block, BlockKind, Mlp, MlpNames};
use crate::error::{Error, Result};
use crate::model::config::{Arch, Config};
use crate::model::config_fields::inner_width;
use crate::model::hybrid::{
    MODEL_NAMES, attention, base, flag, layer, layer_count, mamba_fields, number, require_silu, rope, size,
    whole,
};

/// config.json of a Bamba checkpoint as a [`Config`].
pub(crate) fn parse(v: Value) -> Result<Config> {
    let d = size(&v, "hidden_size", 4096)?;
    let n_layer = layer_count(&v, 32)?;
    let eps = number(&v, "rms_norm_eps", 1e-5)? as f32;
    let heads = size(&v, "num_attention_heads", 32)?;
    let kv_heads = size(&v, "num_key_value_heads", heads)?;
    let head_dim = size(&v, "head_dim", d.checked_div(heads).unwrap_or(0))?;
    require_silu(&v, "Bamba")?;
    let attn_at: Vec<usize> = match v.get("attn_layer_indices") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) => {
            list.iter().map(|x| whole(x).filter(|&n| n < n_layer)).collect::<Option<_>>().ok_or_else(
                || Error::Config(format!("attn_layer_indices must be layer numbers below {n_layer}")),
            )?
        }
        Some(other) => return Err(Error::Config(format!("attn_layer_indices must be a list, not {other}"))),
    };
    // HF 5.24 fixes Bamba's rotated share at 0.5 unless rope_parameters says otherwise (a
    // top-level partial_rotary_factor is overwritten).
    let rope = rope(&v, head_dim, 0.5, false)?;
    let mut attn = attention(heads, kv_heads, head_dim, Some(rope));
    attn.qkv_bias = flag(&v, "attention_bias", false)?;
    attn.o_bias = attn.qkv_bias;
    let inner = inner_width(number(&v, "mamba_expand", 2.0)?, d)?;
    let ssd = mamba_fields(&v, inner, eps)?;
    let mlp = Mlp {
        inner: size(&v, "intermediate_size", 14336)?,
        act: Activation::Silu,
        names: MlpNames::Separate,
        bias: flag(&v, "mlp_bias", false)?,
        scales: (1.0, 1.0),
    };
    let mut blocks = Vec::with_capacity(2 * n_layer);
    for i in 0..n_layer {
        let (kind, at) = if attn_at.contains(&i) {
            (BlockKind::Attention(attn.clone()), "self_attn.")
        } else {
            (BlockKind::Mamba2(ssd.clone()), "mamba.")
        };
        blocks.push(Block::new(kind, layer(i), "input_layernorm.weight", at));
        blocks.push(Block::new(
            BlockKind::Mlp(mlp.clone()),
            layer(i),
            "pre_ff_layernorm.weight",
            "feed_forward.",
        ));
    }
    let mut base = base(&v, Arch::Bamba, (d, eps), (128000, false), MODEL_NAMES)?;
    base.max_positions =
        (!attn_at.is_empty()).then(|| size(&v, "max_position_embeddings", 262144)).transpose()?;
    Config::stack(base, blocks)
}
