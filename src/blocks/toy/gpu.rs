//! The toy kind on the GPU: one matmul of the normed residual, added onto the residual.

use crate::blocks::gpu_common::{LayerCx, Out};
use crate::blocks::gpu_kind::{GpuKind, GpuParts};
use crate::blocks::toy::Toy;
use crate::error::Result;
use crate::gpu::{GpuContext, KernelSpec};
use crate::gpu_kit::activations::Scratch;
use crate::gpu_kit::call::Step;
use crate::gpu_kit::kv::KvFormat;
use crate::gpu_kit::split::{Alloc, Destination, SplitMatrix};
use crate::kernels::linear;
use crate::model::Part;

/// Its weights on the GPU.
pub(crate) struct GpuWeights {
    w: SplitMatrix, // (D, D)
}

impl GpuParts for GpuWeights {
    fn destination(&self, part: Part) -> Option<Destination<'_>> {
        (part == Part::Linear).then_some(Destination::Matrix(&self.w))
    }

    fn matrices(&self) -> Vec<&SplitMatrix> {
        vec![&self.w]
    }
}

impl GpuKind for Toy {
    type GpuWeights = GpuWeights;

    fn allocate(&self, d: usize, alloc: &Alloc<'_>) -> Result<GpuWeights> {
        Ok(GpuWeights { w: alloc.matrix(Part::Linear, "toy", (d, d), false)? })
    }

    /// None of its own: the linear kernels are everyone's.
    fn kernels(&self, _kv: KvFormat) -> Vec<KernelSpec> {
        Vec::new()
    }

    fn scratch(&self, _d: usize, _t: usize) -> Scratch {
        Scratch::none()
    }

    fn check(&self, _ctx: &GpuContext, _kv: KvFormat) -> Result<()> {
        Ok(())
    }

    /// W · x_norm (T, D), added onto the residual h times the block's multiplier.
    fn plan(&self, w: &GpuWeights, cx: LayerCx<'_>) -> Result<Vec<Step>> {
        let d = w.w.cols as u32;
        let p = linear::LinearParams { x_stride: d, y_stride: d, ..Default::default() };
        let (y, p) = Out::Residual(cx.residual).apply(&cx.a.h, p);
        Ok(vec![Step::Linear(cx.b.linear(&w.w, &[("x", &cx.a.x_norm), ("y", y)], p)?)])
    }
}
