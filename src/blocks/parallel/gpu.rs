//! Falcon-H1's parallel block on the GPU: the Mamba-2 branch, then the attention branch, both
//! reading the normed residual and each adding its output onto the residual `h` — `h += s ·
//! (mamba(x · m_in) · m_out + attention(x · a_in) · a_out)` as two accumulating projections.
//! The input multipliers are folded into the branches' input projections (W(s·x) = s·(W x),
//! exact where they have no bias; a bias with a multiplier is refused), the output multipliers
//! times the block's residual multiplier into their output projections. The branches run one
//! after the other over the shared scratch buffers: the attention's reads none of what the
//! Mamba branch wrote.

use crate::blocks::gpu_common::{LayerCx, Out};
use crate::blocks::gpu_kind::{GpuKind, GpuParts};
use crate::blocks::parallel::Parallel;
use crate::blocks::{attention, mamba2};
use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::gpu::KernelSpec;
use crate::gpu_kit::WeightFormat;
use crate::gpu_kit::activations::Scratch;
use crate::gpu_kit::call::Step;
use crate::gpu_kit::kv::KvFormat;
use crate::gpu_kit::split::{Alloc, Destination, SplitMatrix};
use crate::model::Part;

/// A parallel block's weights on the GPU: each branch's own.
pub(crate) struct GpuWeights {
    pub(crate) mamba: mamba2::gpu::GpuWeights,
    pub(crate) attention: attention::gpu::GpuWeights,
}

impl GpuWeights {
    /// Allocates (zeroed) the buffers of block `p` (residual width `d`).
    pub(crate) fn allocate(p: &Parallel, d: usize, a: &Alloc<'_>) -> Result<Self> {
        Ok(Self {
            mamba: mamba2::gpu::GpuWeights::allocate(&p.mamba, d, a)?,
            attention: attention::gpu::GpuWeights::allocate(&p.attention, (d, d), a)?,
        })
    }
}

impl GpuParts for GpuWeights {
    /// Where the rows of tensor `part` go (the branches' parts are disjoint).
    fn destination(&self, part: Part) -> Option<Destination<'_>> {
        self.mamba.destination(part).or_else(|| self.attention.destination(part))
    }

    /// Its weight matrices.
    fn matrices(&self) -> Vec<&SplitMatrix> {
        [self.mamba.matrices(), self.attention.matrices()].concat()
    }

    /// Its f32 vector buffers (the Mamba branch's).
    fn vectors(&self) -> Vec<&wgpu::Buffer> {
        self.mamba.vectors()
    }
}

/// The kernels both branches dispatch (the attention's for key/value caches in format `kv`).
pub(crate) fn kernels(p: &Parallel, kv: KvFormat) -> Vec<KernelSpec> {
    [mamba2::gpu::kernels(&p.mamba), attention::gpu::kernels(&p.attention, kv)].concat()
}

/// Its share of the scratch buffers for `t` tokens: what the larger branch needs of `xz` and
/// `y` (the two both use), the Mamba branch's of the rest (the attention uses none of it).
pub(crate) fn scratch(p: &Parallel, t: usize) -> Scratch {
    Scratch::most([mamba2::gpu::scratch(&p.mamba, t), attention::gpu::scratch(&p.attention, t)])
}

/// Fails unless both branches can run (caches in format `kv`), and each input multiplier other
/// than 1 meets a projection without a bias (where it folds into the projection exactly).
pub(crate) fn check(p: &Parallel, kv: KvFormat) -> Result<()> {
    mamba2::gpu::check(&p.mamba)?;
    attention::gpu::check(&p.attention, kv)?;
    let biased = [
        ("ssm_in_multiplier", p.mamba_scales.0, p.mamba.use_bias, "mamba_proj_bias"),
        ("attention_in_multiplier", p.attention_scales.0, p.attention.qkv_bias, "attention_bias"),
    ];
    match biased.iter().find(|(_, s, bias, _)| *s != 1.0 && *bias) {
        Some((name, s, _, bias)) => Err(Error::UnsupportedModel(format!(
            "Falcon-H1 with {name} {s} and {bias} on the GPU backend (the multiplier folds into \
             projections without a bias only)"
        ))),
        None => Ok(()),
    }
}

/// The calls of a layer, block `p` with weights `w`, in dispatch order: the Mamba branch's,
/// then the attention's over the layer's key/value cache.
pub(crate) fn plan(p: &Parallel, w: &GpuWeights, cx: LayerCx<'_>) -> Result<Vec<Step>> {
    let (m_in, m_out) = p.mamba_scales;
    let (a_in, a_out) = p.attention_scales;
    let x = &cx.a.x_norm;
    // Decode steps fuse the Mamba branch as a Mamba-2 layer's (decode_in_proj norming h again
    // as the norm before the block did, the multipliers applied as the unfused path applies
    // them); the norm before the block stays, for the attention.
    let fused = mamba2::gpu::fuses(&p.mamba, &cx).then_some(&cx.a.h);
    let out = Out::Residual(cx.residual * m_out);
    let io = mamba2::gpu::Io { x, in_scale: m_in, out, fused, own_norm: false };
    let mut steps = mamba2::gpu::plan_io(&p.mamba, &w.mamba, cx, io)?;
    let kv = cx.kv.layers[cx.i]
        .as_ref()
        .ok_or_else(|| Error::Internal(format!("layer {} has attention but no key/value cache", cx.i)))?;
    let io = attention::gpu::Io { x, out: Out::Residual(cx.residual * a_out), adapters: [None; 3] };
    let kv = (kv, cx.kv.capacity);
    steps.extend(attention::gpu::plan_scaled(&p.attention, &w.attention, cx, kv, io, a_in)?);
    Ok(steps)
}

impl GpuKind for Parallel {
    type GpuWeights = GpuWeights;

    fn allocate(&self, d: usize, alloc: &Alloc<'_>) -> Result<GpuWeights> {
        GpuWeights::allocate(self, d, alloc)
    }

    fn kernels(&self, kv: KvFormat) -> Vec<KernelSpec> {
        kernels(self, kv)
    }

    /// Its Mamba branch's fused decode step (a Mamba-2 layer's).
    fn decode_kernels(&self, formats: &[WeightFormat], direct: bool) -> Vec<KernelSpec> {
        mamba2::gpu::decode_kernels(formats, direct)
    }

    fn scratch(&self, _d: usize, t: usize) -> Scratch {
        scratch(self, t)
    }

    fn check(&self, _ctx: &GpuContext, kv: KvFormat) -> Result<()> {
        check(self, kv)
    }

    fn plan(&self, w: &GpuWeights, cx: LayerCx<'_>) -> Result<Vec<Step>> {
        plan(self, w, cx)
    }
}
