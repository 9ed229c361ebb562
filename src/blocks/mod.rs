//! [`BlockKind`]: what one layer of a model is, with its own hyper-parameters. A model is the
//! parts every model shares ([`Config`](crate::model::Config): width, vocabulary, norms, tying)
//! and a list of blocks, one per layer; config.json says which (`Config::from_json`), nothing is
//! inferred from which weights happen to exist.
//!
//! Each kind owns, in one file here, its tensors (names, shapes, roles) and its state regions;
//! its CPU forward lives in `src/cpu/` and its GPU plan in `src/gpu_model/` under the same name.

pub(crate) mod gpu;
pub mod mamba1;
pub mod mamba2;
pub mod ssm;

pub use mamba1::Mamba1;
pub use mamba2::Mamba2;

use crate::error::{Error, Result};
use crate::model::{Extent, Matrix, Part};

/// Index of the conv window among a Mamba block's state regions (both kinds).
pub const CONV: usize = 0;
/// Index of the SSM state among a Mamba block's state regions (both kinds).
pub const SSM: usize = 1;

/// One layer's kind and hyper-parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum BlockKind {
    /// A Mamba-1 block (Mamba, Falcon-Mamba).
    Mamba1(Mamba1),
    /// A Mamba-2 (SSD) block.
    Mamba2(Mamba2),
}

/// One tensor of a block, under `backbone.layers.N.`.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    /// What it is to the block.
    pub part: Part,
    /// Its name under the layer (`mixer.in_proj.weight`).
    pub leaf: &'static str,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Whether this block has it (a bias the config turns off has none).
    pub present: bool,
}

/// One block's weights in memory, by kind (the CPU backend's).
#[derive(Clone, Debug, PartialEq)]
pub enum BlockWeights {
    /// A Mamba-1 block's.
    Mamba1(mamba1::Weights),
    /// A Mamba-2 block's.
    Mamba2(mamba2::Weights),
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
            BlockKind::Mamba1(_) => BlockWeights::Mamba1(mamba1::Weights::take(t)?),
            BlockKind::Mamba2(_) => BlockWeights::Mamba2(mamba2::Weights::take(t)?),
        })
    }

    /// The weight matrices.
    pub fn matrices(&self) -> Vec<&Matrix> {
        match self {
            BlockWeights::Mamba1(w) => w.matrices().to_vec(),
            BlockWeights::Mamba2(w) => w.matrices().to_vec(),
        }
    }

    /// Elements of the small f32 tensors.
    pub fn vector_len(&self) -> usize {
        match self {
            BlockWeights::Mamba1(w) => w.vector_len(),
            BlockWeights::Mamba2(w) => w.vector_len(),
        }
    }
}

impl BlockKind {
    /// E·D and N of a Mamba block (what benchmark reports describe a model by).
    pub fn mamba_dims(&self) -> Option<(usize, usize)> {
        match self {
            BlockKind::Mamba1(b) => Some((b.d_inner, b.d_state)),
            BlockKind::Mamba2(b) => Some((b.d_inner, b.d_state)),
        }
    }

    /// Its tensors under `backbone.layers.N.`, for residual width `d` (D).
    pub fn tensors(&self, d: usize) -> Vec<Tensor> {
        match self {
            BlockKind::Mamba1(b) => b.tensors(d),
            BlockKind::Mamba2(b) => b.tensors(d),
        }
    }

    /// Its state regions, in the order its `LayerState` holds them.
    pub fn state_regions(&self) -> Vec<(&'static str, Extent)> {
        match self {
            BlockKind::Mamba1(b) => b.state_regions(),
            BlockKind::Mamba2(b) => b.state_regions(),
        }
    }

    /// Fails unless its hyper-parameters are usable with residual width `d`.
    pub fn validate(&self, d: usize) -> Result<()> {
        match self {
            BlockKind::Mamba1(b) => b.validate(d),
            BlockKind::Mamba2(b) => b.validate(d),
        }
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
