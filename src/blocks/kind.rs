//! [`HostKind`]: what a block kind is on the host — its tensors, its state regions, its checks,
//! how it takes its weights and its CPU forward. Each kind implements it in
//! `src/blocks/<kind>/mod.rs` (and `GpuKind`, `blocks/gpu_kind.rs`, in its `gpu.rs`); the
//! registry (`registry.rs`) names every kind once and dispatches to them, so the orchestrators
//! (`cpu/model.rs`, `gpu_model/`) never name one.
//!
//! What a kind reads beyond its own layer's residual stream is an [`Input`] it declares
//! ([`HostKind::READS`]): the orchestrator computes each one some kind reads and hands it over
//! in [`LayerInputs`], without knowing who reads it.

use std::any::Any;
use std::fmt::Debug;

use crate::blocks::attention::Attention;
use crate::blocks::ssm::SsmWeights;
use crate::blocks::{TakeTensor, Tensor};
use crate::cpu::conv::{Capture, Run};
use crate::cpu::ops::rms_norm;
use crate::error::Result;
use crate::model::{Extent, LayerState, Matrix};

/// Something a block reads that is not its own layer's residual stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// The chunk's token embeddings as the model's first layer saw them (T, D), scaled
    /// (Zamba2's shared blocks read them at every use).
    Embeddings,
}

impl Input {
    /// Its name (the GPU keeps its buffer under it).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Input::Embeddings => "embeddings",
        }
    }
}

/// The inputs some block of the model reads ([`HostKind::READS`]), computed once per chunk.
#[derive(Default)]
pub(crate) struct LayerInputs {
    /// [`Input::Embeddings`], where a block reads them: (T, D).
    pub(crate) embeddings: Option<Vec<f32>>,
}

/// What a block's CPU forward is handed: the residual stream h (T, D) before it, its RMSNorm
/// gain (D) and ε, its run (A, its state, where its checkpoints go), the inputs across layers,
/// and every layer's weights by block index (a shared block's are held by its first user).
pub struct HostLayer<'a> {
    pub(crate) h: &'a [f32],
    pub(crate) norm: &'a [f32],
    pub(crate) eps: f32,
    /// A = −exp(A_log), precomputed (empty for a block without a Mamba mixer).
    pub(crate) a: &'a [f32],
    pub(crate) st: &'a mut LayerState,
    pub(crate) cap: Capture<'a>,
    pub(crate) inputs: &'a LayerInputs,
    /// Block j's weights (its kind's `Weights`), for a kind that reads another's.
    pub(crate) layers: &'a [&'a dyn Any],
}

impl<'a> HostLayer<'a> {
    /// RMSNorm(h) · gain: the block's input where it takes the usual one. (T, D)
    pub(crate) fn normed(&self) -> Vec<f32> {
        rms_norm(self.h, self.norm, self.eps)
    }

    /// The run over input `x` (T, D).
    pub(crate) fn run<'b>(self, x: &'b [f32]) -> Run<'b>
    where
        'a: 'b,
    {
        Run { a: self.a, x, st: self.st, cap: self.cap }
    }
}

/// A kind's weights in memory: what the rest of the crate asks of any block's.
pub trait HostParts {
    /// Its weight matrices.
    fn matrices(&self) -> Vec<&Matrix>;

    /// Elements of its small f32 tensors.
    fn vector_len(&self) -> usize;

    /// Its Mamba mixer's tensors, where it has one.
    fn ssm(&self) -> Option<&SsmWeights> {
        None
    }
}

/// A block kind on the host. Every method is a decision a new kind makes; defaults are only
/// where "nothing" is the common answer.
pub trait HostKind: Clone + Debug + PartialEq + 'static {
    /// Its weights in memory (the CPU backend's; the GPU loads from the same tensors).
    type Weights: HostParts + Clone + Debug + PartialEq + 'static;

    /// The kind's name ("mamba1", …): a model's layer pattern names its blocks by it
    /// (exported states carry it).
    const NAME: &'static str;

    /// What it reads beyond its layer's residual stream.
    const READS: &'static [Input] = &[];

    /// Whether it is a Mamba mixer of the kind HF's Mamba-family config fields describe
    /// (Mamba-1, Mamba-2: `config_out.rs` writes them from it).
    const MAMBA_MIXER: bool = false;

    /// Its tensors (names under its prefix), for residual width `d` (D).
    fn tensors(&self, d: usize) -> Vec<Tensor>;

    /// Its state regions, in the order its `LayerState` holds them.
    fn state_regions(&self) -> Vec<(&'static str, Extent)>;

    /// Fails unless its hyper-parameters are usable with residual width `d`.
    fn validate(&self, d: usize) -> Result<()>;

    /// Its attention, where it has one (its state then has a key/value cache).
    fn attention(&self) -> Option<&Attention> {
        None
    }

    /// E·D and N of its Mamba mixer, where it has one (what benchmark reports describe a
    /// model by).
    fn mamba_dims(&self) -> Option<(usize, usize)> {
        None
    }

    /// Its weights, taken from `t`.
    fn take(&self, t: &mut dyn TakeTensor) -> Result<Self::Weights>;

    /// Its output (T, D), before the residual multiplier, over `layer` (whose state it moves on
    /// and whose checkpoints it writes).
    fn forward(&self, w: &Self::Weights, layer: HostLayer<'_>) -> Result<Vec<f32>>;
}
