//! A Gated DeltaNet block on the GPU: not yet (issue 56). Loading a model with one on the GPU
//! fails with a typed `UnsupportedModel` at the device check, before any buffer is made; the
//! CPU backend runs it.

use crate::blocks::delta_net::DeltaNet;
use crate::blocks::gpu_common::LayerCx;
use crate::blocks::gpu_kind::{GpuKind, GpuParts};
use crate::error::{Error, Result};
use crate::gpu::{GpuContext, KernelSpec};
use crate::gpu_kit::activations::Scratch;
use crate::gpu_kit::call::Step;
use crate::gpu_kit::kv::KvFormat;
use crate::gpu_kit::split::{Alloc, Destination, SplitMatrix};
use crate::model::Part;

/// What refuses the GPU.
fn not_yet() -> Error {
    Error::UnsupportedModel("Gated DeltaNet layers on the GPU backend (not yet: use the CPU backend)".into())
}

/// Nothing: a model with a DeltaNet block is refused before its weights are allocated.
pub(crate) struct GpuWeights;

impl GpuParts for GpuWeights {
    fn destination(&self, _part: Part) -> Option<Destination<'_>> {
        None
    }

    fn matrices(&self) -> Vec<&SplitMatrix> {
        Vec::new()
    }
}

impl GpuKind for DeltaNet {
    type GpuWeights = GpuWeights;

    fn allocate(&self, _d: usize, _alloc: &Alloc<'_>) -> Result<GpuWeights> {
        Err(not_yet())
    }

    fn kernels(&self, _kv: KvFormat) -> Vec<KernelSpec> {
        Vec::new()
    }

    fn scratch(&self, _d: usize, _t: usize) -> Scratch {
        Scratch::none()
    }

    fn check(&self, _ctx: &GpuContext, _kv: KvFormat) -> Result<()> {
        Err(not_yet())
    }

    fn plan(&self, _w: &GpuWeights, _cx: LayerCx<'_>) -> Result<Vec<Step>> {
        Err(not_yet())
    }
}
