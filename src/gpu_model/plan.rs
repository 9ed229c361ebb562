//! Everything a forward pass dispatches, built once at load: the compiled kernels and, for every
//! kernel call of every layer, its parameter uniform and bind group. Encoding a forward pass then
//! only walks this plan (see `encode.rs`).

use crate::error::{Error, Result};
use crate::gpu::{GpuContext, Kernel, bind_group_layout};
use crate::gpu_model::Matmul;
use crate::gpu_model::activations::{Activations, StateBuffers};
use crate::gpu_model::format::WeightFormat;
use crate::gpu_model::weights::{GpuWeights, SplitMatrix};
use crate::kernels::{
    argmax, conv1d_silu, embedding, gemv, gemv_coalesced, linear, linear_direct, rms_norm, rms_slices,
    scan_carry, scan_chunks, scan_output, top_k,
};
use crate::load::{Phase, Reporter};
use crate::model::{Arch, Config};

/// The pipelines that read weights, for one weight format (the shaders' `W_FORMAT`).
pub(crate) struct WeightKernels {
    pub format: WeightFormat,
    pub embedding: Kernel,
    /// The many-rows matmul: `linear` (workgroup-memory tiles) or `linear_direct`.
    pub linear: Kernel,
    /// The few-rows matmul: `gemv_coalesced` (real GPUs) or `gemv` (software adapters).
    pub gemv: Kernel,
    /// `gemv`'s workgroups for (rows, outputs).
    pub gemv_groups: GroupsFn,
}

/// Workgroups of a dispatch for (rows, outputs).
pub(crate) type GroupsFn = fn(u32, u32) -> (u32, u32, u32);

/// The few-rows matmul of a kernel set (see [`Matmul`]): entry point, source and workgroups.
pub(crate) fn gemv_kernel(direct: bool) -> (&'static str, &'static str, GroupsFn) {
    if direct {
        ("gemv", gemv::SOURCE, linear::gemv_groups)
    } else {
        ("gemv_coalesced", gemv_coalesced::SOURCE, gemv_coalesced::groups)
    }
}

/// The compiled pipelines.
pub(crate) struct Kernels {
    /// One set per weight format the model's matrices use.
    pub weights: Vec<WeightKernels>,
    pub rms_norm: Kernel,
    /// Falcon-Mamba's norms on δ, B and C (compiled for that architecture only).
    pub rms_slices: Option<Kernel>,
    pub conv1d_silu: Kernel,
    pub scan_chunks: Kernel,
    pub scan_carry: Kernel,
    pub scan_output: Kernel,
    pub argmax: Kernel,
    pub top_k: Kernel,
}

impl Kernels {
    /// Compiles every kernel, the weight-reading ones once per format in `formats`, reporting
    /// each pipeline as it is done.
    pub async fn new(
        ctx: &GpuContext,
        matmul: Matmul,
        formats: &[WeightFormat],
        config: &Config,
        reporter: &mut Reporter,
    ) -> Result<Self> {
        let falcon = config.arch == Arch::FalconMamba;
        let direct = matmul.is_direct(ctx);
        let (linear_name, linear_source) =
            if direct { ("linear_direct", linear_direct::SOURCE) } else { ("linear", linear::SOURCE) };
        let (gemv_name, gemv_source, gemv_groups) = gemv_kernel(direct);
        let total = (7 + falcon as usize + 3 * formats.len()) as u64;
        let mut done = 0;
        let mut tick = |reporter: &mut Reporter| {
            done += 1;
            reporter.report(Phase::Compile, "kernels", done, total);
        };
        let embedding_layout = bind_group_layout(ctx, "embedding", embedding::BINDINGS);
        let linear_layout = bind_group_layout(ctx, linear_name, linear::BINDINGS);
        let mut weights = Vec::new();
        for &format in formats {
            let c = [("W_FORMAT", format.shader_value())];
            let embedding =
                Kernel::with_constants(ctx, "embedding", embedding::SOURCE, embedding_layout.clone(), &c)
                    .await?;
            tick(reporter);
            let linear =
                Kernel::with_constants(ctx, linear_name, linear_source, linear_layout.clone(), &c).await?;
            tick(reporter);
            let gemv = Kernel::with_constants(ctx, gemv_name, gemv_source, linear_layout.clone(), &c).await?;
            tick(reporter);
            weights.push(WeightKernels { format, embedding, linear, gemv, gemv_groups });
        }
        // The scans are specialised for the model's N (loops unrolled, state in registers).
        let n = [("N_STATE", config.d_state as f64)];
        let mut compile = async |name, source, bindings, constants: &[(&str, f64)]| {
            let layout = bind_group_layout(ctx, name, bindings);
            let k = Kernel::with_constants(ctx, name, source, layout, constants).await;
            tick(reporter);
            k
        };
        Ok(Self {
            weights,
            rms_norm: compile("rms_norm", rms_norm::SOURCE, rms_norm::BINDINGS, &[]).await?,
            rms_slices: match falcon {
                true => Some(compile("rms_slices", rms_slices::SOURCE, rms_slices::BINDINGS, &[]).await?),
                false => None,
            },
            conv1d_silu: compile("conv1d_silu", conv1d_silu::SOURCE, conv1d_silu::BINDINGS, &[]).await?,
            scan_chunks: compile("scan_chunks", scan_chunks::SOURCE, scan_chunks::BINDINGS, &n).await?,
            scan_carry: compile("scan_carry", scan_carry::SOURCE, scan_carry::BINDINGS, &[]).await?,
            scan_output: compile("scan_output", scan_output::SOURCE, scan_output::BINDINGS, &n).await?,
            argmax: compile("argmax", argmax::SOURCE, argmax::BINDINGS, &[]).await?,
            top_k: compile("top_k", top_k::SOURCE, top_k::BINDINGS, &[]).await?,
        })
    }

    /// The weight-reading kernels for `format`.
    fn for_format(&self, format: WeightFormat) -> Result<&WeightKernels> {
        self.weights.iter().find(|k| k.format == format).ok_or_else(|| Error::Gpu {
            context: "building the forward pass".into(),
            message: format!("no kernels compiled for {} weights", format.name()),
        })
    }
}

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

/// The calls of one Mamba block, in dispatch order.
pub(crate) struct LayerPlan {
    pub norm: Call,
    pub in_proj: LinearCall,
    pub conv: Call,
    pub x_proj: LinearCall,
    /// Falcon-Mamba: δ, B and C normalised in place after x_proj.
    pub x_proj_norms: Option<Call>,
    pub dt_proj: LinearCall,
    pub scan_chunks: Call,
    pub scan_carry: Call,
    pub scan_output: Call,
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
struct Builder<'a> {
    ctx: &'a GpuContext,
    k: &'a Kernels,
    step: &'a wgpu::Buffer,
    /// Bound where an optional input (a bias) is absent.
    dummy: &'a wgpu::Buffer,
}

impl Builder<'_> {
    /// A call of `kernel` with `params` and `buffers` bound from binding 2 on.
    fn call<P: bytemuck::Pod>(&self, kernel: &Kernel, params: &P, buffers: &[&wgpu::Buffer]) -> Call {
        let params = self.ctx.uniform(&format!("{} params", kernel.name), params);
        let mut all = vec![self.step, &params];
        all.extend_from_slice(buffers);
        Call { bind_group: kernel.bind(self.ctx, &all), params }
    }

    /// A linear call per part of `w`: `template` with the part's size, column, bias and scales.
    fn linear(
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
        let (d, di, n, r, v) =
            (c.d_model as u32, c.d_inner as u32, c.d_state as u32, c.dt_rank as u32, c.vocab_size as u32);
        let dbc_stride = r + 2 * n;
        let delta_at = (a.max_tokens * c.d_inner) as u32;
        let (map_len, slot_len) = (a.max_tokens as u32, a.slot_len as u32);
        let conv_total = (c.n_layer * (c.d_conv - 1) * c.d_inner) as u32;
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
        let norm = |flags| rms_norm::RmsNormParams { cols: d, eps: c.norm_eps, flags, _pad: 0 };
        let layers = w
            .layers
            .iter()
            .enumerate()
            .map(|(i, l)| -> Result<LayerPlan> {
                let i = i as u32;
                let conv = conv1d_silu::Conv1dParams {
                    d_inner: di,
                    d_conv: c.d_conv as u32,
                    xz_stride: 2 * di,
                    state_offset: i * (c.d_conv as u32 - 1) * di,
                    has_bias: l.conv_bias.is_some() as u32,
                    map_len,
                    slot_len,
                    _pad: 0,
                };
                let chunks = scan_chunks::ScanChunksParams {
                    d_inner: di,
                    dbc_stride,
                    dt_rank: r,
                    chunk: a.chunk as u32,
                    delta_at,
                    _pad: [0; 3],
                };
                let carry =
                    scan_carry::ScanCarryParams { plane: di * n, state_offset: i * di * n, _pad: [0; 2] };
                let output = scan_output::ScanOutputParams {
                    d_inner: di,
                    dbc_stride,
                    dt_rank: r,
                    chunk: a.chunk as u32,
                    state_offset: i * di * n,
                    xz_stride: 2 * di,
                    delta_at,
                    map_len,
                    slot_len,
                    slot_ssm_at: conv_total + i * di * n,
                    _pad: [0; 2],
                };
                // Δ lands in the second half of u‖Δ: y_col works as a base offset.
                let dt =
                    linear::LinearParams { flags: linear::SOFTPLUS, y_col: delta_at, ..lin(dbc_stride, di) };
                let out = linear::LinearParams { flags: linear::ACCUMULATE, ..lin(di, d) };
                let norms = rms_slices::RmsSlicesParams {
                    stride: dbc_stride,
                    dt_rank: r,
                    d_state: n,
                    eps: c.mixer_rms_eps,
                };
                Ok(LayerPlan {
                    norm: b.call(&k.rms_norm, &norm(0), &[&a.h, &l.norm, &a.x_norm]),
                    in_proj: b.linear(&a.x_norm, &l.in_proj, &a.xz, lin(d, 2 * di))?,
                    conv: b.call(
                        &k.conv1d_silu,
                        &conv,
                        &[
                            &a.xz,
                            &l.conv,
                            l.conv_bias.as_ref().unwrap_or(&w.dummy),
                            &s.conv,
                            &a.ud,
                            &a.capture,
                        ],
                    ),
                    x_proj: b.linear(&a.ud, &l.x_proj, &a.dbc, lin(di, dbc_stride))?,
                    x_proj_norms: k.rms_slices.as_ref().map(|kernel| b.call(kernel, &norms, &[&a.dbc])),
                    dt_proj: b.linear(&a.dbc, &l.dt_proj, &a.ud, dt)?,
                    scan_chunks: b.call(&k.scan_chunks, &chunks, &[&a.ud, &a.dbc, &l.a_d, &a.chunk_ab]),
                    scan_carry: b.call(&k.scan_carry, &carry, &[&a.chunk_ab, &s.ssm, &a.chunk_h0]),
                    scan_output: b.call(
                        &k.scan_output,
                        &output,
                        &[&a.ud, &a.dbc, &a.xz, &l.a_d, &a.chunk_h0, &s.ssm, &a.y, &a.capture],
                    ),
                    out_proj: b.linear(&a.y, &l.out_proj, &a.h, out)?,
                })
            })
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
