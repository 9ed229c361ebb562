//! The GPU side of every block kind, dispatched by kind: its weight buffers, where each of its
//! tensors is uploaded, the kernels it needs, its share of the scratch buffers, its checks
//! against the device, and the calls it records into a layer's plan. Each kind's own code is in
//! `src/blocks/<kind>/gpu.rs`.

use crate::blocks::{BlockKind, attention, mamba1, mamba2, mlp, moe};
use crate::error::{Error, Result};
use crate::gpu::{GpuContext, Kernel, KernelSpec};
use crate::gpu_model::activations::{Activations, Scratch, StateBuffers};
use crate::gpu_model::call::{Builder, Groups, Step};
use crate::gpu_model::kv::KvCaches;
use crate::gpu_model::split::{Alloc, Destination, SplitMatrix};
use crate::kernels::{conv1d_silu, scan_carry};
use crate::model::Part;

/// One block's weights on the GPU, by kind.
pub(crate) enum GpuBlockWeights {
    Mamba1(mamba1::gpu::GpuWeights),
    Mamba2(mamba2::gpu::GpuWeights),
    Attention(attention::gpu::GpuWeights),
    Mlp(mlp::gpu::GpuWeights),
    Moe(moe::gpu::GpuWeights),
}

impl GpuBlockWeights {
    /// Allocates (zeroed) the buffers of a block of `kind` (residual width `d`).
    pub fn allocate(kind: &BlockKind, d: usize, alloc: &Alloc<'_>) -> Result<Self> {
        Ok(match kind {
            BlockKind::Mamba1(p) => GpuBlockWeights::Mamba1(mamba1::gpu::GpuWeights::allocate(p, d, alloc)?),
            BlockKind::Mamba2(p) => GpuBlockWeights::Mamba2(mamba2::gpu::GpuWeights::allocate(p, d, alloc)?),
            BlockKind::Attention(p) => {
                GpuBlockWeights::Attention(attention::gpu::GpuWeights::allocate(p, (d, d), alloc)?)
            }
            BlockKind::Mlp(p) => {
                GpuBlockWeights::Mlp(mlp::gpu::GpuWeights::allocate(p, d, alloc, Part::Mlp)?)
            }
            BlockKind::Moe(p) => GpuBlockWeights::Moe(moe::gpu::GpuWeights::allocate(p, d, alloc)?),
            other => return Err(not_yet(other)),
        })
    }

    /// Where the rows of its tensor `part` go (none: a tensor it does not keep).
    pub fn destination(&self, part: Part) -> Option<Destination<'_>> {
        match self {
            GpuBlockWeights::Mamba1(w) => w.destination(part),
            GpuBlockWeights::Mamba2(w) => w.destination(part),
            GpuBlockWeights::Attention(w) => w.destination(part),
            GpuBlockWeights::Mlp(w) => match part {
                Part::Mlp(m) => w.destination(m),
                _ => None,
            },
            GpuBlockWeights::Moe(w) => w.destination(part),
        }
    }

    /// Its weight matrices.
    pub fn matrices(&self) -> Vec<&SplitMatrix> {
        match self {
            GpuBlockWeights::Mamba1(w) => w.matrices(),
            GpuBlockWeights::Mamba2(w) => w.matrices(),
            GpuBlockWeights::Attention(w) => w.matrices(),
            GpuBlockWeights::Mlp(w) => w.matrices(),
            GpuBlockWeights::Moe(w) => w.matrices(),
        }
    }

    /// Its f32 vector buffers.
    pub fn vectors(&self) -> Vec<&wgpu::Buffer> {
        match self {
            GpuBlockWeights::Mamba1(w) => w.vectors(),
            GpuBlockWeights::Mamba2(w) => w.vectors(),
            GpuBlockWeights::Attention(_) | GpuBlockWeights::Mlp(_) => Vec::new(),
            GpuBlockWeights::Moe(w) => w.vectors(),
        }
    }
}

/// The kernels a block of `kind` dispatches (beyond the shared rms_norm and linear ones).
pub(crate) fn kernels(kind: &BlockKind) -> Vec<KernelSpec> {
    match kind {
        BlockKind::Mamba1(p) => mamba1::gpu::kernels(p),
        BlockKind::Mamba2(p) => mamba2::gpu::kernels(p),
        BlockKind::Attention(p) => attention::gpu::kernels(p),
        BlockKind::Mlp(_) => mlp::gpu::kernels(),
        BlockKind::Moe(_) => moe::gpu::kernels(),
        _ => Vec::new(),
    }
}

/// What a block of `kind` needs of the scratch buffers for `t` tokens.
pub(crate) fn scratch(kind: &BlockKind, t: usize) -> Scratch {
    match kind {
        BlockKind::Mamba1(p) => mamba1::gpu::scratch(p, t),
        BlockKind::Mamba2(p) => mamba2::gpu::scratch(p, t),
        BlockKind::Attention(p) => attention::gpu::scratch(p, t),
        BlockKind::Mlp(p) => mlp::gpu::scratch(p, t),
        BlockKind::Moe(p) => moe::gpu::scratch(p, t),
        _ => Scratch::none(),
    }
}

/// Fails unless the kernels of a block of `kind` can run on `ctx`.
pub(crate) fn check(kind: &BlockKind, ctx: &GpuContext) -> Result<()> {
    match kind {
        BlockKind::Mamba1(p) => mamba1::gpu::check(p, ctx),
        BlockKind::Mamba2(p) => mamba2::gpu::check(p),
        BlockKind::Attention(p) => attention::gpu::check(p),
        BlockKind::Mlp(_) => Ok(()),
        BlockKind::Moe(p) => moe::gpu::check(p),
        other => Err(not_yet(other)),
    }
}

/// The GPU backend does not run every block kind yet: a model with one it lacks is an
/// [`Error::UnsupportedModel`] there (`backend: "auto"` then runs it on the CPU).
fn not_yet(kind: &BlockKind) -> Error {
    let what = match kind {
        BlockKind::Parallel(_) => "parallel attention + Mamba",
        _ => "Zamba2 shared-transformer",
    };
    Error::UnsupportedModel(format!(
        "{what} blocks on the GPU backend (hybrid models run on the CPU backend for now)"
    ))
}

/// What a block kind's `plan` builds its calls from: the builder, the scratch and state
/// buffers, the key/value caches, its layer and its residual multiplier.
#[derive(Clone, Copy)]
pub(crate) struct LayerCx<'a> {
    pub b: &'a Builder<'a>,
    pub a: &'a Activations,
    pub s: &'a StateBuffers,
    pub kv: &'a KvCaches,
    /// The layer.
    pub i: usize,
    /// Multiplies the block's output as it is added onto the residual.
    pub residual: f32,
}

impl LayerCx<'_> {
    /// The compiled kernel named `name` among a block's `specs`.
    pub fn kernel(&self, specs: &[KernelSpec], name: &str) -> Result<&Kernel> {
        self.b.k.named(specs, name)
    }
}

/// The calls of a layer's block (of `kind`, weights `w`), in dispatch order.
pub(crate) fn plan(kind: &BlockKind, w: &GpuBlockWeights, cx: LayerCx<'_>) -> Result<Vec<Step>> {
    match (kind, w) {
        (BlockKind::Mamba1(p), GpuBlockWeights::Mamba1(w)) => mamba1::gpu::plan(p, w, cx),
        (BlockKind::Mamba2(p), GpuBlockWeights::Mamba2(w)) => mamba2::gpu::plan(p, w, cx),
        (BlockKind::Attention(p), GpuBlockWeights::Attention(w)) => {
            let kv = cx.kv.layers[cx.i].as_ref().ok_or_else(|| {
                crate::Error::Internal(format!("layer {} has attention but no key/value cache", cx.i))
            })?;
            let io = attention::gpu::Io { x: &cx.a.x_norm, out_scale: cx.residual };
            attention::gpu::plan(p, w, cx, (kv, cx.kv.capacity), io)
        }
        (BlockKind::Moe(p), GpuBlockWeights::Moe(w)) => moe::gpu::plan(p, w, cx),
        (BlockKind::Mlp(p), GpuBlockWeights::Mlp(w)) => {
            mlp::gpu::plan(p, w, cx, mlp::gpu::Io { x: &cx.a.x_norm, out_scale: cx.residual, routed: None })
        }
        _ => Err(crate::Error::Internal(format!("layer {}'s GPU weights are not of its block kind", cx.i))),
    }
}

/// The buffers every Mamba mixer has on the GPU (shapes as in [`crate::blocks::ssm::SsmWeights`]).
pub(crate) struct GpuSsm {
    pub in_proj: SplitMatrix,            // (in_proj's rows, D), bias when use_bias
    pub conv: wgpu::Buffer,              // (channels, K)
    pub conv_bias: Option<wgpu::Buffer>, // (channels) when use_conv_bias
    /// A = −exp(A_log), then D: (E·D·N + E·D); Mamba-2 then dt_bias too: (3·H).
    pub a_d: wgpu::Buffer,
    pub out_proj: SplitMatrix, // (D, E·D), bias (D) when use_bias
    /// Where D starts in `a_d` (after A).
    pub d_at: usize,
}

/// The sizes of a [`GpuSsm`]: in_proj (rows, D), the conv (channels, K), `a_d`'s length and
/// where D starts in it, out_proj (D, E·D).
pub(crate) struct SsmShape {
    pub in_proj: (usize, usize),
    pub conv: (usize, usize),
    pub a_d: (usize, usize),
    pub out_proj: (usize, usize),
}

impl GpuSsm {
    /// Allocates (zeroed) buffers of `shape`.
    pub fn allocate(shape: SsmShape, a: &Alloc<'_>) -> Result<Self> {
        let (channels, k) = shape.conv;
        Ok(Self {
            in_proj: a.matrix("in_proj", shape.in_proj, a.has(Part::InProjBias))?,
            conv: a.vector("conv1d", channels * k)?,
            conv_bias: a.has(Part::ConvBias).then(|| a.vector("conv1d.bias", channels)).transpose()?,
            a_d: a.vector("A,D", shape.a_d.0)?,
            out_proj: a.matrix("out_proj", shape.out_proj, a.has(Part::OutProjBias))?,
            d_at: shape.a_d.1,
        })
    }

    /// Where the rows of its tensor `part` go (none: not one of its tensors).
    pub fn destination(&self, part: Part) -> Option<Destination<'_>> {
        let vector = |buffer, at, neg_exp| Destination::Vector { buffer, at, neg_exp };
        Some(match part {
            Part::InProj => Destination::Matrix(&self.in_proj),
            Part::InProjBias => Destination::Bias(&self.in_proj),
            Part::Conv => vector(&self.conv, 0, false),
            Part::ConvBias => vector(self.conv_bias.as_ref()?, 0, false),
            Part::ALog => vector(&self.a_d, 0, true),
            Part::D => vector(&self.a_d, self.d_at, false),
            Part::OutProj => Destination::Matrix(&self.out_proj),
            Part::OutProjBias => Destination::Bias(&self.out_proj),
            _ => return None,
        })
    }

    /// Its f32 vector buffers.
    pub fn vectors(&self) -> Vec<&wgpu::Buffer> {
        [Some(&self.conv), self.conv_bias.as_ref(), Some(&self.a_d)].into_iter().flatten().collect()
    }

    /// The conv1d_silu call over `channels` columns of `xz` (with `params`).
    pub fn conv_call(
        &self,
        b: &Builder<'_>,
        kernel: &Kernel,
        params: &conv1d_silu::Conv1dParams,
        (a, s): (&Activations, &StateBuffers),
    ) -> Result<Step> {
        let buffers = [
            ("xz", &a.xz),
            ("weight", &self.conv),
            ("bias", self.conv_bias.as_ref().unwrap_or(b.dummy)),
            ("conv_state", &s.conv),
            ("ud", &a.ud),
            ("capture", &a.capture),
        ];
        Ok(Step::Call(b.call(
            kernel,
            params,
            &buffers,
            Groups::fixed(conv1d_silu::groups(params.d_inner)),
        )?))
    }
}

/// The scan_carry call of a prefill of several scan chunks: chains the chunk maps of the
/// (E·D, N) `plane` from the layer's state at `state_offset`.
pub(crate) fn carry_call(
    b: &Builder<'_>,
    kernel: &Kernel,
    (plane, state_offset): (u32, u32),
    (a, s): (&Activations, &StateBuffers),
) -> Result<Step> {
    let carry = scan_carry::ScanCarryParams { plane, state_offset, _pad: [0; 2] };
    let buffers = [("chunk_ab", &a.chunk_ab), ("ssm_state", &s.ssm), ("chunk_h0", &a.chunk_h0)];
    Ok(Step::Prefill(b.call(kernel, &carry, &buffers, Groups::fixed(scan_carry::groups(plane)))?))
}
