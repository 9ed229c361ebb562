//! [`Config`]: the model's hyper-parameters, parsed from a checkpoint's `config.json`.
//!
//! Two formats are accepted (`config_formats.rs`):
//! - Hugging Face `MambaForCausalLM` (`"model_type": "mamba"`: `hidden_size`,
//!   `num_hidden_layers`, `state_size`, `conv_kernel`, `expand`/`intermediate_size`,
//!   `time_step_rank`, `use_bias`, `use_conv_bias`, `layer_norm_epsilon`, ...) and
//!   `FalconMambaForCausalLM` (`"falcon_mamba"`: the same fields and `mixer_rms_eps`) and
//!   `Mamba2ForCausalLM` (`"mamba2"`: `num_heads`, `head_dim`, `n_groups`, `chunk_size`,
//!   `time_step_limit`; its width is int(`expand` × `hidden_size`));
//! - the original `state-spaces/mamba-*` format (`d_model`, `n_layer`, `ssm_cfg`,
//!   `pad_vocab_size_multiple`), recognised by its `d_model` key.
//!
//! Every field that changes the math is honoured; nothing is hard-coded. Fields that do not
//! matter at inference are accepted and ignored: `rescale_prenorm_residual` and the
//! `time_step_{min,max,floor,scale,init_scheme}`/`initializer_range` fields only shape the
//! initialisation of a model being trained; `use_cache`/`use_mambapy`/`fused_add_norm` choose
//! an implementation, not the result. `residual_in_fp32` is honoured trivially: webmamba keeps
//! the residual stream in f32 always.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::model::state_layout::Extent;

/// Index of a Mamba block's conv window among its state regions.
pub const MAMBA_CONV: usize = 0;
/// Index of a Mamba block's SSM state among its state regions.
pub const MAMBA_SSM: usize = 1;

/// Which architecture a checkpoint is (`model_type` in config.json).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// Mamba-1 (`MambaForCausalLM`, `"mamba"`; the original `state-spaces/mamba-*` format).
    Mamba,
    /// Falcon-Mamba (`FalconMambaForCausalLM`, `"falcon_mamba"`): Mamba-1 with weightless
    /// RMSNorms (ε = `mixer_rms_eps`) on x_proj's three outputs — Δ's input, B and C — before
    /// they are used.
    FalconMamba,
    /// Mamba-2 (`Mamba2ForCausalLM`, `"mamba2"`): the SSD mixer — one in_proj to z ‖ x ‖ B ‖ C
    /// ‖ Δ, a conv over x ‖ B ‖ C, a scalar A and Δ per head, B and C per group, and a gated
    /// RMSNorm before out_proj.
    Mamba2,
}

impl Arch {
    /// The `model_type` of its HF config (also what exported states and `info` call it).
    pub fn name(self) -> &'static str {
        match self {
            Arch::Mamba => "mamba",
            Arch::FalconMamba => "falcon_mamba",
            Arch::Mamba2 => "mamba2",
        }
    }

    /// The HF class that runs it.
    pub fn hf_class(self) -> &'static str {
        match self {
            Arch::Mamba => "MambaForCausalLM",
            Arch::FalconMamba => "FalconMambaForCausalLM",
            Arch::Mamba2 => "Mamba2ForCausalLM",
        }
    }
}

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
    /// The architecture.
    pub arch: Arch,
    /// ε of Falcon-Mamba's weightless RMSNorms on Δ's input, B and C (`mixer_rms_eps`;
    /// unused by [`Arch::Mamba`]).
    pub mixer_rms_eps: f32,
    /// H: Mamba-2's heads (`num_heads`), each with one A, D, Δ bias and Δ per token; H · P =
    /// E·D. Mamba-1: E·D (every channel its own head).
    pub n_heads: usize,
    /// P: channels per head (`head_dim`). Mamba-1: 1.
    pub head_dim: usize,
    /// G: Mamba-2's groups of heads sharing one B and C per token (`n_groups`); also the groups
    /// of the gated RMSNorm. Mamba-1: 1.
    pub n_groups: usize,
    /// Mamba-2's `chunk_size`: the chunk of HF's (and the CUDA kernels') SSD scan. It does not
    /// change the result, so webmamba's kernels choose their own; kept for the HF config.
    pub chunk_size: usize,
    /// Mamba-2: Δ is clamped to [min, max] after the softplus (`time_step_limit`; (0, ∞) is no
    /// clamp). Mamba-1: (0, ∞).
    pub time_step_limit: (f32, f32),
}

impl Config {
    /// Parses `config.json` bytes in either format and checks the result.
    pub fn from_json(bytes: &[u8]) -> Result<Self> {
        // HF writes an unbounded `time_step_limit` as Python's bare `Infinity` (not JSON).
        let value: Value = serde_json::from_slice(&quote_non_finite(bytes))
            .map_err(|e| Error::Config(format!("config.json is not valid JSON: {e}")))?;
        let config = if value.get("d_model").is_some() {
            Self::from_original(value)?
        } else {
            match value.get("model_type").and_then(Value::as_str) {
                Some("mamba") => Self::from_hf(value, Arch::Mamba)?,
                Some("falcon_mamba") => Self::from_hf(value, Arch::FalconMamba)?,
                Some("mamba2") => Self::from_hf_mamba2(value)?,
                Some(other) => {
                    return Err(Error::UnsupportedModel(format!(
                        "model_type {other:?} (webmamba runs \"mamba\", \"falcon_mamba\" and \"mamba2\" checkpoints)"
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

    fn validate(&self) -> Result<()> {
        let sizes = [
            ("d_model", self.d_model),
            ("n_layer", self.n_layer),
            ("d_inner", self.d_inner),
            ("d_state", self.d_state),
            ("d_conv", self.d_conv),
            ("dt_rank", self.dt_rank),
            ("vocab_size", self.vocab_size),
            ("num_heads", self.n_heads),
            ("head_dim", self.head_dim),
            ("n_groups", self.n_groups),
        ];
        for (name, v) in sizes {
            if v == 0 {
                return Err(Error::Config(format!("{name} must be positive")));
            }
        }
        if !(self.norm_eps.is_finite() && self.norm_eps >= 0.0) {
            return Err(Error::Config(format!("layer_norm_epsilon {} is not usable", self.norm_eps)));
        }
        if !(self.mixer_rms_eps.is_finite() && self.mixer_rms_eps >= 0.0) {
            return Err(Error::Config(format!("mixer_rms_eps {} is not usable", self.mixer_rms_eps)));
        }
        if self.n_heads.checked_mul(self.head_dim) != Some(self.d_inner) {
            return Err(Error::Config(format!(
                "num_heads {} × head_dim {} must be the inner width {}",
                self.n_heads, self.head_dim, self.d_inner
            )));
        }
        if !self.n_heads.is_multiple_of(self.n_groups) {
            return Err(Error::Config(format!(
                "num_heads {} is not a multiple of n_groups {}",
                self.n_heads, self.n_groups
            )));
        }
        let (lo, hi) = self.time_step_limit;
        if !(lo >= 0.0 && lo <= hi && !hi.is_nan()) {
            return Err(Error::Config(format!("time_step_limit ({lo}, {hi}) is not a usable range")));
        }
        // Every tensor and the whole state must be countable in u32 (what GPU indices hold; a
        // 2.8B model's largest tensor has 129M elements): sizes from a hostile config must not
        // wrap into small, misleading numbers.
        let (d, di, n, k, r, v) =
            (self.d_model, self.d_inner, self.d_state, self.d_conv, self.dt_rank, self.vocab_size);
        let mul = |a: usize, b: usize| a.checked_mul(b);
        let conv_dim = mul(2 * self.n_groups, n).and_then(|x| x.checked_add(di));
        let state = mul(di, n)
            .zip(conv_dim.and_then(|cd| mul(cd, k - 1)))
            .and_then(|(a, b)| a.checked_add(b))
            .and_then(|s| mul(s, self.n_layer));
        let counts = [
            ("embedding (vocab_size × hidden_size)", mul(v, d)),
            (
                "in_proj (its outputs × hidden_size)",
                conv_dim.and_then(|cd| cd.checked_add(di + self.n_heads)).and_then(|x| mul(x, d)),
            ),
            (
                "x_proj ((time_step_rank + 2 × state_size) × intermediate_size)",
                mul(2, n).and_then(|x| x.checked_add(r)).and_then(|x| mul(x, di)),
            ),
            ("dt_proj (intermediate_size × time_step_rank)", mul(di, r)),
            ("A_log (intermediate_size × state_size)", mul(di, n)),
            ("conv1d (its channels × conv_kernel)", conv_dim.and_then(|cd| mul(cd, k))),
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

    /// This config as a Hugging Face `config.json` (`MambaForCausalLM`,
    /// `FalconMambaForCausalLM` or `Mamba2ForCausalLM`) that parses back to it.
    pub fn to_hf_json(&self) -> String {
        // `intermediate_size` carries the width (HF and `from_json` take it over expand), and
        // HF 5.24's strict `MambaConfig` wants an integer `expand`: 2, not 2.0 (which it
        // rejects: our random checkpoints did not load in HF before this). So expand is the
        // quotient when it is whole, else the nearest whole number at least 1.
        let expand = (self.d_inner as f64 / self.d_model.max(1) as f64).round().max(1.0) as u64;
        // The f32 epsilon as the decimal it was written as (1e-5, not 9.999999747378752e-6).
        let decimal = |x: f32| x.to_string().parse::<f64>().unwrap_or(f64::from(x));
        let eps = decimal(self.norm_eps);
        let mut json = serde_json::json!({
            "architectures": [self.arch.hf_class()],
            "model_type": self.arch.name(),
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
        });
        if self.arch == Arch::FalconMamba {
            json["mixer_rms_eps"] = decimal(self.mixer_rms_eps).into();
        }
        if self.arch == Arch::Mamba2 {
            // HF's Mamba2 width is expand × hidden_size (no intermediate_size field).
            json["num_heads"] = self.n_heads.into();
            json["head_dim"] = self.head_dim.into();
            json["n_groups"] = self.n_groups.into();
            json["chunk_size"] = self.chunk_size.into();
            let (lo, hi) = self.time_step_limit;
            if lo != 0.0 || hi.is_finite() {
                json["time_step_limit"] = serde_json::json!([decimal(lo), decimal(hi)]);
            }
        }
        json.to_string()
    }

    /// The text of this config that a model's fingerprint hashes (so exported states name
    /// their model). For Mamba-1 it is exactly what `{:?}` printed before `arch` and
    /// `mixer_rms_eps` existed, so states exported by earlier builds still import; other
    /// architectures append both (and Mamba-2 its head layout and Δ clamp).
    pub fn identity(&self) -> String {
        let base = format!(
            "Config {{ d_model: {:?}, n_layer: {:?}, d_inner: {:?}, d_state: {:?}, d_conv: {:?}, \
             dt_rank: {:?}, vocab_size: {:?}, use_bias: {:?}, use_conv_bias: {:?}, norm_eps: {:?}, \
             tie_embeddings: {:?}, eos_token_id: {:?}",
            self.d_model,
            self.n_layer,
            self.d_inner,
            self.d_state,
            self.d_conv,
            self.dt_rank,
            self.vocab_size,
            self.use_bias,
            self.use_conv_bias,
            self.norm_eps,
            self.tie_embeddings,
            self.eos_token_id,
        );
        match self.arch {
            Arch::Mamba => format!("{base} }}"),
            Arch::FalconMamba => {
                format!("{base}, arch: {:?}, mixer_rms_eps: {:?} }}", self.arch.name(), self.mixer_rms_eps)
            }
            Arch::Mamba2 => format!(
                "{base}, arch: {:?}, mixer_rms_eps: {:?}, n_heads: {:?}, head_dim: {:?}, n_groups: {:?}, \
                 time_step_limit: {:?} }}",
                self.arch.name(),
                self.mixer_rms_eps,
                self.n_heads,
                self.head_dim,
                self.n_groups,
                self.time_step_limit,
            ),
        }
    }

    /// The state regions of one block, in the order its [`LayerState`](crate::model::LayerState)
    /// holds them ([`MAMBA_CONV`], [`MAMBA_SSM`]): the conv window (K−1, conv_dim) and the SSM
    /// state (E·D, N) — Mamba-2 reads it as (H, P, N).
    pub fn state_regions(&self) -> Vec<(&'static str, Extent)> {
        vec![
            ("conv", Extent::Fixed((self.d_conv - 1) * self.conv_dim())),
            ("ssm", Extent::Fixed(self.d_inner * self.d_state)),
        ]
    }

    /// Width of `x_proj`'s output: Δ (R) ‖ B (N) ‖ C (N). (Mamba-1 and Falcon-Mamba.)
    pub fn x_proj_dim(&self) -> usize {
        self.dt_rank + 2 * self.d_state
    }

    /// Channels of the conv1d (and of its carried window): x (E·D) for Mamba-1; x ‖ B ‖ C
    /// (E·D + 2·G·N) for Mamba-2.
    pub fn conv_dim(&self) -> usize {
        match self.arch {
            Arch::Mamba2 => self.d_inner + 2 * self.n_groups * self.d_state,
            Arch::Mamba | Arch::FalconMamba => self.d_inner,
        }
    }

    /// Width of `in_proj`'s output: x ‖ z (2·E·D) for Mamba-1; z ‖ x ‖ B ‖ C ‖ Δ
    /// (E·D + conv_dim + H) for Mamba-2.
    pub fn in_proj_dim(&self) -> usize {
        match self.arch {
            Arch::Mamba2 => self.d_inner + self.conv_dim() + self.n_heads,
            Arch::Mamba | Arch::FalconMamba => 2 * self.d_inner,
        }
    }
}

/// `bytes` with every bare `Infinity`, `-Infinity` and `NaN` outside strings (what Python's
/// `json.dumps` writes for non-finite floats, and JSON does not allow) turned into a string
/// (`"Infinity"`...), which the fields that accept them read back.
fn quote_non_finite(bytes: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    const WORDS: [&[u8]; 3] = [b"-Infinity", b"Infinity", b"NaN"];
    let (mut out, mut in_string, mut escaped, mut i) = (Vec::new(), false, false, 0);
    let mut changed = false;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            (escaped, in_string) = match (escaped, b) {
                (true, _) => (false, true),
                (false, b'\\') => (true, true),
                (false, b'"') => (false, false),
                _ => (false, true),
            };
        } else if b == b'"' {
            in_string = true;
        } else if let Some(word) = WORDS.iter().find(|w| bytes[i..].starts_with(w)) {
            out.push(b'"');
            out.extend_from_slice(word);
            out.push(b'"');
            i += word.len();
            changed = true;
            continue;
        }
        out.push(b);
        i += 1;
    }
    if changed { std::borrow::Cow::Owned(out) } else { std::borrow::Cow::Borrowed(bytes) }
}
