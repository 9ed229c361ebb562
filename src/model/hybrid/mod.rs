//! config.json of the hybrid SSM + attention models (Granite-4.0-H, Bamba, Nemotron-H, Jamba,
//! Falcon-H1, Zamba2) as a stack of [`Block`]s: what every family reads alike — the layer
//! pattern in each of its spellings, rotary embeddings, a Mamba-2 mixer from `mamba_*` fields —
//! here; each family's own layout in its file. Field names and defaults are HF transformers
//! 5.24's (`configuration_<family>.py`). Anything not understood is
//! [`Error::UnsupportedModel`] naming the field and its value, never a silently different model.

mod bamba;
mod falcon_h1;
mod granite;
mod jamba;
mod lfm2;
mod nemotron_h;
mod qwen3_5;
mod zamba2;

pub(super) use bamba::parse as bamba;
pub(super) use falcon_h1::parse as falcon_h1;
pub(super) use granite::parse as granite;
pub(super) use jamba::parse as jamba;
pub(super) use lfm2::parse as lfm2;
pub(super) use nemotron_h::parse as nemotron_h;
pub(super) use qwen3_5::{parse_multimodal as qwen3_5, parse_text as qwen3_5_text};
pub(super) use zamba2::parse as zamba2;

use serde_json::Value;

use crate::blocks::{Attention, Block, GatedNorm, Mamba2, Rope};
use crate::error::{Error, Result};
use crate::model::config::{Arch, Config, Names};
use crate::model::config_fields::{first_eos, shared, step_limit};

/// What one layer of a hybrid is, as its config names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LayerType {
    /// A Mamba mixer ("mamba", HF 5's "linear_attention"; Nemotron-H's 'M').
    Mamba,
    /// Attention ("attention", "full_attention"; '*').
    Attention,
    /// A dense MLP on its own (Nemotron-H's "mlp", '-').
    Mlp,
    /// A mixture of experts on its own (Nemotron-H's "moe", 'E').
    Moe,
    /// Zamba2's shared attention block before a Mamba mixer ("hybrid").
    Hybrid,
}

impl LayerType {
    /// The layer type `name` (Hub and HF 5 spellings alike) in `field`.
    pub(crate) fn parse(field: &str, name: &str) -> Result<Self> {
        Ok(match name {
            "mamba" | "linear_attention" => LayerType::Mamba,
            "attention" | "full_attention" => LayerType::Attention,
            "mlp" => LayerType::Mlp,
            "moe" => LayerType::Moe,
            "hybrid" => LayerType::Hybrid,
            other => return Err(Error::UnsupportedModel(format!("{field}: layer type {other:?}"))),
        })
    }
}

/// The list of layer types in `field` of `v`, if config.json has it.
pub(crate) fn layer_list(v: &Value, field: &str) -> Result<Option<Vec<LayerType>>> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(list)) => list
            .iter()
            .map(|x| match x.as_str() {
                Some(name) => LayerType::parse(field, name),
                None => Err(Error::Config(format!("{field} must be a list of strings, not {x}"))),
            })
            .collect::<Result<Vec<_>>>()
            .map(Some),
        Some(other) => Err(Error::Config(format!("{field} must be a list of strings, not {other}"))),
    }
}

/// Fails unless `list` has one entry per layer (`n_layer`).
pub(crate) fn check_len(field: &str, list: &[LayerType], n_layer: usize) -> Result<()> {
    if list.len() == n_layer {
        Ok(())
    } else {
        Err(Error::Config(format!("{field} has {} entries for num_hidden_layers {n_layer}", list.len())))
    }
}

/// The rotary embedding config.json describes for heads of `head_dim`: `rope_parameters`
/// (HF 5) or `rope_scaling` (4.x) with `rope_type`/`type` "default" (or none), θ from them or
/// `rope_theta` (default 10000), the rotated share from them or, where `top_level_factor`, a
/// top-level `partial_rotary_factor`, else `default_factor`. Any other rope type (linear,
/// dynamic, yarn, llama3, longrope) is [`Error::UnsupportedModel`].
pub(crate) fn rope(v: &Value, head_dim: usize, default_factor: f64, top_level_factor: bool) -> Result<Rope> {
    let mut theta = v.get("rope_theta").and_then(Value::as_f64).unwrap_or(10000.0);
    let mut factor = if top_level_factor {
        v.get("partial_rotary_factor").and_then(Value::as_f64).unwrap_or(default_factor)
    } else {
        default_factor
    };
    for field in ["rope_scaling", "rope_parameters"] {
        let Some(params) = v.get(field).filter(|p| !p.is_null()) else { continue };
        let Some(params) = params.as_object() else {
            return Err(Error::Config(format!("{field} must be an object, not {params}")));
        };
        let kind = params.get("rope_type").or_else(|| params.get("type")).and_then(Value::as_str);
        if let Some(kind) = kind.filter(|k| *k != "default") {
            return Err(Error::UnsupportedModel(format!(
                "{field} type {kind:?} (webmamba runs \"default\" RoPE)"
            )));
        }
        theta = params.get("rope_theta").and_then(Value::as_f64).unwrap_or(theta);
        factor = params.get("partial_rotary_factor").and_then(Value::as_f64).unwrap_or(factor);
    }
    if !(factor > 0.0 && factor <= 1.0) {
        return Err(Error::Config(format!("partial_rotary_factor {factor} is not in (0, 1]")));
    }
    Ok(Rope { theta: theta as f32, dims: (head_dim as f64 * factor) as usize })
}

/// `x` as a size: a whole number that fits usize (in wasm32 too: 2^32 is refused, not
/// wrapped to 0).
pub(crate) fn whole(x: &Value) -> Option<usize> {
    x.as_u64().and_then(|n| usize::try_from(n).ok())
}

/// The size `name` of `v`, or `default` when config.json leaves it out.
pub(crate) fn size(v: &Value, name: &str, default: usize) -> Result<usize> {
    match v.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(x) => whole(x).ok_or_else(|| Error::Config(format!("{name} must be a whole number, not {x}"))),
    }
}

/// The size `name` of `v`, or `auto` when config.json leaves it out or says "auto"
/// (`mamba_d_head`, `mamba_dt_rank`).
pub(crate) fn size_or_auto(v: &Value, name: &str, auto: usize) -> Result<usize> {
    match v.get(name) {
        None | Some(Value::Null) => Ok(auto),
        Some(Value::String(s)) if s == "auto" => Ok(auto),
        Some(x) => {
            whole(x).ok_or_else(|| Error::Config(format!("{name} must be a number or \"auto\", not {x}")))
        }
    }
}

/// Fails unless `hidden_act` (default "silu") is SiLU: the Mamba mixer's conv of `family` runs it.
pub(crate) fn require_silu(v: &Value, family: &str) -> Result<()> {
    match v.get("hidden_act").and_then(Value::as_str).unwrap_or("silu") {
        "silu" => Ok(()),
        other => {
            Err(Error::UnsupportedModel(format!("hidden_act {other:?} ({family}'s Mamba uses \"silu\")")))
        }
    }
}

/// Where most hybrids keep their own tensors (`model.embed_tokens`, `model.final_layernorm`).
pub(crate) const MODEL_NAMES: Names =
    Names { embedding: "model.embed_tokens.weight", norm_f: "model.final_layernorm.weight" };

/// The shared parts of a hybrid of `arch` with residual width `d` and norm ε `eps`: its
/// `vocab_size` and `tie_word_embeddings` (HF's defaults for the family: `defaults`), its first
/// eos id, its own tensors at `names`.
pub(crate) fn base(
    v: &Value,
    arch: Arch,
    (d, eps): (usize, f32),
    defaults: (usize, bool),
    names: Names,
) -> Result<Config> {
    let (vocab, tie) = (size(v, "vocab_size", defaults.0)?, flag(v, "tie_word_embeddings", defaults.1)?);
    let mut base = shared(d, vocab, eps, tie, first_eos(v.get("eos_token_id").cloned()), arch);
    base.names = names;
    Ok(base)
}

/// The number `name` of `v`, or `default`.
pub(crate) fn number(v: &Value, name: &str, default: f64) -> Result<f64> {
    match v.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(x) => x.as_f64().ok_or_else(|| Error::Config(format!("{name} must be a number, not {x}"))),
    }
}

/// The flag `name` of `v`, or `default`.
pub(crate) fn flag(v: &Value, name: &str, default: bool) -> Result<bool> {
    match v.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(x) => x.as_bool().ok_or_else(|| Error::Config(format!("{name} must be true or false, not {x}"))),
    }
}

/// An attention block of `heads` query and `kv_heads` key/value heads of `head_dim`, softmax
/// scale 1/√head_dim, no biases, no multipliers.
pub(crate) fn attention(heads: usize, kv_heads: usize, head_dim: usize, rope: Option<Rope>) -> Attention {
    Attention {
        n_heads: heads,
        n_kv_heads: kv_heads,
        head_dim,
        qkv_bias: false,
        o_bias: false,
        rope,
        scale: 1.0 / (head_dim as f32).sqrt(),
        key_scale: 1.0,
        qk_norm: None,
        o_name: "o_proj",
        output_gate: false,
    }
}

/// The sizes of a hybrid's Mamba-2 mixer.
pub(crate) struct Ssd {
    pub(crate) heads: usize,
    pub(crate) head_dim: usize,
    pub(crate) groups: usize,
    pub(crate) state: usize,
    pub(crate) conv: usize,
    pub(crate) inner: usize,
    pub(crate) chunk: usize,
    pub(crate) limit: (f32, f32),
    pub(crate) bias: bool,
    pub(crate) conv_bias: bool,
    pub(crate) eps: f32,
}

/// A Mamba-2 block of sizes `s` (its gated RMSNorm over `s.groups` groups).
pub(crate) fn mamba2(s: Ssd) -> Mamba2 {
    Mamba2 {
        d_inner: s.inner,
        d_state: s.state,
        d_conv: s.conv,
        n_heads: s.heads,
        head_dim: s.head_dim,
        n_groups: s.groups,
        chunk_size: s.chunk,
        time_step_limit: s.limit,
        use_bias: s.bias,
        out_bias: s.bias,
        use_conv_bias: s.conv_bias,
        norm_eps: s.eps,
        gated_norm: GatedNorm::GateThenNorm,
        in_scales: [1.0; 5],
        unused: (1, s.eps),
    }
}

/// The Mamba-2 mixer that Granite-4.0-H, Bamba and Falcon-H1 describe alike by `mamba_*`
/// fields (HF's defaults: 128 heads of `mamba_d_head` ("auto": inner / heads), 1 group, N 256,
/// K 4, chunk 256, a conv bias, no in_proj bias, `time_step_limit`), `inner` wide, gated-norm
/// ε `eps`.
pub(crate) fn mamba_fields(v: &Value, inner: usize, eps: f32) -> Result<Mamba2> {
    let heads = size(v, "mamba_n_heads", 128)?;
    Ok(mamba2(Ssd {
        heads,
        head_dim: size_or_auto(v, "mamba_d_head", inner.checked_div(heads).unwrap_or(0))?,
        groups: size(v, "mamba_n_groups", 1)?,
        state: size(v, "mamba_d_state", 256)?,
        conv: size(v, "mamba_d_conv", 4)?,
        inner,
        chunk: size(v, "mamba_chunk_size", 256)?,
        limit: step_limit(v.get("time_step_limit").and_then(|l| l.as_array().cloned()))?,
        bias: flag(v, "mamba_proj_bias", false)?,
        conv_bias: flag(v, "mamba_conv_bias", true)?,
        eps,
    }))
}

/// `num_hidden_layers` (default `default`): at most 4096 (no published model has a tenth of
/// that; a hostile count fails here, before any list of layers is allocated).
pub(crate) fn layer_count(v: &Value, default: usize) -> Result<usize> {
    let n = size(v, "num_hidden_layers", default)?;
    if n > 4096 {
        return Err(Error::Config(format!("num_hidden_layers {n}: not a model webmamba can hold")));
    }
    Ok(n)
}

/// `model.layers.{i}.`: where a hybrid's layer i keeps its tensors.
pub(crate) fn layer(i: usize) -> String {
    format!("model.layers.{i}.")
}

/// The blocks' residual multiplier set to `scale`.
pub(crate) fn scaled(mut blocks: Vec<Block>, scale: f32) -> Vec<Block> {
    blocks.iter_mut().for_each(|b| b.residual_scale = scale);
    blocks
}
