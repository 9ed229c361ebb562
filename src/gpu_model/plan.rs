//! Everything a forward pass dispatches, built once at load: the compiled kernels and, for every
//! kernel call of every layer, its parameter uniform and bind group. Encoding a forward pass then
//! only walks this plan (see `encode.rs`).

use std::any::Any;

use crate::blocks::{self, Input};
use crate::error::Result;
use crate::gpu::{GpuContext, Kernel};
use crate::gpu_kit::activations::{Activations, StateBuffers};
use crate::gpu_kit::call::{Builder, Call, Groups, LinearCall, ROWS, Step, scales_at};
use crate::gpu_kit::kv::KvCaches;
use crate::gpu_kit::pipelines::Kernels;
use crate::gpu_model::weights::GpuWeights;
use crate::kernels::{argmax, embedding, linear, rms_norm, top_k};
use crate::model::Config;

/// The whole forward pass.
pub(crate) struct Plan {
    /// A call per part of the embedding (with the pipeline of its weight format).
    pub(crate) embedding: Vec<Call>,
    /// Per layer, its steps in dispatch order (the norm before the block, then the block's).
    pub(crate) layers: Vec<Vec<Step>>,
    /// norm_f over all T rows (for all-position logits) / over row T−1 only.
    pub(crate) norm_all: Call,
    pub(crate) norm_last: Call,
    /// LM head over the one normalised last row.
    pub(crate) head_last: LinearCall,
    /// norm_f and the LM head as one call per part, for fused decode steps (`Dims::fused`;
    /// `None`: not fused, or a part too tall for one dispatch).
    pub(crate) head_fused: Option<Vec<Call>>,
    /// LM head over block b of rows (b · logits_rows ..), for all-position logits.
    pub(crate) head_blocks: Vec<LinearCall>,
    /// The greedy pick from the last row's logits into the next step's token (ids[0]): the
    /// slices' bests, then the pick.
    pub(crate) argmax: [Call; 2],
    /// The top k of the last row's logits (k written per call, into both calls' parameters):
    /// the slices' tops, then the select over them.
    pub(crate) top_k: [Call; 2],
}

impl Plan {
    pub(crate) fn new(
        ctx: &GpuContext,
        c: &Config,
        k: &Kernels,
        w: &GpuWeights,
        a: &Activations,
        (s, kv): (&StateBuffers, &KvCaches),
    ) -> Result<Self> {
        let (d, v) = (c.d_model as u32, c.vocab_size as u32);
        let b = Builder { ctx, k, step: &a.step, dummy: &w.dummy };
        let lin = |x_stride, y_stride| linear::LinearParams { x_stride, y_stride, ..Default::default() };
        let embedding_kernel = &k.for_format(w.embedding.format)?.embedding;
        // Where a block reads the embeddings in a later layer, a second gather keeps them.
        let reads = c.blocks.iter().any(|b| b.kind.inputs().contains(&Input::Embeddings));
        let kept = reads.then(|| a.input(Input::Embeddings.name())).transpose()?;
        let targets: Vec<&wgpu::Buffer> = [&a.h].into_iter().chain(kept).collect();
        let embedding = targets
            .iter()
            .flat_map(|target| w.embedding.parts.iter().map(move |part| (part, *target)))
            .map(|(part, target)| {
                let p = embedding::EmbeddingParams {
                    d_model: d,
                    row_start: part.row_start as u32,
                    n_rows: part.rows as u32,
                    w_scales: scales_at(&w.embedding, part.rows),
                    scale: c.scales.embedding,
                    _pad: [0; 3],
                };
                b.call(
                    embedding_kernel,
                    &p,
                    &[("ids", &a.ids), ("w", &part.buffer), ("h", target)],
                    Groups::PerToken(d.div_ceil(embedding::COLUMNS)),
                )
            })
            .collect::<Result<_>>()?;
        let norm = |flags| rms_norm::RmsNormParams { cols: d, eps: c.norm_eps, flags, groups: 1 };
        // Each layer: the RMSNorm before its block, then the calls its kind records
        // (src/blocks/<kind>/gpu.rs).
        let mixer: Vec<&dyn Any> = w.layers.iter().map(|l| l.mixer.as_any()).collect();
        let layers = c
            .blocks
            .iter()
            .zip(&w.layers)
            .enumerate()
            .map(|(i, (block, l))| {
                let io = [("x", &a.h), ("weight", &l.norm), ("y", &a.x_norm)];
                let cx = blocks::gpu_common::LayerCx {
                    b: &b,
                    a,
                    s,
                    kv,
                    i,
                    residual: block.residual_scale,
                    norm: &l.norm,
                    eps: c.norm_eps,
                    layers: &mixer,
                };
                let mut steps = Vec::new();
                if !l.mixer.norms_itself(&cx) {
                    steps.push(Step::Call(b.call(&k.rms_norm, &norm(0), &io, ROWS)?));
                }
                steps.extend(l.mixer.plan(cx)?);
                Ok(steps)
            })
            .collect::<Result<Vec<_>>>()?;
        let norm_f = [("x", &a.h), ("weight", &w.norm_f), ("y", &a.x_norm)];
        let head = w.lm_head();
        let head_io = [("x", &a.x_norm), ("y", &a.logits)];
        let logits = |p: linear::LinearParams| p.scaled(c.scales.logits);
        let head_last =
            b.linear(head, &head_io, logits(linear::LinearParams { rows_max: 1, ..lin(d, v) }))?;
        let head_blocks = (0..a.max_tokens.div_ceil(a.logits_rows))
            .map(|block| {
                let p = linear::LinearParams {
                    x_row_start: (block * a.logits_rows) as u32,
                    rows_max: a.logits_rows as u32,
                    ..lin(d, v)
                };
                b.linear(head, &head_io, logits(p))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            embedding,
            layers,
            norm_all: b.call(&k.rms_norm, &norm(0), &norm_f, ROWS)?,
            norm_last: b.call(&k.rms_norm, &norm(rms_norm::LAST_ROW), &norm_f, Groups::LastRow)?,
            head_last,
            head_fused: match k.fused {
                true => blocks::decode::head(
                    &b,
                    (head, &w.norm_f, c.norm_eps, c.scales.logits),
                    (&a.h, &a.logits, &s.conv),
                )?,
                false => None,
            },
            head_blocks,
            argmax: picking(
                &b,
                k.argmax.kernels(),
                &argmax::ArgmaxParams { vocab: v, capacity: a.max_picks as u32, _pad: [0; 2] },
                &[("logits", &a.logits), ("ids", &a.ids), ("picks", &a.picks), ("slices", &a.slices)],
                argmax::slices(c.vocab_size),
            )?,
            top_k: picking(
                &b,
                k.top_k.kernels(),
                &top_k::TopKParams { vocab: v, k: 1, capacity: top_k::CAPACITY as u32, _pad: 0 },
                &[("logits", &a.logits), ("top", &a.picks), ("slices", &a.slices)],
                top_k::slices(c.vocab_size),
            )?,
        })
    }
}

/// A picking kernel's two calls (`argmax`, `top_k`): its first entry point with a workgroup per
/// slice of the logits, then its second with one workgroup.
fn picking<P: bytemuck::Pod>(
    b: &Builder<'_>,
    [slices, reduce]: [&Kernel; 2],
    params: &P,
    io: &[(&str, &wgpu::Buffer)],
    n_slices: usize,
) -> Result<[Call; 2]> {
    Ok([
        b.call(slices, params, io, Groups::Fixed(n_slices as u32, 1, 1))?,
        b.call(reduce, params, io, Groups::Fixed(1, 1, 1))?,
    ])
}
