//! The two `config.json` formats [`Config`] is read from: Hugging Face's `MambaConfig` /
//! `FalconMambaConfig` and the original `state-spaces/mamba` one. Only the fields that matter
//! are declared; serde ignores the rest.

use serde::Deserialize;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::model::config::{Arch, Config};

/// `time_step_rank` is a number or the string "auto".
#[derive(Deserialize)]
#[serde(untagged)]
enum Rank {
    Auto(String),
    Value(usize),
}

impl Rank {
    fn resolve(self, d_model: usize, field: &str) -> Result<usize> {
        match self {
            Rank::Value(r) => Ok(r),
            Rank::Auto(s) if s == "auto" => Ok(d_model.div_ceil(16)),
            Rank::Auto(s) => Err(Error::Config(format!("{field} must be a number or \"auto\", not {s:?}"))),
        }
    }
}

fn default_true() -> bool {
    true
}

/// Hugging Face `MambaConfig` (the fields that matter; others are ignored).
#[derive(Deserialize)]
struct HfConfig {
    vocab_size: usize,
    hidden_size: usize,
    num_hidden_layers: usize,
    #[serde(default = "d_state_default")]
    state_size: usize,
    #[serde(default = "d_conv_default")]
    conv_kernel: usize,
    #[serde(default = "expand_default")]
    expand: f64,
    intermediate_size: Option<usize>,
    #[serde(default = "rank_default")]
    time_step_rank: Rank,
    #[serde(default)]
    use_bias: bool,
    #[serde(default = "default_true")]
    use_conv_bias: bool,
    #[serde(default = "eps_default")]
    layer_norm_epsilon: f32,
    #[serde(default = "default_true")]
    tie_word_embeddings: bool,
    #[serde(default = "act_default")]
    hidden_act: String,
    eos_token_id: Option<Value>,
    /// Falcon-Mamba: ε of the weightless RMSNorms on Δ's input, B and C.
    #[serde(default = "mixer_eps_default")]
    mixer_rms_eps: f32,
}

/// The original `state-spaces/mamba` `MambaConfig`.
#[derive(Deserialize)]
struct OriginalConfig {
    d_model: usize,
    n_layer: usize,
    vocab_size: usize,
    #[serde(default)]
    ssm_cfg: OriginalSsmConfig,
    #[serde(default = "default_true")]
    rms_norm: bool,
    #[serde(default = "pad_default")]
    pad_vocab_size_multiple: usize,
    #[serde(default = "default_true")]
    tie_embeddings: bool,
    #[serde(default = "eps_default")]
    norm_epsilon: f32,
}

#[derive(Deserialize)]
struct OriginalSsmConfig {
    #[serde(default = "layer_default")]
    layer: String,
    #[serde(default = "d_state_default")]
    d_state: usize,
    #[serde(default = "d_conv_default")]
    d_conv: usize,
    #[serde(default = "expand_default")]
    expand: f64,
    #[serde(default = "rank_default")]
    dt_rank: Rank,
    #[serde(default = "default_true")]
    conv_bias: bool,
    #[serde(default)]
    bias: bool,
}

impl Default for OriginalSsmConfig {
    fn default() -> Self {
        // Deserializing `{}` applies the same defaults as the serde attributes above.
        serde_json::from_str("{}").expect("defaults of an empty ssm_cfg")
    }
}

fn d_state_default() -> usize {
    16
}
fn d_conv_default() -> usize {
    4
}
fn expand_default() -> f64 {
    2.0
}
fn rank_default() -> Rank {
    Rank::Auto("auto".into())
}
fn eps_default() -> f32 {
    1e-5
}
/// HF `FalconMambaConfig.mixer_rms_eps`'s default.
const MIXER_EPS_DEFAULT: f32 = 1e-6;
fn mixer_eps_default() -> f32 {
    MIXER_EPS_DEFAULT
}
fn act_default() -> String {
    "silu".into()
}
fn pad_default() -> usize {
    8
}
fn layer_default() -> String {
    "Mamba1".into()
}

/// E·D = int(expand × D), as HF computes it; `expand` must be a positive finite number.
fn inner_width(expand: f64, d_model: usize) -> Result<usize> {
    let width = expand * d_model as f64;
    if !(expand.is_finite() && expand > 0.0 && width < u32::MAX as f64) {
        return Err(Error::Config(format!("expand {expand} × hidden_size {d_model} is not a usable width")));
    }
    Ok(width as usize)
}

impl Config {
    pub(super) fn from_hf(value: Value, arch: Arch) -> Result<Self> {
        let c: HfConfig = serde_json::from_value(value)
            .map_err(|e| Error::Config(format!("Hugging Face {} config: {e}", arch.hf_class())))?;
        if c.hidden_act != "silu" {
            return Err(Error::UnsupportedModel(format!(
                "hidden_act {:?} (Mamba uses \"silu\")",
                c.hidden_act
            )));
        }
        // As HF transformers (5.x): `intermediate_size` when config.json has it (even where it
        // is not expand × hidden_size: HF then builds and runs the mixer at that width), else
        // int(expand × hidden_size). The weights' shapes are checked against it (`Layout`).
        let d_inner = match c.intermediate_size {
            Some(0) => return Err(Error::Config("intermediate_size is 0".into())),
            Some(n) => n,
            None => inner_width(c.expand, c.hidden_size)?,
        };
        // HF allows a list of eos ids; the first ends generation.
        let eos_token_id = match c.eos_token_id {
            Some(Value::Number(n)) => n.as_u64().map(|v| v as u32),
            Some(Value::Array(ids)) => ids.first().and_then(Value::as_u64).map(|v| v as u32),
            _ => None,
        };
        Ok(Config {
            d_model: c.hidden_size,
            n_layer: c.num_hidden_layers,
            d_inner,
            d_state: c.state_size,
            d_conv: c.conv_kernel,
            dt_rank: c.time_step_rank.resolve(c.hidden_size, "time_step_rank")?,
            vocab_size: c.vocab_size,
            use_bias: c.use_bias,
            use_conv_bias: c.use_conv_bias,
            norm_eps: c.layer_norm_epsilon,
            tie_embeddings: c.tie_word_embeddings,
            eos_token_id,
            arch,
            mixer_rms_eps: c.mixer_rms_eps,
        })
    }

    pub(super) fn from_original(value: Value) -> Result<Self> {
        let c: OriginalConfig = serde_json::from_value(value)
            .map_err(|e| Error::Config(format!("state-spaces Mamba config: {e}")))?;
        if c.ssm_cfg.layer != "Mamba1" {
            return Err(Error::UnsupportedModel(format!(
                "ssm_cfg.layer {:?} (webmamba runs Mamba1)",
                c.ssm_cfg.layer
            )));
        }
        if !c.rms_norm {
            return Err(Error::UnsupportedModel("rms_norm = false (LayerNorm blocks)".into()));
        }
        let multiple = c.pad_vocab_size_multiple.max(1);
        let vocab_size = c.vocab_size.div_ceil(multiple).checked_mul(multiple).ok_or_else(|| {
            Error::Config(format!("vocab_size {} padded to a multiple of {multiple} overflows", c.vocab_size))
        })?;
        Ok(Config {
            d_model: c.d_model,
            n_layer: c.n_layer,
            d_inner: inner_width(c.ssm_cfg.expand, c.d_model)?,
            d_state: c.ssm_cfg.d_state,
            d_conv: c.ssm_cfg.d_conv,
            dt_rank: c.ssm_cfg.dt_rank.resolve(c.d_model, "ssm_cfg.dt_rank")?,
            vocab_size,
            use_bias: c.ssm_cfg.bias,
            use_conv_bias: c.ssm_cfg.conv_bias,
            norm_eps: c.norm_epsilon,
            tie_embeddings: c.tie_embeddings,
            eos_token_id: None,
            arch: Arch::Mamba,
            mixer_rms_eps: MIXER_EPS_DEFAULT,
        })
    }
}
