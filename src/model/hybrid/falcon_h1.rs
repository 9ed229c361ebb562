//! TII Falcon-H1 (`"falcon_h1"`, HF `FalconH1ForCausalLM`): every layer attention ∥ Mamba-2 on
//! the same normed input, then a gated MLP; µP multipliers on the embeddings, the LM head, both
//! branches' inputs and outputs, the keys, in_proj's five segments and the MLP.

use serde_json::Value;

use crate::blocks::{Activation, Block, BlockKind, GatedNorm, Mlp, MlpNames, Parallel};
use crate::error::{Error, Result};
use crate::model::config::{Arch, Config, Scales};
use crate::model::config_fields::inner_width;
use crate::model::hybrid::{
    MODEL_NAMES, attention, base, flag, layer, layer_count, mamba_fields, number, require_silu, rope, size,
};

/// The list of `n` numbers `name` of `v` (default all 1).
fn multipliers<const N: usize>(v: &Value, name: &str) -> Result<[f32; N]> {
    match v.get(name) {
        None | Some(Value::Null) => Ok([1.0; N]),
        Some(Value::Array(list)) if list.len() == N => {
            let mut out = [1.0; N];
            for (o, x) in out.iter_mut().zip(list) {
                *o = x.as_f64().ok_or_else(|| Error::Config(format!("{name} must be numbers, not {x}")))?
                    as f32;
            }
            Ok(out)
        }
        Some(other) => Err(Error::Config(format!("{name} must be a list of {N} numbers, not {other}"))),
    }
}

/// config.json of a Falcon-H1 checkpoint as a [`Config`].
pub(crate) fn parse(v: Value) -> Result<Config> {
    let d = size(&v, "hidden_size", 4096)?;
    let n_layer = layer_count(&v, 32)?;
    let eps = number(&v, "rms_norm_eps", 1e-5)? as f32;
    require_silu(&v, "Falcon-H1")?;
    let heads = size(&v, "num_attention_heads", 32)?;
    let kv_heads = size(&v, "num_key_value_heads", heads)?;
    let head_dim = size(&v, "head_dim", d.checked_div(heads).unwrap_or(0))?;
    // Falcon-H1 rotates whole heads (its default rope ignores partial_rotary_factor).
    let mut rope = rope(&v, head_dim, 1.0, false)?;
    rope.dims = head_dim;
    let mut attn = attention(heads, kv_heads, head_dim, Some(rope));
    attn.qkv_bias = flag(&v, "attention_bias", false)?;
    attn.o_bias = attn.qkv_bias;
    attn.key_scale = number(&v, "key_multiplier", 1.0)? as f32;
    // The Mamba width: mamba_d_ssm (HF's default 1024; null: mamba_expand × hidden_size).
    let inner = match v.get("mamba_d_ssm") {
        None => 1024,
        Some(Value::Null) => inner_width(number(&v, "mamba_expand", 2.0)?, d)?,
        Some(_) => size(&v, "mamba_d_ssm", 1024)?,
    };
    let mut mamba = mamba_fields(&v, inner, eps)?;
    mamba.out_bias = flag(&v, "projectors_bias", false)?;
    mamba.gated_norm = match (flag(&v, "mamba_rms_norm", false)?, flag(&v, "mamba_norm_before_gate", true)?) {
        (false, _) => GatedNorm::GateOnly,
        (true, true) => GatedNorm::NormThenGate,
        (true, false) => GatedNorm::GateThenNorm,
    };
    mamba.in_scales = multipliers::<5>(&v, "ssm_multipliers")?;
    let parallel = Parallel {
        attention: attn,
        mamba,
        attention_scales: (
            number(&v, "attention_in_multiplier", 1.0)? as f32,
            number(&v, "attention_out_multiplier", 1.0)? as f32,
        ),
        mamba_scales: (
            number(&v, "ssm_in_multiplier", 1.0)? as f32,
            number(&v, "ssm_out_multiplier", 1.0)? as f32,
        ),
    };
    let [gate, down] = multipliers::<2>(&v, "mlp_multipliers")?;
    let mlp = Mlp {
        inner: size(&v, "intermediate_size", 14336)?,
        act: Activation::Silu,
        names: MlpNames::Separate,
        bias: flag(&v, "mlp_bias", false)?,
        scales: (gate, down),
    };
    let mut blocks = Vec::with_capacity(2 * n_layer);
    for i in 0..n_layer {
        blocks.push(Block::new(
            BlockKind::Parallel(parallel.clone()),
            layer(i),
            "input_layernorm.weight",
            "",
        ));
        blocks.push(Block::new(
            BlockKind::Mlp(mlp.clone()),
            layer(i),
            "pre_ff_layernorm.weight",
            "feed_forward.",
        ));
    }
    let mut base = base(&v, Arch::FalconH1, (d, eps), (128000, false), MODEL_NAMES)?;
    base.scales = Scales {
        embedding: number(&v, "embedding_multiplier", 1.0)? as f32,
        logits: number(&v, "lm_head_multiplier", 1.0)? as f32,
    };
    base.max_positions = Some(size(&v, "max_position_embeddings", 8192)?);
    Config::stack(base, blocks)
}
