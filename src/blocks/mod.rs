//! [`Block`] and [`BlockKind`]: what one residual block of a model is, with its own
//! hyper-parameters. A model is the parts every model shares ([`Config`](crate::model::Config):
//! width, vocabulary, norms, tying, multipliers) and a list of blocks, each `h ← h + s ·
//! kind(rms_norm(h))`; config.json says which (`Config::from_json`), nothing is inferred from
//! which weights happen to exist. A Mamba model has one block per layer; a hybrid's layer is
//! usually two (its mixer — Mamba or attention — then its MLP or mixture of experts).
//!
//! Each kind owns, in `src/blocks/<kind>/`, its tensors (names, shapes, roles), its state
//! regions and checks (`mod.rs`), its CPU forward (`cpu.rs`) and its GPU plan (`gpu.rs`).

pub mod attention;
pub(crate) mod decode;
pub(crate) mod gpu;
pub(crate) mod gpu_common;
pub mod mamba1;
pub mod mamba2;
pub mod mlp;
pub mod moe;
pub mod parallel;
pub mod ssm;
pub mod zamba2;

pub use attention::{Attention, Rope};
pub use mamba1::Mamba1;
pub use mamba2::{GatedNorm, Mamba2};
pub use mlp::{Activation, Mlp, MlpNames};
pub use moe::{ExpertLayout, Moe, Routing};
pub use parallel::Parallel;
pub use zamba2::{SharedBlock, Zamba2Layer};

use crate::error::{Error, Result};
use crate::model::{Extent, Matrix, Part};

/// Index of the conv window among a Mamba block's state regions (both kinds).
pub const CONV: usize = 0;
/// Index of the SSM state among a Mamba block's state regions (both kinds).
pub const SSM: usize = 1;

/// One residual block: `h ← h + residual_scale · kind(rms_norm(h) ⊙ norm)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// What it computes.
    pub kind: BlockKind,
    /// Where its tensors are: the layer's prefix (`backbone.layers.3.`, `model.layers.3.`).
    pub prefix: String,
    /// Its RMSNorm's gain under `prefix` (`norm.weight`, `input_layernorm.weight`).
    pub norm: String,
    /// The kind's tensors' prefix under `prefix` (`mixer.`, `mamba.`, `self_attn.`; empty
    /// where the kind names its own, as a mixture of experts with a shared MLP beside it).
    pub at: &'static str,
    /// Multiplies the block's output before the residual add (Granite's
    /// `residual_multiplier`; 1 elsewhere).
    pub residual_scale: f32,
}

impl Block {
    /// A block of `kind` at `prefix` + `at` with its norm at `prefix` + `norm`, unscaled.
    pub fn new(kind: BlockKind, prefix: String, norm: &str, at: &'static str) -> Self {
        Self { kind, prefix, norm: norm.to_string(), at, residual_scale: 1.0 }
    }

    /// Its tensors, full names, for residual width `d`: the norm, then the kind's.
    pub fn tensors(&self, d: usize) -> Vec<Tensor> {
        let norm = Tensor::new(Part::Norm, &format!("{}{}", self.prefix, self.norm), vec![d], true);
        let kind = under(&format!("{}{}", self.prefix, self.at), self.kind.tensors(d));
        [vec![norm], kind].concat()
    }
}

/// One block's kind and hyper-parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum BlockKind {
    /// A Mamba-1 block (Mamba, Falcon-Mamba, Jamba).
    Mamba1(Mamba1),
    /// A Mamba-2 (SSD) block.
    Mamba2(Mamba2),
    /// Causal (grouped-query) self-attention over a key/value cache.
    Attention(Attention),
    /// A feed-forward network.
    Mlp(Mlp),
    /// A mixture of experts (with shared experts where the model has them).
    Moe(Moe),
    /// Attention and a Mamba-2 mixer side by side (Falcon-H1).
    Parallel(Parallel),
    /// Zamba2's shared transformer block feeding a Mamba-2 mixer.
    Zamba2(Zamba2Layer),
}

/// One tensor of a block.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    /// What it is to the block.
    pub part: Part,
    /// Its name: under its kind's prefix as a kind lists it (`in_proj.weight`), in full as
    /// [`Block::tensors`] gives it.
    pub leaf: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Whether this block has it (a bias the config turns off has none).
    pub present: bool,
}

impl Tensor {
    /// A tensor playing `part`, named `leaf`, of `shape`, `present` or not.
    pub fn new(part: Part, leaf: &str, shape: Vec<usize>, present: bool) -> Self {
        Self { part, leaf: leaf.to_string(), shape, present }
    }
}

/// `tensors` with `prefix` before each name (a kind's tensors under its place in the layer).
pub(crate) fn under(prefix: &str, tensors: Vec<Tensor>) -> Vec<Tensor> {
    tensors.into_iter().map(|t| Tensor { leaf: format!("{prefix}{}", t.leaf), ..t }).collect()
}

/// One block's weights in memory, by kind (the CPU backend's).
#[derive(Clone, Debug, PartialEq)]
pub enum BlockWeights {
    /// A Mamba-1 block's.
    Mamba1(mamba1::Weights),
    /// A Mamba-2 block's.
    Mamba2(mamba2::Weights),
    /// An attention block's.
    Attention(attention::Weights),
    /// An MLP's.
    Mlp(mlp::Weights),
    /// A mixture of experts'.
    Moe(moe::Weights),
    /// A parallel block's.
    Parallel(Box<parallel::Weights>),
    /// A Zamba2 hybrid layer's.
    Zamba2(Box<zamba2::Weights>),
}

/// Where a block's weights come from as it is built: its tensors by [`Part`].
pub trait TakeTensor {
    /// The matrix playing `part`.
    fn matrix(&mut self, part: Part) -> Result<Matrix>;
    /// The f32 vector playing `part`.
    fn vector(&mut self, part: Part) -> Result<Vec<f32>>;
    /// The f32 vector playing `part`, if the checkpoint has one (an optional bias).
    fn optional(&mut self, part: Part) -> Option<Vec<f32>> {
        self.vector(part).ok()
    }
}

impl BlockWeights {
    /// A block of `kind`'s weights, taken from `t`.
    pub fn take(kind: &BlockKind, t: &mut dyn TakeTensor) -> Result<Self> {
        Ok(match kind {
            BlockKind::Mamba1(b) => BlockWeights::Mamba1(mamba1::Weights::take(b, t)?),
            BlockKind::Mamba2(b) => BlockWeights::Mamba2(mamba2::Weights::take(b, t)?),
            BlockKind::Attention(b) => BlockWeights::Attention(attention::Weights::take(b, t)?),
            BlockKind::Mlp(b) => BlockWeights::Mlp(mlp::Weights::take(b, t)?),
            BlockKind::Moe(b) => BlockWeights::Moe(moe::Weights::take(b, t)?),
            BlockKind::Parallel(b) => BlockWeights::Parallel(Box::new(parallel::Weights::take(b, t)?)),
            BlockKind::Zamba2(b) => BlockWeights::Zamba2(Box::new(zamba2::Weights::take(b, t)?)),
        })
    }

    /// Its Mamba mixer's tensors, if it has a Mamba mixer.
    pub fn ssm(&self) -> Option<&ssm::SsmWeights> {
        match self {
            BlockWeights::Mamba1(w) => Some(&w.ssm),
            BlockWeights::Mamba2(w) => Some(&w.ssm),
            BlockWeights::Parallel(w) => Some(&w.mamba.ssm),
            BlockWeights::Zamba2(w) => Some(&w.mamba.ssm),
            BlockWeights::Attention(_) | BlockWeights::Mlp(_) | BlockWeights::Moe(_) => None,
        }
    }

    /// The weight matrices.
    pub fn matrices(&self) -> Vec<&Matrix> {
        match self {
            BlockWeights::Mamba1(w) => w.matrices().to_vec(),
            BlockWeights::Mamba2(w) => w.matrices().to_vec(),
            BlockWeights::Attention(w) => w.matrices(),
            BlockWeights::Mlp(w) => w.matrices(),
            BlockWeights::Moe(w) => w.matrices(),
            BlockWeights::Parallel(w) => w.matrices(),
            BlockWeights::Zamba2(w) => w.matrices(),
        }
    }

    /// Elements of the small f32 tensors.
    pub fn vector_len(&self) -> usize {
        match self {
            BlockWeights::Mamba1(w) => w.vector_len(),
            BlockWeights::Mamba2(w) => w.vector_len(),
            BlockWeights::Attention(w) => w.vector_len(),
            BlockWeights::Mlp(w) => w.vector_len(),
            BlockWeights::Moe(w) => w.vector_len(),
            BlockWeights::Parallel(w) => w.vector_len(),
            BlockWeights::Zamba2(w) => w.vector_len(),
        }
    }
}

impl BlockKind {
    /// The kind's name ("mamba1", "mamba2", "attention", "mlp", "moe", "parallel", "zamba2"):
    /// a model's layer pattern names its blocks by it (exported states carry it).
    pub fn name(&self) -> &'static str {
        match self {
            BlockKind::Mamba1(_) => "mamba1",
            BlockKind::Mamba2(_) => "mamba2",
            BlockKind::Attention(_) => "attention",
            BlockKind::Mlp(_) => "mlp",
            BlockKind::Moe(_) => "moe",
            BlockKind::Parallel(_) => "parallel",
            BlockKind::Zamba2(_) => "zamba2",
        }
    }

    /// E·D and N of a Mamba block (what benchmark reports describe a model by).
    pub fn mamba_dims(&self) -> Option<(usize, usize)> {
        match self {
            BlockKind::Mamba1(b) => Some((b.d_inner, b.d_state)),
            BlockKind::Mamba2(b) => Some((b.d_inner, b.d_state)),
            BlockKind::Parallel(p) => Some((p.mamba.d_inner, p.mamba.d_state)),
            BlockKind::Zamba2(z) => Some((z.mamba.d_inner, z.mamba.d_state)),
            _ => None,
        }
    }

    /// Its tensors (names under its prefix), for residual width `d` (D).
    pub fn tensors(&self, d: usize) -> Vec<Tensor> {
        match self {
            BlockKind::Mamba1(b) => b.tensors(d),
            BlockKind::Mamba2(b) => b.tensors(d),
            BlockKind::Attention(b) => b.tensors(d),
            BlockKind::Mlp(b) => b.tensors(d),
            BlockKind::Moe(b) => b.tensors(d),
            BlockKind::Parallel(b) => b.tensors(d),
            BlockKind::Zamba2(b) => b.tensors(d),
        }
    }

    /// Its attention, where it has one (its state then has a key/value cache).
    pub fn attention(&self) -> Option<&Attention> {
        match self {
            BlockKind::Attention(a) => Some(a),
            BlockKind::Parallel(p) => Some(&p.attention),
            BlockKind::Zamba2(z) => Some(&z.shared.attention),
            _ => None,
        }
    }

    /// Its state regions, in the order its `LayerState` holds them.
    pub fn state_regions(&self) -> Vec<(&'static str, Extent)> {
        match self {
            BlockKind::Mamba1(b) => b.state_regions(),
            BlockKind::Mamba2(b) => b.state_regions(),
            BlockKind::Attention(b) => b.state_regions(),
            BlockKind::Mlp(_) | BlockKind::Moe(_) => Vec::new(),
            BlockKind::Parallel(b) => b.state_regions(),
            BlockKind::Zamba2(b) => b.state_regions(),
        }
    }

    /// Fails unless its hyper-parameters are usable with residual width `d`.
    pub fn validate(&self, d: usize) -> Result<()> {
        match self {
            BlockKind::Mamba1(b) => b.validate(d),
            BlockKind::Mamba2(b) => b.validate(d),
            BlockKind::Attention(b) => b.validate(d),
            BlockKind::Mlp(b) => b.validate(d),
            BlockKind::Moe(b) => b.validate(d),
            BlockKind::Parallel(b) => b.validate(d),
            BlockKind::Zamba2(b) => b.validate(d),
        }
    }

    /// Whether it is a Mamba mixer (Mamba-1 or Mamba-2: the blocks HF's Mamba-family config
    /// fields describe, `config_out.rs`).
    pub fn is_mamba(&self) -> bool {
        matches!(self, BlockKind::Mamba1(_) | BlockKind::Mamba2(_))
    }
}

/// Fails unless every size is positive (`[(its config name, its value)]`).
pub(crate) fn positive(sizes: &[(&str, usize)]) -> Result<()> {
    match sizes.iter().find(|(_, v)| *v == 0) {
        Some((name, _)) => Err(Error::Config(format!("{name} must be positive"))),
        None => Ok(()),
    }
}

/// Fails unless `eps` (the ε of a norm, named `name` in config.json) is finite and not
/// negative.
pub(crate) fn usable_eps(name: &str, eps: f32) -> Result<()> {
    if eps.is_finite() && eps >= 0.0 {
        Ok(())
    } else {
        Err(Error::Config(format!("{name} {eps} is not usable")))
    }
}

/// Fails unless every tensor (present or not) and the state regions are countable in u32 —
/// what GPU indices hold; a 2.8B model's largest tensor has 129M elements — so sizes from a
/// hostile config cannot wrap into small, misleading numbers. (Block sizes are computed with
/// saturating arithmetic, so a size that overflowed reads as usize::MAX and fails here, also in
/// wasm32 where that is u32::MAX: the bound is strict.)
pub(crate) fn checked_counts(tensors: &[Tensor], regions: &[(&'static str, Extent)]) -> Result<()> {
    let fits = |dims: &[usize]| {
        dims.iter().try_fold(1usize, |a, &b| a.checked_mul(b)).is_some_and(|n| n < u32::MAX as usize)
    };
    for t in tensors {
        if !fits(&t.shape) {
            return Err(Error::Config(format!(
                "{} {:?} would have more than 2^32 elements: these sizes are not a model webmamba can hold",
                t.leaf, t.shape
            )));
        }
    }
    let state = regions.iter().try_fold(0usize, |sum, (_, extent)| match extent {
        Extent::Fixed(n) | Extent::PerToken(n) => sum.checked_add(*n),
    });
    if state.is_none_or(|n| n >= u32::MAX as usize) {
        return Err(Error::Config(
            "one layer's recurrent state would have more than 2^32 elements: these sizes are not a model webmamba can hold"
                .into(),
        ));
    }
    Ok(())
}
