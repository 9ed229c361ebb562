//! [`Config`]: the model's hyper-parameters, parsed from a checkpoint's `config.json`.
//!
//! Two formats are accepted:
//! - Hugging Face `MambaForCausalLM` (`"model_type": "mamba"`: `hidden_size`,
//!   `num_hidden_layers`, `state_size`, `conv_kernel`, `expand`/`intermediate_size`,
//!   `time_step_rank`, `use_bias`, `use_conv_bias`, `layer_norm_epsilon`, ...);
//! - the original `state-spaces/mamba-*` format (`d_model`, `n_layer`, `ssm_cfg`,
//!   `pad_vocab_size_multiple`), recognised by its `d_model` key.
//!
//! Every field that changes the math is honoured; nothing is hard-coded. Fields that do not
//! matter at inference are accepted and ignored: `rescale_prenorm_residual` and the
//! `time_step_{min,max,floor,scale,init_scheme}`/`initializer_range` fields only shape the
//! initialisation of a model being trained; `use_cache`/`use_mambapy`/`fused_add_norm` choose
//! an implementation, not the result. `residual_in_fp32` is honoured trivially: webmamba keeps
//! the residual stream in f32 always.

use serde::Deserialize;
use serde_json::Value;

use crate::error::{Error, Result};

/// Mamba hyper-parameters, normalised from either config format. Symbols as in the paper.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// D: width of the residual stream (`hidden_size` / `d_model`).
    pub d_model: usize,
    /// Number of Mamba blocks (`num_hidden_layers` / `n_layer`).
    pub n_layer: usize,
    /// E·D: width inside a block (`intermediate_size`, or `expand * d_model`).
    pub d_inner: usize,
    /// N: SSM state size per channel (`state_size` / `d_state`).
    pub d_state: usize,
    /// K: causal conv1d kernel width (`conv_kernel` / `d_conv`).
    pub d_conv: usize,
    /// R: rank of the Δ projection (`time_step_rank` / `dt_rank`; "auto" = ceil(D / 16)).
    pub dt_rank: usize,
    /// V: rows of the embedding and LM head (already padded).
    pub vocab_size: usize,
    /// Whether `in_proj` and `out_proj` have biases (`use_bias` / `ssm_cfg.bias`).
    pub use_bias: bool,
    /// Whether the depthwise conv1d has a bias (`use_conv_bias` / `ssm_cfg.conv_bias`).
    pub use_conv_bias: bool,
    /// ε of every RMSNorm (`layer_norm_epsilon` / `norm_epsilon`).
    pub norm_eps: f32,
    /// Whether the LM head shares the embedding matrix (`tie_word_embeddings` /
    /// `tie_embeddings`). When a checkpoint has an `lm_head.weight` anyway, it is used.
    pub tie_embeddings: bool,
    /// Token id that ends a generation, when the config names one.
    pub eos_token_id: Option<u32>,
}

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
    /// Parses `config.json` bytes in either format and checks the result.
    pub fn from_json(bytes: &[u8]) -> Result<Self> {
        let value: Value = serde_json::from_slice(bytes)
            .map_err(|e| Error::Config(format!("config.json is not valid JSON: {e}")))?;
        let config = if value.get("d_model").is_some() {
            Self::from_original(value)?
        } else {
            match value.get("model_type").and_then(Value::as_str) {
                Some("mamba") => Self::from_hf(value)?,
                Some(other) => {
                    return Err(Error::UnsupportedModel(format!(
                        "model_type {other:?} (webmamba runs Mamba-1 checkpoints: \"mamba\")"
                    )));
                }
                None => {
                    return Err(Error::UnsupportedModel(
                        "config.json has neither \"model_type\" nor \"d_model\"".into(),
                    ));
                }
            }
        };
        config.validate()?;
        Ok(config)
    }

    fn from_hf(value: Value) -> Result<Self> {
        let c: HfConfig = serde_json::from_value(value)
            .map_err(|e| Error::Config(format!("Hugging Face Mamba config: {e}")))?;
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
        })
    }

    fn from_original(value: Value) -> Result<Self> {
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
        })
    }

    fn validate(&self) -> Result<()> {
        let sizes = [
            ("d_model", self.d_model),
            ("n_layer", self.n_layer),
            ("d_inner", self.d_inner),
            ("d_state", self.d_state),
            ("d_conv", self.d_conv),
            ("dt_rank", self.dt_rank),
            ("vocab_size", self.vocab_size),
        ];
        for (name, v) in sizes {
            if v == 0 {
                return Err(Error::Config(format!("{name} must be positive")));
            }
        }
        if !(self.norm_eps.is_finite() && self.norm_eps >= 0.0) {
            return Err(Error::Config(format!("layer_norm_epsilon {} is not usable", self.norm_eps)));
        }
        // Every tensor and the whole state must be countable in u32 (what GPU indices hold; a
        // 2.8B model's largest tensor has 129M elements): sizes from a hostile config must not
        // wrap into small, misleading numbers.
        let (d, di, n, k, r, v) =
            (self.d_model, self.d_inner, self.d_state, self.d_conv, self.dt_rank, self.vocab_size);
        let mul = |a: usize, b: usize| a.checked_mul(b);
        let state = mul(di, n)
            .zip(mul(di, k - 1))
            .and_then(|(a, b)| a.checked_add(b))
            .and_then(|s| mul(s, self.n_layer));
        let counts = [
            ("embedding (vocab_size × hidden_size)", mul(v, d)),
            ("in_proj (2 × intermediate_size × hidden_size)", mul(2, di).and_then(|x| mul(x, d))),
            (
                "x_proj ((time_step_rank + 2 × state_size) × intermediate_size)",
                mul(2, n).and_then(|x| x.checked_add(r)).and_then(|x| mul(x, di)),
            ),
            ("dt_proj (intermediate_size × time_step_rank)", mul(di, r)),
            ("A_log (intermediate_size × state_size)", mul(di, n)),
            ("conv1d (intermediate_size × conv_kernel)", mul(di, k)),
            ("the recurrent state (layers × intermediate_size × (state_size + conv_kernel − 1))", state),
        ];
        for (what, count) in counts {
            if count.is_none_or(|c| c > u32::MAX as usize) {
                return Err(Error::Config(format!(
                    "{what} would have more than 2^32 elements: these sizes are not a model webmamba can hold"
                )));
            }
        }
        Ok(())
    }

    /// Fails unless every id is inside the vocabulary.
    pub fn check_ids(&self, tokens: &[u32]) -> Result<()> {
        match tokens.iter().find(|&&t| t as usize >= self.vocab_size) {
            Some(bad) => Err(Error::InvalidInput(format!(
                "token id {bad} is outside the vocabulary (size {})",
                self.vocab_size
            ))),
            None => Ok(()),
        }
    }

    /// The checks every forward pass makes before touching any state: at least one token, ids
    /// inside the vocabulary, checkpoint positions ascending and within the tokens.
    pub fn check_forward(&self, tokens: &[u32], positions: impl IntoIterator<Item = usize>) -> Result<()> {
        if tokens.is_empty() {
            return Err(Error::InvalidInput("forward needs at least one token".into()));
        }
        self.check_ids(tokens)?;
        let mut previous = None;
        for p in positions {
            if previous.is_some_and(|q| q >= p) || p >= tokens.len() {
                return Err(Error::InvalidInput("checkpoint positions must ascend within the tokens".into()));
            }
            previous = Some(p);
        }
        Ok(())
    }

    /// This config as a Hugging Face `config.json` (`MambaForCausalLM`) that parses back to it.
    pub fn to_hf_json(&self) -> String {
        // `intermediate_size` carries the width (HF and `from_json` take it over expand), and
        // HF 5.24's strict `MambaConfig` wants an integer `expand`: 2, not 2.0 (which it
        // rejects: our random checkpoints did not load in HF before this). So expand is the
        // quotient when it is whole, else the nearest whole number at least 1.
        let expand = (self.d_inner as f64 / self.d_model.max(1) as f64).round().max(1.0) as u64;
        // The f32 epsilon as the decimal it was written as (1e-5, not 9.999999747378752e-6).
        let eps = self.norm_eps.to_string().parse::<f64>().unwrap_or(f64::from(self.norm_eps));
        serde_json::json!({
            "architectures": ["MambaForCausalLM"],
            "model_type": "mamba",
            "vocab_size": self.vocab_size,
            "hidden_size": self.d_model,
            "num_hidden_layers": self.n_layer,
            "intermediate_size": self.d_inner,
            "expand": expand,
            "state_size": self.d_state,
            "conv_kernel": self.d_conv,
            "time_step_rank": self.dt_rank,
            "use_bias": self.use_bias,
            "use_conv_bias": self.use_conv_bias,
            "layer_norm_epsilon": eps,
            "tie_word_embeddings": self.tie_embeddings,
            "eos_token_id": self.eos_token_id,
        })
        .to_string()
    }

    /// Width of `x_proj`'s output: Δ (R) ‖ B (N) ‖ C (N).
    pub fn x_proj_dim(&self) -> usize {
        self.dt_rank + 2 * self.d_state
    }
}
