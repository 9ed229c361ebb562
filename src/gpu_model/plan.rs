//! Everything a forward pass dispatches, built once at load: the compiled kernels and, for every
//! kernel call of every layer, its parameter uniform and bind group. Encoding a forward pass then
//! only walks this plan (see `encode.rs`).

use crate::blocks;
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::gpu_model::activations::{Activations, StateBuffers};
use crate::gpu_model::call::{Builder, Call, Groups, LinearCall, ROWS, Step, scales_at};
use crate::gpu_model::kv::KvCaches;
use crate::gpu_model::pipelines::Kernels;
use crate::gpu_model::weights::GpuWeights;
use crate::kernels::{argmax, embedding, linear, rms_norm, top_k};
use crate::model::Config;

/// The whole forward pass.
pub(crate) struct Plan {
    /// A call per part of the embedding (with the pipeline of its weight format).
    pub embedding: Vec<Call>,
    /// Per layer, its steps in dispatch order (the norm before the block, then the block's).
    pub layers: Vec<Vec<Step>>,
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

impl Plan {
    pub fn new(
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
        // Zamba2's shared blocks read the embeddings again: a second gather keeps them.
        let zamba2 = c.blocks.iter().any(|b| matches!(b.kind, blocks::BlockKind::Zamba2(_)));
        let targets: &[&wgpu::Buffer] = if zamba2 { &[&a.h, &a.emb] } else { &[&a.h] };
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
        let layers = c
            .blocks
            .iter()
            .zip(&w.layers)
            .enumerate()
            .map(|(i, (block, l))| {
                let io = [("x", &a.h), ("weight", &l.norm), ("y", &a.x_norm)];
                let cx = blocks::gpu::LayerCx {
                    b: &b,
                    a,
                    s,
                    kv,
                    owner: match &block.kind {
                        crate::blocks::BlockKind::Zamba2(p) => w.layers.get(p.owner_block).map(|l| &l.mixer),
                        _ => None,
                    },
                    i,
                    residual: block.residual_scale,
                    norm: &l.norm,
                    eps: c.norm_eps,
                };
                let mut steps = Vec::new();
                if !blocks::gpu::norms_itself(&block.kind, &l.mixer, &cx) {
                    steps.push(Step::Call(b.call(&k.rms_norm, &norm(0), &io, ROWS)?));
                }
                steps.extend(blocks::gpu::plan(&block.kind, &l.mixer, cx)?);
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
            head_blocks,
            argmax: b.call(
                &k.argmax,
                &argmax::ArgmaxParams { vocab: v, capacity: a.max_picks as u32, _pad: [0; 2] },
                &[("logits", &a.logits), ("ids", &a.ids), ("picks", &a.picks)],
                Groups::Fixed(argmax::GROUPS.0, argmax::GROUPS.1, argmax::GROUPS.2),
            )?,
            top_k: b.call(
                &k.top_k,
                &top_k::TopKParams { vocab: v, k: 1, capacity: top_k::CAPACITY as u32, _pad: 0 },
                &[("logits", &a.logits), ("top", &a.picks)],
                Groups::Fixed(top_k::GROUPS.0, top_k::GROUPS.1, top_k::GROUPS.2),
            )?,
        })
    }
}
