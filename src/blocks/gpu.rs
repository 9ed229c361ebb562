//! The GPU side of every block kind, dispatched by kind: its weight buffers, where each of its
//! tensors is uploaded, the kernels it needs, its share of the scratch buffers, its checks
//! against the device, and the calls it records into a layer's plan. Each kind's own code is in
//! `src/blocks/<kind>/gpu.rs`.

use crate::blocks::{BlockKind, attention, mamba1, mamba2, mlp, moe, parallel, zamba2};
use crate::error::Result;
use crate::gpu::{GpuContext, Kernel, KernelSpec};
use crate::gpu_model::WeightFormat;
use crate::gpu_model::activations::{Activations, Scratch, StateBuffers};
use crate::gpu_model::call::{Builder, Groups, Step};
use crate::gpu_model::kv::{KvCaches, KvFormat};
use crate::gpu_model::split::{Alloc, Destination, SplitMatrix};
use crate::kernels::{conv1d_silu, linear, scan_carry};
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

/// What a block kind's `plan` builds its calls from: the builder, the scratch and state
/// buffers, the key/value caches, its layer and its residual multiplier.
#[derive(Clone, Copy)]
pub(crate) struct LayerCx<'a> {
    pub b: &'a Builder<'a>,
    pub a: &'a Activations,
    pub s: &'a StateBuffers,
    pub kv: &'a KvCaches,
    /// The weights of the block holding this one's shared weights (Zamba2's shared block is
    /// held by its first user); `None` for other kinds.
    pub owner: Option<&'a GpuBlockWeights>,
    /// The layer.
    pub i: usize,
    /// Multiplies the block's output as it is added onto the residual.
    pub residual: f32,
    /// The block's RMSNorm gain (D) and the model's ε (for a kind that norms its own input).
    pub norm: &'a wgpu::Buffer,
    pub eps: f32,
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
            let shared = match cx.owner {
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

/// Where a block part's last matmul writes: added onto the residual `h` times a multiplier
/// (the usual), or into a buffer of its own (Zamba2's shared block, whose output feeds the
/// next part).
#[derive(Clone, Copy)]
pub(crate) enum Out<'a> {
    Residual(f32),
    Into(&'a wgpu::Buffer),
}

impl<'a> Out<'a> {
    /// The buffer `y` the matmul writes (`h` for the residual) and its parameters `p` with
    /// the accumulate flag and multiplier.
    pub fn apply(
        self,
        h: &'a wgpu::Buffer,
        p: linear::LinearParams,
    ) -> (&'a wgpu::Buffer, linear::LinearParams) {
        match self {
            Out::Residual(s) => {
                (h, linear::LinearParams { flags: p.flags | linear::ACCUMULATE, ..p }.scaled(s))
            }
            Out::Into(buffer) => (buffer, p),
        }
    }
}

/// A LoRA adapter on the GPU: down to the rank (r, in), back up (out, r).
pub(crate) type GpuAdapter = (SplitMatrix, SplitMatrix);

/// The two matmuls of `adapter` over `x` (T, in): x·Aᵀ into `lora` (T, r), then added into
/// columns `y_col..` of `y` (rows `y_stride` apart).
pub(crate) fn adapter_steps(
    b: &Builder<'_>,
    adapter: &GpuAdapter,
    (x, lora): (&wgpu::Buffer, &wgpu::Buffer),
    (y, y_stride, y_col): (&wgpu::Buffer, u32, u32),
) -> Result<Vec<Step>> {
    let (down, up) = adapter;
    let (inp, r) = (down.cols as u32, up.cols as u32);
    let first = linear::LinearParams { x_stride: inp, y_stride: r, ..Default::default() };
    let second = linear::LinearParams {
        x_stride: r,
        y_stride,
        y_col,
        flags: linear::ACCUMULATE,
        ..Default::default()
    };
    Ok(vec![
        Step::Linear(b.linear(down, &[("x", x), ("y", lora)], first)?),
        Step::Linear(b.linear(up, &[("x", lora), ("y", y)], second)?),
    ])
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
