//! One kernel call as a value, and how a plan's calls are made: [`Builder`] binds each call's
//! buffers by the names its kernel declares (`src/kernels/*.rs`), so a buffer cannot land on
//! another binding of the same type unnoticed. [`Call`] and [`LinearCall`] carry everything a
//! dispatch needs (pipeline, bind group, how its workgroups follow from a chunk's [`Dims`]), so
//! the encoder walks them knowing no kernel.

use crate::error::Result;
use crate::gpu::{GpuContext, Kernel, dispatch, dispatch_indirect, grid_2d};
use crate::gpu_kit::pipelines::{GroupsFn, Kernels};
use crate::gpu_kit::split::SplitMatrix;
use crate::kernels::{PARAMS, STEP, linear};

/// Sizes of one forward chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dims {
    /// T: tokens.
    pub(crate) t: u32,
    /// Scan chunks: ceil(T / CHUNK).
    pub(crate) chunks: u32,
    /// Tokens of context before the chunk (the position of its first token).
    pub(crate) past: u32,
    /// The device's largest dispatch along one dimension.
    pub(crate) max_dim: u32,
    /// No checkpoint is captured in the chunk: with T = 1, the fused decode kernels run.
    pub(crate) no_captures: bool,
}

impl Dims {
    /// Whether the chunk runs the fused decode kernels ([`Step::Fused`]): one token, nothing
    /// to capture (the fused kernels write no checkpoints).
    pub(crate) fn fused(&self) -> bool {
        self.t == 1 && self.no_captures
    }
}

/// How a call's workgroup count follows from a forward chunk's sizes ([`Dims`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Groups {
    /// The same whatever T (a thread per channel or per state entry; argmax, top_k).
    Fixed(u32, u32, u32),
    /// `x` along x, one per token along y (the embedding).
    PerToken(u32),
    /// A workgroup per row, `per_token` rows per token (a 2-D grid within the device's limit),
    /// `z` along z (rms_norm: 1; rms_slices: its three slices).
    Rows { per_token: u32, z: u32 },
    /// One row (norm_f of the last position).
    LastRow,
    /// `x` along x, one per scan chunk along y (the scan passes).
    PerChunk(u32),
    /// One invocation per value, `per_token` values per token, `wg` invocations per workgroup
    /// (a 2-D grid: rope, kv_append, gated_act).
    Values { per_token: u32, wg: u32 },
    /// `times` × ceil(T · `per_token` / `tile`) workgroups (attention_prefill: row tiles per
    /// key/value head).
    Tiles { per_token: u32, tile: u32, times: u32 },
    /// One workgroup per (split of `keys` keys of the context past + T, token, one of
    /// `per_token`): attention_decode.
    Splits { per_token: u32, keys: u32 },
}

impl Groups {
    /// A dispatch size that does not depend on T.
    pub(crate) fn fixed((x, y, z): (u32, u32, u32)) -> Self {
        Groups::Fixed(x, y, z)
    }

    /// The workgroups for a chunk of sizes `d`.
    pub fn resolve(self, d: Dims) -> (u32, u32, u32) {
        match self {
            Groups::Fixed(x, y, z) => (x, y, z),
            Groups::PerToken(x) => (x, d.t, 1),
            Groups::Rows { per_token, z } => {
                let (x, y) = grid_2d(d.t * per_token, d.max_dim);
                (x, y, z)
            }
            Groups::LastRow => (1, 1, 1),
            Groups::PerChunk(x) => (x, d.chunks, 1),
            Groups::Values { per_token, wg } => {
                let (x, y) = grid_2d((d.t * per_token).div_ceil(wg), d.max_dim);
                (x, y, 1)
            }
            Groups::Tiles { per_token, tile, times } => {
                let (x, y) = grid_2d((d.t * per_token).div_ceil(tile) * times, d.max_dim);
                (x, y, 1)
            }
            Groups::Splits { per_token, keys } => {
                let splits = (d.past + d.t).div_ceil(keys);
                let (x, y) = grid_2d(splits * d.t * per_token, d.max_dim);
                (x, y, 1)
            }
        }
    }
}

/// One kernel call: its pipeline, its bind group with the parameter uniform it binds (kept
/// alive with it) and how many workgroups it dispatches. Encoding a pass needs nothing else.
pub(crate) struct Call {
    /// The kernel's name (labels, dispatch timing).
    pub(crate) name: &'static str,
    pub(crate) pipeline: wgpu::ComputePipeline,
    pub(crate) bind_group: wgpu::BindGroup,
    /// The parameter uniform (written once at load; `top_k`'s k per call).
    pub(crate) params: wgpu::Buffer,
    pub(crate) groups: Groups,
}

impl Call {
    /// Records the call for a chunk of sizes `d`.
    pub fn dispatch(&self, pass: &mut wgpu::ComputePass<'_>, d: Dims) {
        dispatch(pass, self.name, &self.pipeline, &self.bind_group, self.groups.resolve(d));
    }
}

/// One part of a linear layer's weight matrix: its bind group, its outputs, and the pipelines
/// of its weight format (the tiled or direct GEMM for many rows, the GEMV for one).
pub(crate) struct LinearPart {
    pub(crate) call: Call,
    pub(crate) n_out: u32,
    pub(crate) gemm: (&'static str, wgpu::ComputePipeline),
    pub(crate) gemv: (&'static str, wgpu::ComputePipeline),
    pub(crate) gemm_groups: GroupsFn,
    pub(crate) gemv_groups: GroupsFn,
}

/// One linear layer: a call per part of its weight matrix.
pub(crate) struct LinearCall {
    pub(crate) parts: Vec<LinearPart>,
}

impl LinearPart {
    /// The kernel (name, pipeline) for `rows` rows (the GEMV for a few, the GEMM for more) and
    /// its workgroups.
    pub(crate) fn pick(&self, rows: u32) -> (&(&'static str, wgpu::ComputePipeline), (u32, u32, u32)) {
        if rows <= linear::GEMV_MAX_ROWS {
            (&self.gemv, (self.gemv_groups)(rows, self.n_out))
        } else {
            (&self.gemm, (self.gemm_groups)(rows, self.n_out))
        }
    }
}

impl LinearCall {
    /// Records the layer over `rows` rows: the GEMV for a few rows, the GEMM for more.
    pub fn dispatch(&self, pass: &mut wgpu::ComputePass<'_>, rows: u32) {
        for part in &self.parts {
            let ((name, pipeline), groups) = part.pick(rows);
            dispatch(pass, name, pipeline, &part.call.bind_group, groups);
        }
    }
}

/// A linear layer whose workgroup counts the GPU writes (a routed expert's matmul: zeros when
/// no token chose the expert): part j's three u32 at byte `at + 12·j` of `args`.
pub(crate) struct IndirectLinear {
    pub(crate) linear: LinearCall,
    pub(crate) args: wgpu::Buffer,
    pub(crate) at: u64,
}

impl IndirectLinear {
    /// Records the layer over `rows` rows with the workgroups in `args`.
    pub fn dispatch(&self, pass: &mut wgpu::ComputePass<'_>, rows: u32) {
        for (j, part) in self.linear.parts.iter().enumerate() {
            let ((name, pipeline), _) = part.pick(rows);
            let args = (&self.args, self.at + 12 * j as u64);
            dispatch_indirect(pass, name, pipeline, &part.call.bind_group, args);
        }
    }
}

/// One step of a layer's plan, as a block kind records it.
pub enum Step {
    /// A kernel call.
    Call(Call),
    /// A linear layer over the chunk's T rows.
    Linear(LinearCall),
    /// A call made only when the chunk spans more than one scan chunk (the first two passes of
    /// the chunked prefill scan; one chunk runs the output pass alone).
    Prefill(Call),
    /// A call made only for chunks of at most [`DECODE_ROWS`] tokens (split-context attention).
    Decode(Call),
    /// A call made only for chunks of more than [`DECODE_ROWS`] tokens (tiled attention).
    Bulk(Call),
    /// A linear layer with workgroups from the GPU (a routed expert's).
    Indirect(IndirectLinear),
    /// A step of the fused decode path: made only for a chunk that [`Dims::fused`] says runs it.
    Fused(Box<Step>),
    /// A step the fused decode path replaces: made for every other chunk.
    Unfused(Box<Step>),
}

/// Most tokens of a chunk that attends with `attention_decode` (split across the context)
/// rather than `attention_prefill` (tiles of query rows): a decode step's one.
pub(crate) const DECODE_ROWS: u32 = 1;

impl Step {
    /// Records the step for a chunk of sizes `d`.
    pub fn dispatch(&self, pass: &mut wgpu::ComputePass<'_>, d: Dims) {
        match self {
            Step::Call(call) => call.dispatch(pass, d),
            Step::Linear(linear) => linear.dispatch(pass, d.t),
            Step::Prefill(call) if d.chunks > 1 => call.dispatch(pass, d),
            Step::Prefill(_) => {}
            Step::Decode(call) if d.t <= DECODE_ROWS => call.dispatch(pass, d),
            Step::Bulk(call) if d.t > DECODE_ROWS => call.dispatch(pass, d),
            Step::Decode(_) | Step::Bulk(_) => {}
            Step::Indirect(linear) => linear.dispatch(pass, d.t),
            Step::Fused(step) if d.fused() => step.dispatch(pass, d),
            Step::Unfused(step) if !d.fused() => step.dispatch(pass, d),
            Step::Fused(_) | Step::Unfused(_) => {}
        }
    }
}

/// Makes the calls of a plan: every bind group gets the shared `step` uniform ([`STEP`]), a
/// fresh parameter uniform ([`PARAMS`]) and the buffers its call site names.
pub(crate) struct Builder<'a> {
    pub(crate) ctx: &'a GpuContext,
    pub(crate) k: &'a Kernels,
    pub(crate) step: &'a wgpu::Buffer, // Step uniform
    /// Bound where an optional input (a bias) is absent: 1 float.
    pub(crate) dummy: &'a wgpu::Buffer,
}

impl Builder<'_> {
    /// A call of `kernel` with `params` and `buffers` — `(WGSL name, buffer)`, every binding
    /// of the kernel but `step` and `p` — dispatching `groups`. A name the kernel does not
    /// declare, one named twice or one left out is an [`crate::Error::Internal`].
    pub(crate) fn call<P: bytemuck::Pod>(
        &self,
        kernel: &Kernel,
        params: &P,
        buffers: &[(&str, &wgpu::Buffer)],
        groups: Groups,
    ) -> Result<Call> {
        let params = self.ctx.uniform(&format!("{} params", kernel.name), params);
        let mut all = vec![(STEP.name, self.step), (PARAMS.name, &params)];
        all.extend_from_slice(buffers);
        let bind_group = kernel.bind(self.ctx, &all)?;
        Ok(Call { name: kernel.name, pipeline: kernel.pipeline.clone(), bind_group, params, groups })
    }

    /// A linear call per part of `w`: `template` with the part's size, column, bias and scales;
    /// `buffers` names the input `x` and the output `y` (the part binds `w` and `bias`).
    pub fn linear(
        &self,
        w: &SplitMatrix,
        buffers: &[(&str, &wgpu::Buffer)],
        template: linear::LinearParams,
    ) -> Result<LinearCall> {
        let kernels = self.k.for_format(w.format)?;
        let parts = w
            .parts
            .iter()
            .map(|part| {
                let mut p = template;
                p.n_in = w.cols as u32;
                p.n_out = part.rows as u32;
                p.w_scales = scales_at(w, part.rows);
                p.y_col = template.y_col + part.row_start as u32;
                if part.bias.is_some() {
                    p.flags |= linear::BIAS;
                }
                let bias = part.bias.as_ref().unwrap_or(self.dummy);
                let mut named = vec![("w", &part.buffer), ("bias", bias)];
                named.extend_from_slice(buffers);
                Ok(LinearPart {
                    // Dispatched by LinearCall (GEMV or GEMM by the rows), not by its groups.
                    call: self.call(&kernels.linear, &p, &named, Groups::Fixed(0, 0, 0))?,
                    n_out: part.rows as u32,
                    gemm: (kernels.linear.name, kernels.linear.pipeline.clone()),
                    gemv: (kernels.gemv.name, kernels.gemv.pipeline.clone()),
                    gemm_groups: kernels.gemm_groups,
                    gemv_groups: kernels.gemv_groups,
                })
            })
            .collect::<Result<_>>()?;
        Ok(LinearCall { parts })
    }
}

/// A workgroup per token's row.
pub(crate) const ROWS: Groups = Groups::Rows { per_token: 1, z: 1 };

/// Where an int8 part's scales start in its buffer, in u32 (after rows · cols quant bytes).
pub(crate) fn scales_at(w: &SplitMatrix, rows: usize) -> u32 {
    w.format.scales_at(rows, w.cols)
}
