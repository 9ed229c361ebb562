//! Everything a forward pass dispatches, built once at load: the compiled kernels and, for every
//! kernel call of every layer, its parameter uniform and bind group. Encoding a forward pass then
//! only walks this plan (see `encode.rs`).

use crate::error::Result;
use crate::gpu::{GpuContext, Kernel};
use crate::gpu_model::activations::{Activations, StateBuffers};
use crate::gpu_model::format::WeightFormat;
use crate::gpu_model::mixers;
use crate::gpu_model::pipelines::{GroupsFn, Kernels};
use crate::gpu_model::weights::{GpuWeights, SplitMatrix};
use crate::kernels::{argmax, embedding, linear, rms_norm, top_k};
use crate::model::Config;

/// A bind group with the parameter uniform it binds (kept alive with it).
pub(crate) struct Call {
    pub bind_group: wgpu::BindGroup,
    /// The parameter uniform (written once at load; `top_k`'s k per call).
    pub params: wgpu::Buffer,
}

/// One part of a linear layer's weight matrix: its call, its outputs, and the pipelines of its
/// weight format (the tiled or direct GEMM for many rows, the GEMV for one).
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
    /// Channels of the conv: E·D (Mamba-1), conv_dim (Mamba-2).
    pub conv_channels: u32,
    /// Mamba-1 only (Mamba-2's Δ, B, C come out of in_proj and the conv).
    pub projections: Option<Projections>,
    pub scan_chunks: Call,
    pub scan_carry: Call,
    pub scan_output: Call,
    /// Workgroups of the scan passes along x (chunks along y).
    pub scan_width: u32,
    /// Mamba-2: the gated RMSNorm (rms_norm over G rows per token), and G.
    pub gated_norm: Option<(Call, u32)>,
    pub out_proj: LinearCall,
}

/// The whole forward pass.
pub(crate) struct Plan {
    /// A call per part of the embedding, with the pipeline of its weight format.
    pub embedding: Vec<(Call, wgpu::ComputePipeline)>,
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
    /// A call of `kernel` with `params` and `buffers` bound from binding 2 on.
    pub fn call<P: bytemuck::Pod>(&self, kernel: &Kernel, params: &P, buffers: &[&wgpu::Buffer]) -> Call {
        let params = self.ctx.uniform(&format!("{} params", kernel.name), params);
        let mut all = vec![self.step, &params];
        all.extend_from_slice(buffers);
        Call { bind_group: kernel.bind(self.ctx, &all), params }
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
                    call: self.call(&kernels.linear, &p, &[x, &part.buffer, bias, y]),
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
                (
                    b.call(embedding_kernel, &p, &[&a.ids, &part.buffer, &a.h]),
                    embedding_kernel.pipeline.clone(),
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
            norm_all: b.call(&k.rms_norm, &norm(0), &[&a.h, &w.norm_f, &a.x_norm]),
            norm_last: b.call(&k.rms_norm, &norm(rms_norm::LAST_ROW), &[&a.h, &w.norm_f, &a.x_norm]),
            head_last,
            head_blocks,
            argmax: b.call(
                &k.argmax,
                &argmax::ArgmaxParams { vocab: v, capacity: a.max_picks as u32, _pad: [0; 2] },
                &[&a.logits, &a.ids, &a.picks],
            ),
            top_k: b.call(
                &k.top_k,
                &top_k::TopKParams { vocab: v, k: 1, capacity: top_k::CAPACITY as u32, _pad: 0 },
                &[&a.logits, &a.picks],
            ),
        })
    }
}
