//! Everything a forward pass dispatches, built once at load: the compiled kernels and, for every
//! kernel call of every layer, its parameter uniform and bind group. Encoding a forward pass then
//! only walks this plan (see `encode.rs`).

use crate::error::Result;
use crate::gpu::{GpuContext, Kernel, dispatch, grid_2d};
use crate::gpu_model::activations::{Activations, StateBuffers};
use crate::gpu_model::encode::Dims;
use crate::gpu_model::format::WeightFormat;
use crate::gpu_model::mixers;
use crate::gpu_model::pipelines::{GroupsFn, Kernels};
use crate::gpu_model::weights::{GpuWeights, SplitMatrix};
use crate::kernels::{argmax, embedding, linear, rms_norm, top_k};
use crate::model::Config;

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
}

impl Groups {
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
        }
    }
}

/// One kernel call: its pipeline, its bind group with the parameter uniform it binds (kept
/// alive with it) and how many workgroups it dispatches. Encoding a pass needs nothing else.
pub(crate) struct Call {
    pub pipeline: wgpu::ComputePipeline,
    pub bind_group: wgpu::BindGroup,
    /// The parameter uniform (written once at load; `top_k`'s k per call).
    pub params: wgpu::Buffer,
    pub groups: Groups,
}

impl Call {
    /// Records the call for a chunk of sizes `d`.
    pub fn dispatch(&self, pass: &mut wgpu::ComputePass<'_>, d: Dims) {
        dispatch(pass, &self.pipeline, &self.bind_group, self.groups.resolve(d));
    }
}

/// One part of a linear layer's weight matrix: its bind group, its outputs, and the pipelines
/// of its weight format (the tiled or direct GEMM for many rows, the GEMV for one).
pub(crate) struct LinearPart {
    pub call: Call,
    pub n_out: u32,
    pub gemm: wgpu::ComputePipeline,
    pub gemv: wgpu::ComputePipeline,
    pub gemv_groups: GroupsFn,
}

/// One linear layer: a call per part of its weight matrix.
pub(crate) struct LinearCall {
    pub parts: Vec<LinearPart>,
}

impl LinearCall {
    /// Records the layer over `rows` rows: the GEMV for a few rows, the GEMM for more.
    pub fn dispatch(&self, pass: &mut wgpu::ComputePass<'_>, rows: u32) {
        for part in &self.parts {
            let bind_group = &part.call.bind_group;
            if rows <= linear::GEMV_MAX_ROWS {
                dispatch(pass, &part.gemv, bind_group, (part.gemv_groups)(rows, part.n_out));
            } else {
                dispatch(pass, &part.gemm, bind_group, linear::gemm_groups(rows, part.n_out));
            }
        }
    }
}

/// Mamba-1's projections between the conv and the scan: δ ‖ B ‖ C, then Δ.
pub(crate) struct Projections {
    pub x_proj: LinearCall,
    /// Falcon-Mamba: δ, B and C normalised in place after x_proj.
    pub x_proj_norms: Option<Call>,
    pub dt_proj: LinearCall,
}

/// The calls of one Mamba block, in dispatch order, with the sizes their dispatches need that
/// do not change with T.
pub(crate) struct LayerPlan {
    pub norm: Call,
    pub in_proj: LinearCall,
    pub conv: Call,
    /// Mamba-1 only (Mamba-2's Δ, B, C come out of in_proj and the conv).
    pub projections: Option<Projections>,
    pub scan_chunks: Call,
    pub scan_carry: Call,
    pub scan_output: Call,
    /// Mamba-2: the gated RMSNorm (rms_norm over G rows per token).
    pub gated_norm: Option<Call>,
    pub out_proj: LinearCall,
}

/// The whole forward pass.
pub(crate) struct Plan {
    /// A call per part of the embedding (with the pipeline of its weight format).
    pub embedding: Vec<Call>,
    pub layers: Vec<LayerPlan>,
    /// norm_f over all T rows (for all-position logits) / over row T−1 only.
    pub norm_all: Call,
    pub norm_last: Call,
    /// LM head over the one normalised last row.
    pub head_last: LinearCall,
    /// LM head over block b of rows (b · logits_rows ..), for all-position logits.
    pub head_blocks: Vec<LinearCall>,
    /// The greedy pick from the last row's logits into the next step's token (ids[0]).
    pub argmax: Call,
    /// The top k of the last row's logits (k written per call).
    pub top_k: Call,
}

/// Makes the calls of a plan: every bind group gets the shared `step` uniform at binding 0 and
/// a fresh parameter uniform at binding 1.
pub(crate) struct Builder<'a> {
    pub ctx: &'a GpuContext,
    pub k: &'a Kernels,
    pub step: &'a wgpu::Buffer,
    /// Bound where an optional input (a bias) is absent.
    pub dummy: &'a wgpu::Buffer,
}

impl Builder<'_> {
    /// A call of `kernel` with `params` and `buffers` bound from binding 2 on, dispatching
    /// `groups`.
    pub fn call<P: bytemuck::Pod>(
        &self,
        kernel: &Kernel,
        params: &P,
        buffers: &[&wgpu::Buffer],
        groups: Groups,
    ) -> Call {
        let params = self.ctx.uniform(&format!("{} params", kernel.name), params);
        let mut all = vec![self.step, &params];
        all.extend_from_slice(buffers);
        Call { pipeline: kernel.pipeline.clone(), bind_group: kernel.bind(self.ctx, &all), params, groups }
    }

    /// A linear call per part of `w`: `template` with the part's size, column, bias and scales.
    pub fn linear(
        &self,
        x: &wgpu::Buffer,
        w: &SplitMatrix,
        y: &wgpu::Buffer,
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
                LinearPart {
                    // Dispatched by LinearCall (GEMV or GEMM by the rows), not by its groups.
                    call: self.call(&kernels.linear, &p, &[x, &part.buffer, bias, y], Groups::Fixed(0, 0, 0)),
                    n_out: part.rows as u32,
                    gemm: kernels.linear.pipeline.clone(),
                    gemv: kernels.gemv.pipeline.clone(),
                    gemv_groups: kernels.gemv_groups,
                }
            })
            .collect();
        Ok(LinearCall { parts })
    }
}

/// A workgroup per token's row.
pub(crate) const ROWS: Groups = Groups::Rows { per_token: 1, z: 1 };

/// Where an int8 part's scales start in its buffer, in u32 (after rows · cols quant bytes).
fn scales_at(w: &SplitMatrix, rows: usize) -> u32 {
    if w.format == WeightFormat::Int8 { (rows * w.cols / 4) as u32 } else { 0 }
}

impl Plan {
    pub fn new(
        ctx: &GpuContext,
        c: &Config,
        k: &Kernels,
        w: &GpuWeights,
        a: &Activations,
        s: &StateBuffers,
    ) -> Result<Self> {
        let (d, v) = (c.d_model as u32, c.vocab_size as u32);
        let b = Builder { ctx, k, step: &a.step, dummy: &w.dummy };
        let lin = |x_stride, y_stride| linear::LinearParams { x_stride, y_stride, ..Default::default() };
        let embedding_kernel = &k.for_format(w.embedding.format)?.embedding;
        let embedding = w
            .embedding
            .parts
            .iter()
            .map(|part| {
                let p = embedding::EmbeddingParams {
                    d_model: d,
                    row_start: part.row_start as u32,
                    n_rows: part.rows as u32,
                    w_scales: scales_at(&w.embedding, part.rows),
                };
                b.call(
                    embedding_kernel,
                    &p,
                    &[&a.ids, &part.buffer, &a.h],
                    Groups::PerToken(d.div_ceil(embedding::COLUMNS)),
                )
            })
            .collect();
        let norm = |flags| rms_norm::RmsNormParams { cols: d, eps: c.norm_eps, flags, groups: 1 };
        let layers = w
            .layers
            .iter()
            .enumerate()
            .map(|(i, l)| mixers::layer(&b, c, i, l, a, s))
            .collect::<Result<Vec<_>>>()?;
        let head = w.lm_head();
        let head_last =
            b.linear(&a.x_norm, head, &a.logits, linear::LinearParams { rows_max: 1, ..lin(d, v) })?;
        let head_blocks = (0..a.max_tokens.div_ceil(a.logits_rows))
            .map(|block| {
                let p = linear::LinearParams {
                    x_row_start: (block * a.logits_rows) as u32,
                    rows_max: a.logits_rows as u32,
                    ..lin(d, v)
                };
                b.linear(&a.x_norm, head, &a.logits, p)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            embedding,
            layers,
            norm_all: b.call(&k.rms_norm, &norm(0), &[&a.h, &w.norm_f, &a.x_norm], ROWS),
            norm_last: b.call(
                &k.rms_norm,
                &norm(rms_norm::LAST_ROW),
                &[&a.h, &w.norm_f, &a.x_norm],
                Groups::LastRow,
            ),
            head_last,
            head_blocks,
            argmax: b.call(
                &k.argmax,
                &argmax::ArgmaxParams { vocab: v, capacity: a.max_picks as u32, _pad: [0; 2] },
                &[&a.logits, &a.ids, &a.picks],
                Groups::Fixed(argmax::GROUPS.0, argmax::GROUPS.1, argmax::GROUPS.2),
            ),
            top_k: b.call(
                &k.top_k,
                &top_k::TopKParams { vocab: v, k: 1, capacity: top_k::CAPACITY as u32, _pad: 0 },
                &[&a.logits, &a.picks],
                Groups::Fixed(top_k::GROUPS.0, top_k::GROUPS.1, top_k::GROUPS.2),
            ),
        })
    }
}
