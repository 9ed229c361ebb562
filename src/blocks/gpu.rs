//! The GPU side of the registry: [`GpuBlockWeights`] (one block's weights on the GPU, with its
//! kind's hyper-parameters) and the dispatch from it and from [`BlockKind`] to each kind's
//! [`GpuKind`] (`src/blocks/<kind>/gpu.rs`), generated from the list in `registry.rs`.

use std::any::Any;

#[cfg(test)]
use crate::blocks::Toy;
use crate::blocks::gpu_common::LayerCx;
use crate::blocks::gpu_kind::{GpuKind, GpuParts};
use crate::blocks::{
    Attention, BlockKind, DeltaNet, Mamba1, Mamba2, Mlp, Moe, Parallel, ShortConv, Zamba2Layer, with_kinds,
};
use crate::error::Result;
use crate::gpu::{GpuContext, KernelSpec};
use crate::gpu_kit::WeightFormat;
use crate::gpu_kit::activations::Scratch;
use crate::gpu_kit::call::Step;
use crate::gpu_kit::kv::KvFormat;
use crate::gpu_kit::pipelines::Kernels;
use crate::gpu_kit::split::{Alloc, Destination, SplitMatrix};
use crate::model::Part;

/// Generates [`GpuBlockWeights`] and the dispatch from it and from `BlockKind` to each kind's
/// [`GpuKind`] from the registry's list ([`crate::blocks::with_kinds`]).
macro_rules! gpu_kinds {
    ($($(#[doc = $doc:literal])* $(#[cfg($cfg:meta)])? $v:ident($t:ty)),* $(,)?) => {
        /// One block's weights on the GPU, with its kind's hyper-parameters.
        pub(crate) enum GpuBlockWeights {
            $($(#[cfg($cfg)])? $v($t, Box<<$t as GpuKind>::GpuWeights>),)*
        }

        impl BlockKind {
            /// The kernels a block of this kind dispatches (caches in format `kv`).
            pub(crate) fn gpu_kernels(&self, kv: KvFormat) -> Vec<KernelSpec> {
                match self { $($(#[cfg($cfg)])? BlockKind::$v(k) => GpuKind::kernels(k, kv),)* }
            }

            /// The fused decode kernels it may dispatch for the weight formats in use.
            pub(crate) fn decode_kernels(&self, formats: &[WeightFormat], direct: bool) -> Vec<KernelSpec> {
                match self { $($(#[cfg($cfg)])? BlockKind::$v(k) => GpuKind::decode_kernels(k, formats, direct),)* }
            }

            /// What it needs of the scratch buffers for `t` tokens (residual width `d`).
            pub(crate) fn scratch(&self, d: usize, t: usize) -> Scratch {
                match self { $($(#[cfg($cfg)])? BlockKind::$v(k) => GpuKind::scratch(k, d, t),)* }
            }

            /// Fails unless its kernels can run on `ctx` (caches in format `kv`).
            pub(crate) fn gpu_check(&self, ctx: &GpuContext, kv: KvFormat) -> Result<()> {
                match self { $($(#[cfg($cfg)])? BlockKind::$v(k) => GpuKind::check(k, ctx, kv),)* }
            }
        }

        impl GpuBlockWeights {
            /// Allocates (zeroed) the buffers of a block of `kind` (residual width `d`).
            pub(crate) fn allocate(kind: &BlockKind, d: usize, alloc: &Alloc<'_>) -> Result<Self> {
                Ok(match kind {
                    $($(#[cfg($cfg)])? BlockKind::$v(k) => GpuBlockWeights::$v(k.clone(), Box::new(GpuKind::allocate(k, d, alloc)?)),)*
                })
            }

            /// Where the rows of its tensor `part` go (none: a tensor it does not keep).
            pub(crate) fn destination(&self, part: Part) -> Option<Destination<'_>> {
                match self { $($(#[cfg($cfg)])? GpuBlockWeights::$v(_, w) => GpuParts::destination(w.as_ref(), part),)* }
            }

            /// Its weight matrices.
            pub(crate) fn matrices(&self) -> Vec<&SplitMatrix> {
                match self { $($(#[cfg($cfg)])? GpuBlockWeights::$v(_, w) => GpuParts::matrices(w.as_ref()),)* }
            }

            /// Its f32 vector buffers.
            pub(crate) fn vectors(&self) -> Vec<&wgpu::Buffer> {
                match self { $($(#[cfg($cfg)])? GpuBlockWeights::$v(_, w) => GpuParts::vectors(w.as_ref()),)* }
            }

            /// Whether it makes its own RMSNorm of the residual.
            pub(crate) fn norms_itself(&self, cx: &LayerCx<'_>) -> bool {
                match self { $($(#[cfg($cfg)])? GpuBlockWeights::$v(k, w) => GpuKind::norms_itself(k, w, cx),)* }
            }

            /// The calls of its layer, in dispatch order.
            pub(crate) fn plan(&self, cx: LayerCx<'_>) -> Result<Vec<Step>> {
                match self { $($(#[cfg($cfg)])? GpuBlockWeights::$v(k, w) => GpuKind::plan(k, w, cx),)* }
            }

            /// Writes what its calls read that depends on the chunk's length `t`.
            pub(crate) fn before_chunk(&self, queue: &wgpu::Queue, kernels: &Kernels, t: u32) -> Result<()> {
                match self { $($(#[cfg($cfg)])? GpuBlockWeights::$v(_, w) => <$t as GpuKind>::before_chunk(w, queue, kernels, t),)* }
            }

            /// Its routed experts' dispatch arguments and the words per expert, if it routes.
            pub(crate) fn expert_dispatches(&self) -> Option<(&wgpu::Buffer, usize)> {
                match self { $($(#[cfg($cfg)])? GpuBlockWeights::$v(_, w) => <$t as GpuKind>::expert_dispatches(w),)* }
            }

            /// Its kind's own GPU weights (`<K as GpuKind>::GpuWeights`), to downcast.
            pub(crate) fn as_any(&self) -> &dyn Any {
                match self { $($(#[cfg($cfg)])? GpuBlockWeights::$v(_, w) => w.as_ref(),)* }
            }
        }
    };
}

with_kinds!(gpu_kinds);
