//! What every block kind's GPU side builds with, below the dispatch by kind
//! ([`crate::blocks::gpu`]): the layer context a kind's `plan` is handed ([`LayerCx`]), where a
//! matmul writes ([`Out`]), LoRA adapters, the Mamba mixers' buffers ([`GpuSsm`]) and the scan
//! carry between prefill chunks.

use std::any::Any;

use crate::blocks::Input;
use crate::error::Result;
use crate::gpu::{Kernel, KernelSpec};
use crate::gpu_kit::activations::{Activations, StateBuffers};
use crate::gpu_kit::call::{Builder, Groups, Step};
use crate::gpu_kit::kv::KvCaches;
use crate::gpu_kit::split::{Alloc, Destination, SplitMatrix};
use crate::kernels::{conv1d_silu, linear, scan_carry};
use crate::model::Part;

/// What a block kind's `plan` builds its calls from: the builder, the scratch and state
/// buffers, the key/value caches, its layer and its residual multiplier.
#[derive(Clone, Copy)]
pub(crate) struct LayerCx<'a> {
    pub(crate) b: &'a Builder<'a>,
    pub(crate) a: &'a Activations,
    pub(crate) s: &'a StateBuffers,
    pub(crate) kv: &'a KvCaches,
    /// The layer.
    pub(crate) i: usize,
    /// Multiplies the block's output as it is added onto the residual.
    pub(crate) residual: f32,
    /// The block's RMSNorm gain (D) and the model's ε (for a kind that norms its own input).
    pub(crate) norm: &'a wgpu::Buffer,
    pub(crate) eps: f32,
    /// Block j's GPU weights (its kind's `GpuWeights`), for a kind that reads another's (a
    /// shared block held by its first user).
    pub(crate) layers: &'a [&'a dyn Any],
}

impl LayerCx<'_> {
    /// The buffer of `input` (T, D), which the kind reads ([`crate::blocks::HostKind::READS`]).
    pub(crate) fn input(&self, input: Input) -> Result<&wgpu::Buffer> {
        self.a.input(input.name())
    }

    /// The compiled kernel named `name` among a block's `specs`.
    pub(crate) fn kernel(&self, specs: &[KernelSpec], name: &str) -> Result<&Kernel> {
        self.b.k.named(specs, name)
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
    pub(crate) fn apply(
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
    pub(crate) in_proj: SplitMatrix, // (in_proj's rows, D), bias when use_bias
    pub(crate) conv: wgpu::Buffer,   // (channels, K)
    pub(crate) conv_bias: Option<wgpu::Buffer>, // (channels) when use_conv_bias
    /// A = −exp(A_log), then D: (E·D·N + E·D); Mamba-2 then dt_bias too: (3·H).
    pub(crate) a_d: wgpu::Buffer,
    pub(crate) out_proj: SplitMatrix, // (D, E·D), bias (D) when use_bias
    /// Where D starts in `a_d` (after A).
    pub(crate) d_at: usize,
}

/// The sizes of a [`GpuSsm`]: in_proj (rows, D), the conv (channels, K), `a_d`'s length and
/// where D starts in it, out_proj (D, E·D).
pub(crate) struct SsmShape {
    pub(crate) in_proj: (usize, usize),
    pub(crate) conv: (usize, usize),
    pub(crate) a_d: (usize, usize),
    pub(crate) out_proj: (usize, usize),
}

impl GpuSsm {
    /// Allocates (zeroed) buffers of `shape`.
    pub(crate) fn allocate(shape: SsmShape, a: &Alloc<'_>) -> Result<Self> {
        let (channels, k) = shape.conv;
        Ok(Self {
            in_proj: a.matrix(Part::InProj, "in_proj", shape.in_proj, a.has(Part::InProjBias))?,
            conv: a.vector("conv1d", channels * k)?,
            conv_bias: a.has(Part::ConvBias).then(|| a.vector("conv1d.bias", channels)).transpose()?,
            a_d: a.vector("A,D", shape.a_d.0)?,
            out_proj: a.matrix(Part::OutProj, "out_proj", shape.out_proj, a.has(Part::OutProjBias))?,
            d_at: shape.a_d.1,
        })
    }

    /// Where the rows of its tensor `part` go (none: not one of its tensors).
    pub(crate) fn destination(&self, part: Part) -> Option<Destination<'_>> {
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
    pub(crate) fn vectors(&self) -> Vec<&wgpu::Buffer> {
        [Some(&self.conv), self.conv_bias.as_ref(), Some(&self.a_d)].into_iter().flatten().collect()
    }

    /// The conv1d_silu call over `channels` columns of `xz` (with `params`).
    pub(crate) fn conv_call(
        &self,
        b: &Builder<'_>,
        kernel: &Kernel,
        params: &conv1d_silu::Conv1dParams,
        (a, s): (&Activations, &StateBuffers),
    ) -> Result<Step> {
        let buffers = [
            ("xz", a.scratch("xz")?),
            ("weight", &self.conv),
            ("bias", self.conv_bias.as_ref().unwrap_or(b.dummy)),
            ("conv_state", &s.conv),
            ("ud", a.scratch("ud")?),
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
