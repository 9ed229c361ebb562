//! The two `config.json` formats [`Config`] is read from: Hugging Face's `MambaConfig` /
//! `FalconMambaConfig` and the original `state-spaces/mamba` one. Only the fields that matter
//! are declared; serde ignores the rest.

use serde::Deserialize;
use serde_json::Value;

use crate::blocks::{BlockKind, GatedNorm, Mamba1, Mamba2, usable_eps};
use crate::error::{Error, Result};
use crate::model::config::{Arch, Config};
use crate::model::config_fields::{first_eos, inner_width, shared, step_limit};
use crate::model::hybrid;

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

/// What Hugging Face's `Mamba2Config` adds to (or defaults differently from) `MambaConfig`; the
/// rest is read as [`HfConfig`]. Defaults are HF's (5.24): a config.json that leaves a field out
/// means HF's default.
#[derive(Deserialize)]
struct HfMamba2Config {
    hidden_size: usize,
    #[serde(default = "heads_default")]
    num_heads: usize,
    #[serde(default = "head_dim_default")]
    head_dim: usize,
    #[serde(default = "groups_default")]
    n_groups: usize,
    #[serde(default = "ssd_state_default")]
    state_size: usize,
    #[serde(default = "expand_default")]
    expand: f64,
    #[serde(default)]
    tie_word_embeddings: bool,
    #[serde(default = "chunk_default")]
    chunk_size: usize,
    /// Numbers, "Infinity" (see `quote_non_finite`) or HF 5's {"__float__": "Infinity"}.
    time_step_limit: Option<Vec<Value>>,
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
fn mixer_eps_default() -> f32 {
    1e-6
}
fn act_default() -> String {
    "silu".into()
}
fn pad_default() -> usize {
    8
}
fn heads_default() -> usize {
    128
}
fn head_dim_default() -> usize {
    64
}
fn groups_default() -> usize {
    8
}
fn ssd_state_default() -> usize {
    128
}
fn chunk_default() -> usize {
    256
}
fn layer_default() -> String {
    "Mamba1".into()
}

fn check_act(act: &str) -> Result<()> {
    if act == "silu" {
        Ok(())
    } else {
        Err(Error::UnsupportedModel(format!("hidden_act {act:?} (Mamba uses \"silu\")")))
    }
}

/// How one model type's config.json becomes a [`Config`].
type Parser = fn(Value) -> Result<Config>;

/// The registry: each `model_type` webmamba runs and how its config.json becomes a [`Config`]
/// (the original `state-spaces/mamba` format has no `model_type`: it is known by `d_model`).
const REGISTRY: &[(&str, Parser)] = &[
    ("mamba", |v| from_hf(v, Arch::Mamba)),
    ("falcon_mamba", |v| from_hf(v, Arch::FalconMamba)),
    ("mamba2", from_hf_mamba2),
    ("granitemoehybrid", hybrid::granite),
    ("bamba", hybrid::bamba),
    ("nemotron_h", hybrid::nemotron_h),
    ("jamba", hybrid::jamba),
    ("falcon_h1", hybrid::falcon_h1),
    ("zamba2", hybrid::zamba2),
    ("lfm2", hybrid::lfm2),
    ("qwen3_5_text", hybrid::qwen3_5_text),
    ("qwen3_5", hybrid::qwen3_5),
];

/// `value` (a parsed config.json) as a checked [`Config`].
pub(super) fn parse(value: Value) -> Result<Config> {
    if value.get("d_model").is_some() {
        return from_original(value);
    }
    let Some(model_type) = value.get("model_type").and_then(Value::as_str) else {
        return Err(Error::UnsupportedModel("config.json has neither \"model_type\" nor \"d_model\"".into()));
    };
    match REGISTRY.iter().find(|(name, _)| *name == model_type) {
        Some((_, parse)) => parse(value.clone()),
        None => Err(Error::UnsupportedModel(format!(
            "model_type {model_type:?} (webmamba runs {})",
            REGISTRY.iter().map(|(name, _)| format!("{name:?}")).collect::<Vec<_>>().join(", ")
        ))),
    }
}

fn from_hf_mamba2(value: Value) -> Result<Config> {
    let c: HfMamba2Config = serde_json::from_value(value.clone())
        .map_err(|e| Error::Config(format!("Hugging Face Mamba2ForCausalLM config: {e}")))?;
    // The fields Mamba-1 reads the same way (time_step_rank and mixer_rms_eps are kept but
    // unused: they are part of the model's identity).
    let (m1, base, n_layer) = hf(value, Arch::Mamba2)?;
    let kind = Mamba2 {
        // HF's Mamba2Mixer: int(expand × hidden_size), whatever else config.json says.
        d_inner: inner_width(c.expand, c.hidden_size)?,
        d_state: c.state_size,
        d_conv: m1.d_conv,
        n_heads: c.num_heads,
        head_dim: c.head_dim,
        n_groups: c.n_groups,
        chunk_size: c.chunk_size,
        time_step_limit: step_limit(c.time_step_limit)?,
        use_bias: m1.use_bias,
        out_bias: m1.use_bias,
        use_conv_bias: m1.use_conv_bias,
        norm_eps: base.norm_eps,
        gated_norm: GatedNorm::GateThenNorm,
        in_scales: [1.0; 5],
        unused: (m1.dt_rank, base.mixer_rms_eps),
    };
    let shared = Config { tie_embeddings: c.tie_word_embeddings, ..base.shared };
    Config::uniform(shared, BlockKind::Mamba2(kind), n_layer)
}

fn from_hf(value: Value, arch: Arch) -> Result<Config> {
    let (m1, base, n_layer) = hf(value, arch)?;
    let kind = Mamba1 { dbc_norm_eps: (arch == Arch::FalconMamba).then_some(base.mixer_rms_eps), ..m1 };
    Config::uniform(base.shared, BlockKind::Mamba1(kind), n_layer)
}

/// What HF's Mamba-family configs read alike besides the block: the shared parts (no blocks
/// yet), ε of the model's norms and `mixer_rms_eps`.
struct HfShared {
    shared: Config,
    norm_eps: f32,
    mixer_rms_eps: f32,
}

/// A Mamba-family HF config.json as a Mamba-1 block (no Falcon norms yet), the shared parts,
/// and the layer count.
fn hf(value: Value, arch: Arch) -> Result<(Mamba1, HfShared, usize)> {
    let c: HfConfig = serde_json::from_value(value)
        .map_err(|e| Error::Config(format!("Hugging Face {} config: {e}", arch.hf_class())))?;
    check_act(&c.hidden_act)?;
    usable_eps("mixer_rms_eps", c.mixer_rms_eps)?;
    // As HF transformers (5.x): `intermediate_size` when config.json has it (even where it
    // is not expand × hidden_size: HF then builds and runs the mixer at that width), else
    // int(expand × hidden_size). The weights' shapes are checked against it (`Layout`).
    let d_inner = match c.intermediate_size {
        Some(0) => return Err(Error::Config("intermediate_size is 0".into())),
        Some(n) => n,
        None => inner_width(c.expand, c.hidden_size)?,
    };
    let block = Mamba1 {
        d_inner,
        d_state: c.state_size,
        d_conv: c.conv_kernel,
        dt_rank: c.time_step_rank.resolve(c.hidden_size, "time_step_rank")?,
        use_bias: c.use_bias,
        use_conv_bias: c.use_conv_bias,
        dbc_norm_eps: None,
        dbc_gains: false,
    };
    let eos = first_eos(c.eos_token_id);
    let shared = shared(c.hidden_size, c.vocab_size, c.layer_norm_epsilon, c.tie_word_embeddings, eos, arch);
    let base = HfShared { shared, norm_eps: c.layer_norm_epsilon, mixer_rms_eps: c.mixer_rms_eps };
    Ok((block, base, c.num_hidden_layers))
}

fn from_original(value: Value) -> Result<Config> {
    let c: OriginalConfig = serde_json::from_value(value)
        .map_err(|e| Error::Config(format!("state-spaces Mamba config: {e}")))?;
    if c.ssm_cfg.layer != "Mamba1" {
        return Err(Error::UnsupportedModel(format!(
            "ssm_cfg.layer {:?} in the original state-spaces format (webmamba reads Mamba1 there; \
             Mamba-2 from a Hugging Face Mamba2ForCausalLM config.json)",
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
    let kind = Mamba1 {
        d_inner: inner_width(c.ssm_cfg.expand, c.d_model)?,
        d_state: c.ssm_cfg.d_state,
        d_conv: c.ssm_cfg.d_conv,
        dt_rank: c.ssm_cfg.dt_rank.resolve(c.d_model, "ssm_cfg.dt_rank")?,
        use_bias: c.ssm_cfg.bias,
        use_conv_bias: c.ssm_cfg.conv_bias,
        dbc_norm_eps: None,
        dbc_gains: false,
    };
    let shared = shared(c.d_model, vocab_size, c.norm_epsilon, c.tie_embeddings, None, Arch::Mamba);
    Config::uniform(shared, BlockKind::Mamba1(kind), c.n_layer)
}
