//! [`Block`] and [`BlockKind`]: what one residual block of a model is, with its own
//! hyper-parameters. A model is the parts every model shares ([`Config`](crate::model::Config):
//! width, vocabulary, norms, tying, multipliers) and a list of blocks, each `h ← h + s ·
//! kind(rms_norm(h))`; config.json says which (`Config::from_json`), nothing is inferred from
//! which weights happen to exist. A Mamba model has one block per layer; a hybrid's layer is
//! usually two (its mixer — Mamba or attention — then its MLP or mixture of experts).
//!
//! Each kind is a plug-in: in `src/blocks/<kind>/` it implements [`HostKind`] — its tensors
//! (names, shapes, roles), its state regions and checks, its weights and its CPU forward
//! (`mod.rs`, `cpu.rs`) — and `GpuKind` — its GPU buffers, kernels, scratch and plan (`gpu.rs`).
//! `registry.rs` names every kind once; from its list this file generates [`BlockKind`],
//! [`BlockWeights`] and their dispatch to [`HostKind`], and `gpu.rs` the GPU side.

pub(crate) mod attention;
pub(crate) mod decode;
pub(crate) mod delta_net;
pub(crate) mod gpu;
pub(crate) mod gpu_common;
pub(crate) mod gpu_kind;
pub(crate) mod kind;
pub mod mamba1;
pub mod mamba2;
pub(crate) mod mlp;
pub(crate) mod moe;
pub(crate) mod parallel;
mod registry;
pub(crate) mod short_conv;
pub(crate) mod ssm;
#[cfg(test)]
pub(crate) mod toy;
pub(crate) mod zamba2;

pub use attention::{Attention, QkNorm, Rope};
pub use delta_net::DeltaNet;
pub(crate) use gpu::GpuBlockWeights;
pub(crate) use kind::{HostKind, HostParts, Input};
pub use mamba1::Mamba1;
pub use mamba2::{GatedNorm, Mamba2};
pub(crate) use mlp::{Activation, Mlp, MlpNames};
pub(crate) use moe::{ExpertLayout, Moe, Routing};
pub(crate) use parallel::Parallel;
pub(crate) use registry::with_kinds;
pub use short_conv::ShortConv;
#[cfg(test)]
pub(crate) use toy::Toy;
pub(crate) use zamba2::{SharedBlock, Zamba2Layer};

use std::any::Any;

use kind::HostLayer;
use ssm::SsmWeights;

use crate::error::{Error, Result};
use crate::model::{Extent, Matrix, Part};

/// Index of the conv window among a Mamba block's state regions (both kinds).
pub(crate) const CONV: usize = 0;
/// Index of the SSM state among a Mamba block's state regions (both kinds).
pub(crate) const SSM: usize = 1;

/// One residual block: `h ← h + residual_scale · kind(rms_norm(h) ⊙ norm)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// What it computes.
    pub kind: BlockKind,
    /// Where its tensors are: the layer's prefix (`backbone.layers.3.`, `model.layers.3.`).
    pub(crate) prefix: String,
    /// Its RMSNorm's gain under `prefix` (`norm.weight`, `input_layernorm.weight`).
    pub(crate) norm: String,
    /// The kind's tensors' prefix under `prefix` (`mixer.`, `mamba.`, `self_attn.`; empty
    /// where the kind names its own, as a mixture of experts with a shared MLP beside it).
    pub(crate) at: &'static str,
    /// Multiplies the block's output before the residual add (Granite's
    /// `residual_multiplier`; 1 elsewhere).
    pub(crate) residual_scale: f32,
}

impl Block {
    /// A block of `kind` at `prefix` + `at` with its norm at `prefix` + `norm`, unscaled.
    pub(crate) fn new(kind: BlockKind, prefix: String, norm: &str, at: &'static str) -> Self {
        Self { kind, prefix, norm: norm.to_string(), at, residual_scale: 1.0 }
    }

    /// Its tensors, full names, for residual width `d`: the norm, then the kind's.
    pub(crate) fn tensors(&self, d: usize) -> Vec<Tensor> {
        let norm = Tensor::new(Part::Norm, &format!("{}{}", self.prefix, self.norm), vec![d], true);
        let kind = under(&format!("{}{}", self.prefix, self.at), self.kind.tensors(d));
        [vec![norm], kind].concat()
    }
}

/// Generates [`BlockKind`], [`BlockWeights`] and their dispatch to each kind's
/// [`HostKind`] from the registry's list ([`with_kinds`]).
macro_rules! host_kinds {
    ($($(#[doc = $doc:literal])* $(#[cfg($cfg:meta)])? $v:ident($t:ty)),* $(,)?) => {
        /// One block's kind and hyper-parameters.
        #[derive(Clone, Debug, PartialEq)]
        pub enum BlockKind {
            $($(#[doc = $doc])* $(#[cfg($cfg)])? $v($t),)*
        }

        /// One block's weights in memory (the CPU backend's), with its kind's hyper-parameters.
        #[derive(Clone, Debug, PartialEq)]
        pub enum BlockWeights {
            $($(#[doc = $doc])* $(#[cfg($cfg)])? $v($t, Box<<$t as HostKind>::Weights>),)*
        }

        impl BlockKind {
            /// The kind's name ("mamba1", "mamba2", "attention", "mlp", "moe", "parallel",
            /// "zamba2", …): a model's layer pattern names its blocks by it (exported states
            /// carry it).
            pub(crate) fn name(&self) -> &'static str {
                match self { $($(#[cfg($cfg)])? BlockKind::$v(_) => <$t as HostKind>::NAME,)* }
            }

            /// What it reads beyond its layer's residual stream (computed for it by the
            /// orchestrator).
            pub(crate) fn inputs(&self) -> &'static [Input] {
                match self { $($(#[cfg($cfg)])? BlockKind::$v(_) => <$t as HostKind>::READS,)* }
            }

            /// Whether it is a Mamba mixer (Mamba-1 or Mamba-2: the blocks HF's Mamba-family
            /// config fields describe, `config_out.rs`).
            pub(crate) fn is_mamba(&self) -> bool {
                match self { $($(#[cfg($cfg)])? BlockKind::$v(_) => <$t as HostKind>::MAMBA_MIXER,)* }
            }

            /// Its tensors (names under its prefix), for residual width `d` (D).
            pub(crate) fn tensors(&self, d: usize) -> Vec<Tensor> {
                match self { $($(#[cfg($cfg)])? BlockKind::$v(k) => HostKind::tensors(k, d),)* }
            }

            /// Its state regions, in the order its `LayerState` holds them.
            pub(crate) fn state_regions(&self) -> Vec<(&'static str, Extent)> {
                match self { $($(#[cfg($cfg)])? BlockKind::$v(k) => HostKind::state_regions(k),)* }
            }

            /// Fails unless its hyper-parameters are usable with residual width `d`.
            pub(crate) fn validate(&self, d: usize) -> Result<()> {
                match self { $($(#[cfg($cfg)])? BlockKind::$v(k) => HostKind::validate(k, d),)* }
            }

            /// Its attention, where it has one (its state then has a key/value cache).
            pub(crate) fn attention(&self) -> Option<&Attention> {
                match self { $($(#[cfg($cfg)])? BlockKind::$v(k) => HostKind::attention(k),)* }
            }

            /// E·D and N of its Mamba mixer (what benchmark reports describe a model by).
            pub fn mamba_dims(&self) -> Option<(usize, usize)> {
                match self { $($(#[cfg($cfg)])? BlockKind::$v(k) => HostKind::mamba_dims(k),)* }
            }
        }

        impl BlockWeights {
            /// A block of `kind`'s weights, taken from `t`.
            pub(crate) fn take(kind: &BlockKind, t: &mut dyn TakeTensor) -> Result<Self> {
                Ok(match kind {
                    $($(#[cfg($cfg)])? BlockKind::$v(k) => BlockWeights::$v(k.clone(), Box::new(HostKind::take(k, t)?)),)*
                })
            }

            /// Its output (T, D) over `layer` (the CPU forward).
            pub(crate) fn forward(&self, layer: HostLayer<'_>) -> Result<Vec<f32>> {
                match self { $($(#[cfg($cfg)])? BlockWeights::$v(k, w) => HostKind::forward(k, w, layer),)* }
            }

            /// Its Mamba mixer's tensors, if it has a Mamba mixer.
            pub(crate) fn ssm(&self) -> Option<&SsmWeights> {
                match self { $($(#[cfg($cfg)])? BlockWeights::$v(_, w) => HostParts::ssm(w.as_ref()),)* }
            }

            /// The weight matrices.
            pub(crate) fn matrices(&self) -> Vec<&Matrix> {
                match self { $($(#[cfg($cfg)])? BlockWeights::$v(_, w) => HostParts::matrices(w.as_ref()),)* }
            }

            /// Elements of the small f32 tensors.
            pub(crate) fn vector_len(&self) -> usize {
                match self { $($(#[cfg($cfg)])? BlockWeights::$v(_, w) => HostParts::vector_len(w.as_ref()),)* }
            }

            /// Its kind's own weights (`<K as HostKind>::Weights`), to downcast.
            pub(crate) fn as_any(&self) -> &dyn Any {
                match self { $($(#[cfg($cfg)])? BlockWeights::$v(_, w) => w.as_ref(),)* }
            }
        }
    };
}

with_kinds!(host_kinds);

/// One tensor of a block.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    /// What it is to the block.
    pub(crate) part: Part,
    /// Its name: under its kind's prefix as a kind lists it (`in_proj.weight`), in full as
    /// [`Block::tensors`] gives it.
    pub(crate) leaf: String,
    /// Its shape.
    pub(crate) shape: Vec<usize>,
    /// Whether this block has it (a bias the config turns off has none).
    pub(crate) present: bool,
    /// Whether 1 is added to each of its values as it is loaded (a zero-centred norm's gain,
    /// stored as w and used as 1 + w).
    pub(crate) plus_one: bool,
}

impl Tensor {
    /// A tensor playing `part`, named `leaf`, of `shape`, `present` or not.
    pub(crate) fn new(part: Part, leaf: &str, shape: Vec<usize>, present: bool) -> Self {
        Self { part, leaf: leaf.to_string(), shape, present, plus_one: false }
    }

    /// The same tensor, 1 added to its values as they are loaded where `plus_one`.
    pub(crate) fn plus_one(self, plus_one: bool) -> Self {
        Self { plus_one, ..self }
    }
}

/// `tensors` with `prefix` before each name (a kind's tensors under its place in the layer).
pub(crate) fn under(prefix: &str, tensors: Vec<Tensor>) -> Vec<Tensor> {
    tensors.into_iter().map(|t| Tensor { leaf: format!("{prefix}{}", t.leaf), ..t }).collect()
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
