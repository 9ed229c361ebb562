//! Liquid LFM2 (`"lfm2"`, HF `Lfm2ForCausalLM`): per layer a gated short convolution
//! ("conv") or attention with per-head q/k norms ("full_attention") after `operator_norm`, then
//! a SwiGLU MLP (`w1`, `w3`, `w2`) after `ffn_norm`; the final norm is `embedding_norm`. The
//! layer pattern is `layer_types`, else `full_attn_idxs` (HF's default: every layer attention).

use serde_json::Value;

use crate::blocks::{Activation, Block, BlockKind, Mlp, MlpNames, QkNorm, ShortConv};
use crate::error::{Error, Result};
use crate::model::config::{Arch, Config, Names};
use crate::model::hybrid::{attention, base, flag, layer, layer_count, number, rope, size, whole};

/// LFM2's own tensors: the final norm is `embedding_norm`.
const NAMES: Names = Names { embedding: "model.embed_tokens.weight", norm_f: "model.embedding_norm.weight" };

/// Which layers are attention: `layer_types` ("conv" / "full_attention"), else the layers
/// `full_attn_idxs` lists, else every layer (HF's default).
fn attention_layers(v: &Value, n_layer: usize) -> Result<Vec<bool>> {
    if let Some(list) = v.get("layer_types").filter(|l| !l.is_null()) {
        let Some(list) = list.as_array() else {
            return Err(Error::Config(format!("layer_types must be a list of strings, not {list}")));
        };
        if list.len() != n_layer {
            return Err(Error::Config(format!(
                "layer_types has {} entries for num_hidden_layers {n_layer}",
                list.len()
            )));
        }
        return list
            .iter()
            .map(|x| match x.as_str() {
                Some("conv") => Ok(false),
                Some("full_attention") => Ok(true),
                Some(other) => Err(Error::UnsupportedModel(format!("layer_types: layer type {other:?}"))),
                None => Err(Error::Config(format!("layer_types must be a list of strings, not {x}"))),
            })
            .collect();
    }
    match v.get("full_attn_idxs") {
        None | Some(Value::Null) => Ok(vec![true; n_layer]),
        Some(Value::Array(list)) => {
            let mut at = vec![false; n_layer];
            for x in list {
                let i = whole(x).filter(|&i| i < n_layer).ok_or_else(|| {
                    Error::Config(format!("full_attn_idxs must be layer numbers below {n_layer}, not {x}"))
                })?;
                at[i] = true;
            }
            Ok(at)
        }
        Some(other) => Err(Error::Config(format!("full_attn_idxs must be a list, not {other}"))),
    }
}

/// The MLP's width as HF's `Lfm2MLP` derives it: with `block_auto_adjust_ff_dim`, ⌊2·I/3⌋,
/// then (when `block_ffn_dim_multiplier` is set) ⌊m · that⌋ rounded up to a multiple of
/// `block_multiple_of`.
fn mlp_width(v: &Value) -> Result<usize> {
    let given = match v.get("block_ff_dim").filter(|x| !x.is_null()) {
        Some(_) => size(v, "block_ff_dim", 12288)?,
        None => size(v, "intermediate_size", 12288)?,
    };
    if !flag(v, "block_auto_adjust_ff_dim", true)? {
        return Ok(given);
    }
    let mut width = (2.0 * given as f64 / 3.0) as usize;
    if v.get("block_ffn_dim_multiplier").is_none_or(|m| !m.is_null()) {
        let multiplier = number(v, "block_ffn_dim_multiplier", 1.0)?;
        if !(multiplier.is_finite() && multiplier > 0.0) {
            return Err(Error::Config(format!("block_ffn_dim_multiplier {multiplier} is not usable")));
        }
        width = (multiplier * width as f64) as usize;
        let multiple = size(v, "block_multiple_of", 256)?;
        if multiple == 0 {
            return Err(Error::Config("block_multiple_of must be positive".into()));
        }
        width = width.div_ceil(multiple).checked_mul(multiple).ok_or_else(|| {
            Error::Config(format!("the MLP width {width} rounded to a multiple of {multiple} overflows"))
        })?;
    }
    Ok(width)
}

/// config.json of an LFM2 checkpoint as a [`Config`].
pub(crate) fn parse(mut v: Value) -> Result<Config> {
    let d = size(&v, "hidden_size", 2560)?;
    let n_layer = layer_count(&v, 32)?;
    let eps = number(&v, "norm_eps", 1e-5)? as f32;
    let heads = size(&v, "num_attention_heads", 32)?;
    let kv_heads = size(&v, "num_key_value_heads", 8)?;
    let head_dim = d.checked_div(heads).unwrap_or(0);
    let at = attention_layers(&v, n_layer)?;
    // θ: `rope_parameters` (HF 5, also per layer type: its "full_attention" entry), else
    // `rope_theta` or the original `theta` (default 10⁶).
    if let Some(inner) = v.get("rope_parameters").and_then(|p| p.get("full_attention")).cloned() {
        v["rope_parameters"] = inner;
    }
    if v.get("rope_theta").is_none() {
        v["rope_theta"] = v.get("theta").cloned().unwrap_or(1e6.into());
    }
    let rope = rope(&v, head_dim, 1.0, false)?;
    let mut attn = attention(heads, kv_heads, head_dim, Some(rope));
    attn.qk_norm = Some(QkNorm { eps, names: ("q_layernorm", "k_layernorm"), plus_one: false });
    attn.o_name = "out_proj";
    let conv =
        ShortConv { channels: d, taps: size(&v, "conv_L_cache", 3)?, bias: flag(&v, "conv_bias", false)? };
    let mlp = Mlp {
        inner: mlp_width(&v)?,
        act: Activation::Silu,
        names: MlpNames::W123,
        bias: false,
        scales: (1.0, 1.0),
    };
    let mut blocks = Vec::with_capacity(2 * n_layer);
    for (i, &attends) in at.iter().enumerate() {
        let (kind, at) = if attends {
            (BlockKind::Attention(attn.clone()), "self_attn.")
        } else {
            (BlockKind::ShortConv(conv.clone()), "conv.")
        };
        blocks.push(Block::new(kind, layer(i), "operator_norm.weight", at));
        blocks.push(Block::new(BlockKind::Mlp(mlp.clone()), layer(i), "ffn_norm.weight", "feed_forward."));
    }
    let tie = match v.get("tie_embedding") {
        Some(t) if !t.is_null() => flag(&v, "tie_embedding", true)?,
        _ => flag(&v, "tie_word_embeddings", true)?,
    };
    let mut base = base(&v, Arch::Lfm2, (d, eps), (65536, tie), NAMES)?;
    base.tie_embeddings = tie;
    base.max_positions =
        at.contains(&true).then(|| size(&v, "max_position_embeddings", 128_000)).transpose()?;
    Config::stack(base, blocks)
}
