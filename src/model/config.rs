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

use crate::blocks::{Block, BlockKind, positive, usable_eps};
use crate::error::{Error, Result};
use crate::model::state_layout::{Extent, StateLayout};

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
    /// IBM Granite-4.0-H (`GraniteMoeHybridForCausalLM`, `"granitemoehybrid"`).
    GraniteMoeHybrid,
    /// IBM Bamba (`BambaForCausalLM`, `"bamba"`).
    Bamba,
    /// NVIDIA Nemotron-H (`NemotronHForCausalLM`, `"nemotron_h"`).
    NemotronH,
    /// AI21 Jamba (`JambaForCausalLM`, `"jamba"`).
    Jamba,
    /// TII Falcon-H1 (`FalconH1ForCausalLM`, `"falcon_h1"`).
    FalconH1,
    /// Zyphra Zamba2 (`Zamba2ForCausalLM`, `"zamba2"`).
    Zamba2,
    /// Liquid LFM2 (`Lfm2ForCausalLM`, `"lfm2"`): gated short convolutions and attention.
    Lfm2,
    /// Qwen3.5's text model (`Qwen3_5ForCausalLM`, `"qwen3_5_text"`): Gated DeltaNet and gated
    /// attention.
    Qwen3_5Text,
    /// Qwen3.5 as the Hub has it (`Qwen3_5ForConditionalGeneration`, `"qwen3_5"`): the text
    /// model of a vision-language checkpoint.
    Qwen3_5,
}

impl Arch {
    /// The `model_type` of its HF config (also what exported states and `info` call it).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Arch::Mamba => "mamba",
            Arch::FalconMamba => "falcon_mamba",
            Arch::Mamba2 => "mamba2",
            Arch::GraniteMoeHybrid => "granitemoehybrid",
            Arch::Bamba => "bamba",
            Arch::NemotronH => "nemotron_h",
            Arch::Jamba => "jamba",
            Arch::FalconH1 => "falcon_h1",
            Arch::Zamba2 => "zamba2",
            Arch::Lfm2 => "lfm2",
            Arch::Qwen3_5Text => "qwen3_5_text",
            Arch::Qwen3_5 => "qwen3_5",
        }
    }

    /// The HF class that runs it.
    pub(crate) fn hf_class(self) -> &'static str {
        match self {
            Arch::Mamba => "MambaForCausalLM",
            Arch::FalconMamba => "FalconMambaForCausalLM",
            Arch::Mamba2 => "Mamba2ForCausalLM",
            Arch::GraniteMoeHybrid => "GraniteMoeHybridForCausalLM",
            Arch::Bamba => "BambaForCausalLM",
            Arch::NemotronH => "NemotronHForCausalLM",
            Arch::Jamba => "JambaForCausalLM",
            Arch::FalconH1 => "FalconH1ForCausalLM",
            Arch::Zamba2 => "Zamba2ForCausalLM",
            Arch::Lfm2 => "Lfm2ForCausalLM",
            Arch::Qwen3_5Text => "Qwen3_5ForCausalLM",
            Arch::Qwen3_5 => "Qwen3_5ForConditionalGeneration",
        }
    }

    /// Whether it is one of the pure Mamba architectures (one Mamba block per layer).
    pub(crate) fn is_pure_mamba(self) -> bool {
        matches!(self, Arch::Mamba | Arch::FalconMamba | Arch::Mamba2)
    }
}

/// Where a model's own tensors (outside its blocks) are named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Names {
    /// The token embeddings (`backbone.embeddings.weight`, `model.embed_tokens.weight`).
    pub(crate) embedding: &'static str,
    /// The final RMSNorm's gain (`backbone.norm_f.weight`, `model.norm.weight`...).
    pub(crate) norm_f: &'static str,
}

impl Names {
    /// The Mamba checkpoints' names (`backbone.…`).
    pub(crate) const MAMBA: Names =
        Names { embedding: "backbone.embeddings.weight", norm_f: "backbone.norm_f.weight" };
}

/// Multipliers of a model's ends (µP-style models; 1 elsewhere).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scales {
    /// Multiplies the embeddings (Granite's and Falcon-H1's `embedding_multiplier`).
    pub(crate) embedding: f32,
    /// Multiplies the logits (1 / Granite's `logits_scaling`; Falcon-H1's `lm_head_multiplier`).
    pub(crate) logits: f32,
}

impl Scales {
    /// No scaling.
    pub(crate) const NONE: Scales = Scales { embedding: 1.0, logits: 1.0 };
}

/// A model's hyper-parameters, normalised from any config format: the parts every model
/// shares, and its blocks, one [`BlockKind`] per layer. Symbols as in the paper.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// D: width of the residual stream (`hidden_size` / `d_model`).
    pub d_model: usize,
    /// V: rows of the embedding and LM head (already padded).
    pub vocab_size: usize,
    /// ε of the RMSNorms around the blocks (`layer_norm_epsilon` / `norm_epsilon`).
    pub norm_eps: f32,
    /// Whether the LM head shares the embedding matrix (`tie_word_embeddings` /
    /// `tie_embeddings`). When a checkpoint has an `lm_head.weight` anyway, it is used.
    pub tie_embeddings: bool,
    /// Token id that ends a generation, when the config names one.
    pub eos_token_id: Option<u32>,
    /// The architecture (`model_type`): what exported states and `info` call the model.
    pub arch: Arch,
    /// The blocks in order: one per layer for Mamba (`num_hidden_layers` / `n_layer` of them),
    /// a hybrid layer's mixer and its feed-forward as two.
    pub blocks: Vec<Block>,
    /// Its own tensors' names.
    pub names: Names,
    /// Its ends' multipliers.
    pub scales: Scales,
    /// The longest context its positions were trained for (`max_position_embeddings`), where
    /// it has rotary embeddings.
    pub max_positions: Option<usize>,
    /// Whether the RMSNorms around the blocks and the final one are zero-centred (Qwen3.5's
    /// `x̂ · (1 + w)`): their gains get 1 added as they are loaded.
    pub zero_centred_norms: bool,
}

impl Config {
    /// The model of shared parts `shared` (its `blocks` ignored) with `n_layer` blocks of
    /// `kind`, checked: the kind's sizes first, then the whole state's, before the list exists
    /// (a hostile `num_hidden_layers` fails here, not as an allocation).
    pub(crate) fn uniform(shared: Config, kind: BlockKind, n_layer: usize) -> Result<Self> {
        positive(&[("n_layer", n_layer)])?;
        kind.validate(shared.d_model)?;
        check_state(state_floats(&kind).checked_mul(n_layer))?;
        let block = |i| Block::new(kind.clone(), format!("backbone.layers.{i}."), "norm.weight", "mixer.");
        let config = Self { blocks: (0..n_layer).map(block).collect(), ..shared };
        config.validate()?;
        Ok(config)
    }

    /// The model of shared parts `shared` (its `blocks` ignored) with `blocks`, checked.
    pub(crate) fn stack(shared: Config, blocks: Vec<Block>) -> Result<Self> {
        positive(&[("num_hidden_layers", blocks.len())])?;
        let mut total = Some(0usize);
        for b in &blocks {
            b.kind.validate(shared.d_model)?;
            total = total.and_then(|t| t.checked_add(state_floats(&b.kind)));
        }
        check_state(total)?;
        for (name, v) in
            [("embedding_multiplier", shared.scales.embedding), ("the logits' scale", shared.scales.logits)]
                .into_iter()
                .chain(blocks.iter().map(|b| ("residual_multiplier", b.residual_scale)))
        {
            if !v.is_finite() {
                return Err(Error::Config(format!("{name} {v} is not usable")));
            }
        }
        let config = Self { blocks, ..shared };
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<()> {
        positive(&[("d_model", self.d_model), ("vocab_size", self.vocab_size)])?;
        usable_eps("layer_norm_epsilon", self.norm_eps)?;
        if self.vocab_size.checked_mul(self.d_model).is_none_or(|n| n >= u32::MAX as usize) {
            return Err(Error::Config(
                "embedding (vocab_size × hidden_size) would have more than 2^32 elements: these sizes are \
                 not a model webmamba can hold"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Layers (blocks).
    pub fn n_layer(&self) -> usize {
        self.blocks.len()
    }

    /// The layout of this model's state: each block's regions.
    pub fn state_layout(&self) -> StateLayout {
        StateLayout::new(&self.blocks.iter().map(|b| b.kind.state_regions()).collect::<Vec<_>>())
    }

    /// Fails unless every id is inside the vocabulary.
    pub(crate) fn check_ids(&self, tokens: &[u32]) -> Result<()> {
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
    pub(crate) fn check_forward(
        &self,
        tokens: &[u32],
        positions: impl IntoIterator<Item = usize>,
    ) -> Result<()> {
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
}

/// Floats of one block's state (a growing region counted for one token).
fn state_floats(kind: &BlockKind) -> usize {
    kind.state_regions()
        .iter()
        .map(|(_, e)| match e {
            Extent::Fixed(n) | Extent::PerToken(n) => *n,
        })
        .fold(0usize, usize::saturating_add)
}

/// Fails unless a state of `floats` (None: it overflowed) is countable in u32.
fn check_state(floats: Option<usize>) -> Result<()> {
    if floats.is_none_or(|n| n >= u32::MAX as usize) {
        return Err(Error::Config(
            "the recurrent state (layers × each layer's state) would have more than 2^32 elements: \
             these sizes are not a model webmamba can hold"
                .into(),
        ));
    }
    Ok(())
}
