//! What the config.json formats read alike — a Mamba width from `expand`, the first of HF's eos
//! ids, `time_step_limit` in each of its spellings, the shared parts of a [`Config`] — for the
//! pure Mamba formats (`config_formats.rs`) and the hybrids (`hybrid/`).

use serde_json::Value;

use crate::error::{Error, Result};
use crate::model::config::{Arch, Config, Names, Scales};

/// E·D = int(expand × D), as HF computes it; `expand` must be a positive finite number.
pub(crate) fn inner_width(expand: f64, d_model: usize) -> Result<usize> {
    let width = expand * d_model as f64;
    if !(expand.is_finite() && expand > 0.0 && width < u32::MAX as f64) {
        return Err(Error::Config(format!("expand {expand} × hidden_size {d_model} is not a usable width")));
    }
    Ok(width as usize)
}

/// HF allows a list of eos ids; the first ends generation.
pub(crate) fn first_eos(eos: Option<Value>) -> Option<u32> {
    match eos {
        Some(Value::Number(n)) => n.as_u64().map(|v| v as u32),
        Some(Value::Array(ids)) => ids.first().and_then(Value::as_u64).map(|v| v as u32),
        _ => None,
    }
}

/// `time_step_limit`: two numbers (or "Infinity"); absent means (0, ∞).
pub(crate) fn step_limit(limit: Option<Vec<Value>>) -> Result<(f32, f32)> {
    let Some(limit) = limit else { return Ok((0.0, f32::INFINITY)) };
    let bad = || Error::Config(format!("time_step_limit must be two numbers, not {limit:?}"));
    // HF 5.x writes ∞ as {"__float__": "Infinity"}; older versions as a bare `Infinity`.
    let number = |v: &Value| match v {
        Value::Number(n) => n.as_f64().map(|x| x as f32),
        Value::String(s) if s == "Infinity" => Some(f32::INFINITY),
        Value::Object(o) if o.get("__float__").and_then(Value::as_str) == Some("Infinity") => {
            Some(f32::INFINITY)
        }
        _ => None,
    };
    match limit.as_slice() {
        [lo, hi] => Ok((number(lo).ok_or_else(bad)?, number(hi).ok_or_else(bad)?)),
        _ => Err(bad()),
    }
}

/// The parts every model shares, with no blocks yet.
pub(crate) fn shared(
    d_model: usize,
    vocab_size: usize,
    norm_eps: f32,
    tie: bool,
    eos: Option<u32>,
    arch: Arch,
) -> Config {
    Config {
        d_model,
        vocab_size,
        norm_eps,
        tie_embeddings: tie,
        eos_token_id: eos,
        arch,
        blocks: Vec::new(),
        names: Names::MAMBA,
        scales: Scales::NONE,
        max_positions: None,
        zero_centred_norms: false,
    }
}
