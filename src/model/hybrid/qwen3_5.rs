//! Qwen3.5 (`"qwen3_5_text"`, HF `Qwen3_5ForCausalLM`; `"qwen3_5"`, HF
//! `Qwen3_5ForConditionalGeneration`, the Hub's checkpoints: the text model's fields under
//! `text_config`, its tensors under `model.language_model.`, a vision tower under
//! `model.visual.` that is never read). Per layer a Gated DeltaNet ("linear_attention") or
//! gated attention ("full_attention": an output gate from q_proj, per-head q/k norms, partial
//! RoPE) after `input_layernorm`, then a SwiGLU MLP after `post_attention_layernorm`; every
//! RMSNorm around the blocks, the final one and the q/k norms are zero-centred (`1 + w`). The
//! layer pattern is `layer_types`, else every `full_attention_interval`-th layer (default 4)
//! attention. Field names and defaults are HF transformers 5.25's (`configuration_qwen3_5.py`).

use serde_json::Value;

use crate::blocks::{Activation, Block, BlockKind, DeltaNet, Mlp, MlpNames, QkNorm};
use crate::error::{Error, Result};
use crate::model::config::{Arch, Config, Names};
use crate::model::hybrid::{
    LayerType, attention, base, check_len, flag, layer_count, layer_list, number, rope, size,
};

/// The text model's own tensors in a `Qwen3_5ForCausalLM` checkpoint.
const TEXT_NAMES: Names = Names { embedding: "model.embed_tokens.weight", norm_f: "model.norm.weight" };

/// …and in the Hub's multimodal one.
const MULTIMODAL_NAMES: Names = Names {
    embedding: "model.language_model.embed_tokens.weight",
    norm_f: "model.language_model.norm.weight",
};

/// config.json of a `Qwen3_5ForCausalLM` checkpoint as a [`Config`].
pub(crate) fn parse_text(v: Value) -> Result<Config> {
    let tie = flag(&v, "tie_word_embeddings", false)?;
    stack(&v, (Arch::Qwen3_5Text, "model.", TEXT_NAMES), tie)
}

/// config.json of a `Qwen3_5ForConditionalGeneration` checkpoint: its `text_config`.
pub(crate) fn parse_multimodal(v: Value) -> Result<Config> {
    let text = match v.get("text_config") {
        Some(t @ Value::Object(_)) => t,
        Some(other) => return Err(Error::Config(format!("text_config must be an object, not {other}"))),
        None => return Err(Error::Config("a qwen3_5 config.json needs its text_config".into())),
    };
    // The multimodal model ties (or not) by its own field.
    let tie = match v.get("tie_word_embeddings") {
        Some(t) if !t.is_null() => flag(&v, "tie_word_embeddings", false)?,
        _ => flag(text, "tie_word_embeddings", false)?,
    };
    let mut text = text.clone();
    if text.get("eos_token_id").is_none_or(Value::is_null) {
        text["eos_token_id"] = v.get("eos_token_id").cloned().unwrap_or(Value::Null);
    }
    stack(&text, (Arch::Qwen3_5, "model.language_model.", MULTIMODAL_NAMES), tie)
}

/// The text model of fields `v`, its layers under `prefix` + `layers.N.`.
fn stack(v: &Value, (arch, prefix, names): (Arch, &str, Names), tie: bool) -> Result<Config> {
    let d = size(v, "hidden_size", 4096)?;
    let n_layer = layer_count(v, 32)?;
    let eps = number(v, "rms_norm_eps", 1e-6)? as f32;
    let types = match layer_list(v, "layer_types")? {
        Some(list) => {
            check_len("layer_types", &list, n_layer)?;
            list
        }
        None => {
            let every = size(v, "full_attention_interval", 4)?;
            if every == 0 {
                return Err(Error::Config("full_attention_interval must be positive".into()));
            }
            let kind = |i: usize| {
                if (i + 1).is_multiple_of(every) { LayerType::Attention } else { LayerType::Mamba }
            };
            (0..n_layer).map(kind).collect()
        }
    };
    let heads = size(v, "num_attention_heads", 16)?;
    let kv_heads = size(v, "num_key_value_heads", 4)?;
    let head_dim = size(v, "head_dim", 256)?;
    let mut attn = attention(heads, kv_heads, head_dim, Some(rope(v, head_dim, 0.25, true)?));
    attn.qkv_bias = flag(v, "attention_bias", false)?;
    attn.o_bias = attn.qkv_bias;
    attn.qk_norm = Some(QkNorm { eps, names: ("q_norm", "k_norm"), plus_one: true });
    attn.output_gate = true;
    let delta = DeltaNet {
        k_heads: size(v, "linear_num_key_heads", 16)?,
        v_heads: size(v, "linear_num_value_heads", 32)?,
        k_dim: size(v, "linear_key_head_dim", 128)?,
        v_dim: size(v, "linear_value_head_dim", 128)?,
        conv: size(v, "linear_conv_kernel_dim", 4)?,
        eps,
    };
    match v.get("hidden_act").and_then(Value::as_str).unwrap_or("silu") {
        "silu" => {}
        other => {
            return Err(Error::UnsupportedModel(format!("hidden_act {other:?} (Qwen3.5 uses \"silu\")")));
        }
    }
    let mlp = Mlp {
        inner: size(v, "intermediate_size", 12288)?,
        act: Activation::Silu,
        names: MlpNames::Separate,
        bias: false,
        scales: (1.0, 1.0),
    };
    let mut blocks = Vec::with_capacity(2 * n_layer);
    for (i, t) in types.iter().enumerate() {
        let (kind, at) = match t {
            LayerType::Mamba => (BlockKind::DeltaNet(delta.clone()), "linear_attn."),
            LayerType::Attention => (BlockKind::Attention(attn.clone()), "self_attn."),
            other => {
                return Err(Error::UnsupportedModel(format!("layer_types: {other:?} layers in Qwen3.5")));
            }
        };
        let layer = format!("{prefix}layers.{i}.");
        blocks.push(Block::new(kind, layer.clone(), "input_layernorm.weight", at));
        blocks.push(Block::new(
            BlockKind::Mlp(mlp.clone()),
            layer,
            "post_attention_layernorm.weight",
            "mlp.",
        ));
    }
    let mut base = base(v, arch, (d, eps), (248320, tie), names)?;
    base.tie_embeddings = tie;
    base.zero_centred_norms = true;
    base.max_positions = types
        .contains(&LayerType::Attention)
        .then(|| size(v, "max_position_embeddings", 32768))
        .transpose()?;
    Config::stack(base, blocks)
}
