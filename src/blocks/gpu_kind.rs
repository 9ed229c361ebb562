//! [`GpuKind`]: what a block kind is on the GPU — its weight buffers and where each of its
//! tensors is uploaded, the kernels it needs, the scratch buffers it asks for (by its own
//! names), its checks against the device, and the calls it records into a layer's plan. Each
//! kind implements it in `src/blocks/<kind>/gpu.rs`; the registry (`registry.rs`) dispatches.

use crate::blocks::gpu_common::LayerCx;
use crate::blocks::kind::HostKind;
use crate::error::Result;
use crate::gpu::{GpuContext, KernelSpec};
use crate::gpu_kit::WeightFormat;
use crate::gpu_kit::activations::Scratch;
use crate::gpu_kit::call::Step;
use crate::gpu_kit::kv::KvFormat;
use crate::gpu_kit::pipelines::Kernels;
use crate::gpu_kit::split::{Alloc, Destination, SplitMatrix};
use crate::model::Part;

/// A kind's weights on the GPU: where each of its tensors goes as it streams in, its matrices,
/// its f32 vectors.
pub(crate) trait GpuParts {
    /// Where the rows of its tensor `part` go (none: a tensor it does not keep).
    fn destination(&self, part: Part) -> Option<Destination<'_>>;

    /// Its weight matrices.
    fn matrices(&self) -> Vec<&SplitMatrix>;

    /// Its f32 vector buffers.
    fn vectors(&self) -> Vec<&wgpu::Buffer> {
        Vec::new()
    }
}

/// A block kind on the GPU.
pub(crate) trait GpuKind: HostKind {
    /// Its weights on the GPU.
    type GpuWeights: GpuParts + 'static;

    /// Allocates (zeroed) its buffers for residual width `d`.
    fn allocate(&self, d: usize, alloc: &Alloc<'_>) -> Result<Self::GpuWeights>;

    /// The kernels it dispatches (beyond the shared rms_norm and linear ones), those of the
    /// key/value caches for their format `kv`.
    fn kernels(&self, kv: KvFormat) -> Vec<KernelSpec>;

    /// The fused decode kernels it may dispatch, for the weight formats in use (`direct`: the
    /// software-adapter matmuls).
    fn decode_kernels(&self, _formats: &[WeightFormat], _direct: bool) -> Vec<KernelSpec> {
        Vec::new()
    }

    /// The scratch buffers it needs, by name, for chunks of `t` tokens (residual width `d`).
    fn scratch(&self, d: usize, t: usize) -> Scratch;

    /// Fails unless its kernels can run on `ctx` (caches in format `kv`).
    fn check(&self, ctx: &GpuContext, kv: KvFormat) -> Result<()>;

    /// Whether it makes its own RMSNorm of the residual (instead of the plan's one before it).
    fn norms_itself(&self, _w: &Self::GpuWeights, _cx: &LayerCx<'_>) -> bool {
        false
    }

    /// Its calls, in dispatch order.
    fn plan(&self, w: &Self::GpuWeights, cx: LayerCx<'_>) -> Result<Vec<Step>>;

    /// Writes what its calls read that depends on the chunk's length `t` (beyond the `Step`
    /// uniform), before the chunk runs.
    fn before_chunk(_w: &Self::GpuWeights, _queue: &wgpu::Queue, _k: &Kernels, _t: u32) -> Result<()> {
        Ok(())
    }

    /// Where its routed experts' indirect dispatch arguments are and how many u32 words each
    /// expert's take (a mixture's; see `GpuModel::experts_run`).
    fn expert_dispatches(_w: &Self::GpuWeights) -> Option<(&wgpu::Buffer, usize)> {
        None
    }
}
