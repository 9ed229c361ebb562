//! The GPU side of every block kind, dispatched by kind: its weight buffers, where each of its
//! tensors is uploaded, the kernels it needs, its share of the scratch buffers, its checks
//! against the device, and the calls it records into a layer's plan. Each kind's own code is in
//! `src/blocks/<kind>/gpu.rs`.

use crate::blocks::gpu_common::{LayerCx, Out};
use crate::blocks::{BlockKind, attention, mamba1, mamba2, mlp, moe, parallel, zamba2};
use crate::error::Result;
use crate::gpu::{GpuContext, KernelSpec};
use crate::gpu_model::WeightFormat;
use crate::gpu_model::activations::Scratch;
use crate::gpu_model::call::Step;
use crate::gpu_model::kv::KvFormat;
use crate::gpu_model::split::{Alloc, Destination, SplitMatrix};
use crate::model::Part;

/// One block's weights on the GPU, by kind.
pub(crate) enum GpuBlockWeights {
    Mamba1(mamba1::gpu::GpuWeights),
    Mamba2(mamba2::gpu::GpuWeights),
    Parallel(Box<parallel::gpu::GpuWeights>),
    Attention(attention::gpu::GpuWeights),
    Mlp(mlp::gpu::GpuWeights),
    Moe(moe::gpu::GpuWeights),
    Zamba2(Box<zamba2::gpu::GpuWeights>),
}

impl GpuBlockWeights {
    /// Allocates (zeroed) the buffers of a block of `kind` (residual width `d`).
    pub fn allocate(kind: &BlockKind, d: usize, alloc: &Alloc<'_>) -> Result<Self> {
        Ok(match kind {
            BlockKind::Mamba1(p) => GpuBlockWeights::Mamba1(mamba1::gpu::GpuWeights::allocate(p, d, alloc)?),
            BlockKind::Mamba2(p) => GpuBlockWeights::Mamba2(mamba2::gpu::GpuWeights::allocate(p, d, alloc)?),
            BlockKind::Parallel(p) => {
                GpuBlockWeights::Parallel(Box::new(parallel::gpu::GpuWeights::allocate(p, d, alloc)?))
            }
            BlockKind::Attention(p) => {
                GpuBlockWeights::Attention(attention::gpu::GpuWeights::allocate(p, (d, d), alloc)?)
            }
            BlockKind::Mlp(p) => {
                GpuBlockWeights::Mlp(mlp::gpu::GpuWeights::allocate(p, d, alloc, Part::Mlp)?)
            }
            BlockKind::Moe(p) => GpuBlockWeights::Moe(moe::gpu::GpuWeights::allocate(p, d, alloc)?),
            BlockKind::Zamba2(p) => {
                GpuBlockWeights::Zamba2(Box::new(zamba2::gpu::GpuWeights::allocate(p, d, alloc)?))
            }
        })
    }

    /// Where the rows of its tensor `part` go (none: a tensor it does not keep).
    pub fn destination(&self, part: Part) -> Option<Destination<'_>> {
        match self {
            GpuBlockWeights::Mamba1(w) => w.destination(part),
            GpuBlockWeights::Mamba2(w) => w.destination(part),
            GpuBlockWeights::Parallel(w) => w.destination(part),
            GpuBlockWeights::Attention(w) => w.destination(part),
            GpuBlockWeights::Mlp(w) => match part {
                Part::Mlp(m) => w.destination(m),
                _ => None,
            },
            GpuBlockWeights::Moe(w) => w.destination(part),
            GpuBlockWeights::Zamba2(w) => w.destination(part),
        }
    }

    /// Its weight matrices.
    pub fn matrices(&self) -> Vec<&SplitMatrix> {
        match self {
            GpuBlockWeights::Mamba1(w) => w.matrices(),
            GpuBlockWeights::Mamba2(w) => w.matrices(),
            GpuBlockWeights::Parallel(w) => w.matrices(),
            GpuBlockWeights::Attention(w) => w.matrices(),
            GpuBlockWeights::Mlp(w) => w.matrices(),
            GpuBlockWeights::Moe(w) => w.matrices(),
            GpuBlockWeights::Zamba2(w) => w.matrices(),
        }
    }

    /// Its f32 vector buffers.
    pub fn vectors(&self) -> Vec<&wgpu::Buffer> {
        match self {
            GpuBlockWeights::Mamba1(w) => w.vectors(),
            GpuBlockWeights::Mamba2(w) => w.vectors(),
            GpuBlockWeights::Parallel(w) => w.vectors(),
            GpuBlockWeights::Attention(_) | GpuBlockWeights::Mlp(_) => Vec::new(),
            GpuBlockWeights::Moe(w) => w.vectors(),
            GpuBlockWeights::Zamba2(w) => w.vectors(),
        }
    }
}

/// The kernels a block of `kind` dispatches (beyond the shared rms_norm and linear ones), those
/// of the key/value caches for their format `kv`.
pub(crate) fn kernels(kind: &BlockKind, kv: KvFormat) -> Vec<KernelSpec> {
    match kind {
        BlockKind::Mamba1(p) => mamba1::gpu::kernels(p),
        BlockKind::Mamba2(p) => mamba2::gpu::kernels(p),
        BlockKind::Parallel(p) => parallel::gpu::kernels(p, kv),
        BlockKind::Attention(p) => attention::gpu::kernels(p, kv),
        BlockKind::Mlp(_) => mlp::gpu::kernels(),
        BlockKind::Moe(_) => moe::gpu::kernels(),
        BlockKind::Zamba2(p) => zamba2::gpu::kernels(p, kv),
    }
}

/// What a block of `kind` (residual width `d`) needs of the scratch buffers for `t` tokens.
pub(crate) fn scratch(kind: &BlockKind, d: usize, t: usize) -> Scratch {
    match kind {
        BlockKind::Mamba1(p) => mamba1::gpu::scratch(p, t),
        BlockKind::Mamba2(p) => mamba2::gpu::scratch(p, t),
        BlockKind::Parallel(p) => parallel::gpu::scratch(p, t),
        BlockKind::Attention(p) => attention::gpu::scratch(p, t),
        BlockKind::Mlp(p) => mlp::gpu::scratch(p, t),
        BlockKind::Moe(p) => moe::gpu::scratch(p, t),
        BlockKind::Zamba2(p) => zamba2::gpu::scratch(p, d, t),
    }
}

/// Fails unless the kernels of a block of `kind` can run on `ctx` (caches in format `kv`).
pub(crate) fn check(kind: &BlockKind, ctx: &GpuContext, kv: KvFormat) -> Result<()> {
    match kind {
        BlockKind::Mamba1(p) => mamba1::gpu::check(p, ctx),
        BlockKind::Mamba2(p) => mamba2::gpu::check(p),
        BlockKind::Parallel(p) => parallel::gpu::check(p, kv),
        BlockKind::Attention(p) => attention::gpu::check(p, kv),
        BlockKind::Mlp(_) => Ok(()),
        BlockKind::Moe(p) => moe::gpu::check(p),
        BlockKind::Zamba2(p) => zamba2::gpu::check(p, kv),
    }
}

/// The fused decode kernels a block of `kind` may dispatch, for the weight formats in use
/// (`direct`: the software-adapter matmuls).
pub(crate) fn decode_kernels(kind: &BlockKind, formats: &[WeightFormat], direct: bool) -> Vec<KernelSpec> {
    match kind {
        BlockKind::Mamba1(p) => mamba1::decode::kernels(p, formats, direct),
        BlockKind::Mamba2(_) | BlockKind::Zamba2(_) | BlockKind::Parallel(_) => {
            mamba2::gpu::decode_kernels(formats, direct)
        }
        _ => Vec::new(),
    }
}

/// Whether a block of `kind` (weights `w`) makes its own RMSNorm of the residual (instead of
/// the plan's one before it): Zamba2's, whose shared block's output joins the Mamba input
/// first, and a Mamba block with the fused decode step (which folds the norm into in_proj).
pub(crate) fn norms_itself(kind: &BlockKind, w: &GpuBlockWeights, cx: &LayerCx<'_>) -> bool {
    match (kind, w) {
        (BlockKind::Zamba2(_), _) => true,
        (BlockKind::Mamba1(p), GpuBlockWeights::Mamba1(w)) => mamba1::decode::fuses(p, &w.dt_proj, cx),
        (BlockKind::Mamba2(p), _) => mamba2::gpu::fuses(p, cx),
        _ => false,
    }
}

/// The calls of a layer's block (of `kind`, weights `w`), in dispatch order; `mixer(j)`: layer
/// j's block weights (Zamba2's shared block is held by its first user).
pub(crate) fn plan<'w>(
    kind: &BlockKind,
    w: &GpuBlockWeights,
    cx: LayerCx<'_>,
    mixer: &dyn Fn(usize) -> Option<&'w GpuBlockWeights>,
) -> Result<Vec<Step>> {
    match (kind, w) {
        (BlockKind::Mamba1(p), GpuBlockWeights::Mamba1(w)) => mamba1::gpu::plan(p, w, cx),
        (BlockKind::Mamba2(p), GpuBlockWeights::Mamba2(w)) => mamba2::gpu::plan(p, w, cx),
        (BlockKind::Parallel(p), GpuBlockWeights::Parallel(w)) => parallel::gpu::plan(p, w, cx),
        (BlockKind::Attention(p), GpuBlockWeights::Attention(w)) => {
            let kv = cx.kv.layers[cx.i].as_ref().ok_or_else(|| {
                crate::Error::Internal(format!("layer {} has attention but no key/value cache", cx.i))
            })?;
            let io =
                attention::gpu::Io { x: &cx.a.x_norm, out: Out::Residual(cx.residual), adapters: [None; 3] };
            attention::gpu::plan(p, w, cx, (kv, cx.kv.capacity), io)
        }
        (BlockKind::Moe(p), GpuBlockWeights::Moe(w)) => moe::gpu::plan(p, w, cx),
        (BlockKind::Zamba2(p), GpuBlockWeights::Zamba2(w)) => {
            let shared = match mixer(p.owner_block) {
                Some(GpuBlockWeights::Zamba2(owner)) => owner.shared.as_ref(),
                _ => None,
            }
            .ok_or_else(|| crate::Error::Internal(format!("block {}'s shared block has no weights", cx.i)))?;
            zamba2::gpu::plan(p, (w, shared), cx)
        }
        (BlockKind::Mlp(p), GpuBlockWeights::Mlp(w)) => {
            mlp::gpu::plan(p, w, cx, mlp::gpu::Io::residual(&cx.a.x_norm, cx.residual))
        }
        _ => Err(crate::Error::Internal(format!("layer {}'s GPU weights are not of its block kind", cx.i))),
    }
}
