//! Loading a model onto the GPU: [`GpuModel::begin`] checks the model against the device and
//! allocates every buffer from the checkpoint's headers alone (a model that cannot fit fails
//! before any weight byte is read); a checkpoint stream then fills the weights through the
//! [`Upload`] sink; [`Loading::finish`] compiles the kernels for the weight formats in use and
//! builds every bind group.

use crate::blocks;
use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::gpu_kit::activations::{Activations, CAPTURE_BYTES, StateBuffers};
use crate::gpu_kit::kv::{self, KvCaches};
use crate::gpu_kit::pipelines::Kernels;
use crate::gpu_model::checks;
use crate::gpu_model::plan::Plan;
use crate::gpu_model::slots::Slots;
use crate::gpu_model::upload::Upload;
use crate::gpu_model::weights::GpuWeights;
use crate::gpu_model::{GpuMemory, GpuModel, GpuModelOptions, MAX_GREEDY_STEPS, WeightFormat};
use crate::load::Reporter;
use crate::model::State;
use crate::model::{Checkpoint, Config, Layout, context};

/// A model whose buffers exist and whose weights are streaming in: [`GpuModel::begin`] makes
/// it, a checkpoint stream fills [`Loading::sink`], [`Loading::finish`] compiles and plans.
pub(crate) struct Loading<'a> {
    ctx: &'a GpuContext,
    config: Config,
    options: GpuModelOptions,
    pub(crate) sink: Upload<'a>,
    acts: Activations,
    state: StateBuffers,
    kv: KvCaches,
}

impl GpuModel {
    /// Streams `checkpoint`'s weights onto the GPU — each piece converted to
    /// `options.weights` and written before the next is read — then compiles the kernels and
    /// builds every bind group.
    pub async fn load(ctx: &GpuContext, checkpoint: &Checkpoint, options: GpuModelOptions) -> Result<Self> {
        Self::load_reporting(ctx, checkpoint, options, &mut Reporter::silent()).await
    }

    /// Like [`GpuModel::load`], reporting progress.
    pub async fn load_reporting(
        ctx: &GpuContext,
        checkpoint: &Checkpoint,
        options: GpuModelOptions,
        reporter: &mut Reporter,
    ) -> Result<Self> {
        let mut loading = Self::begin(ctx, &checkpoint.config, &checkpoint.layout, options).await?;
        let fingerprint = checkpoint.stream(&mut loading.sink, reporter)?;
        loading.finish(fingerprint, reporter).await
    }

    /// Checks the model against the device and allocates every buffer (weights zeroed), so a
    /// model that cannot fit fails here, before any weight byte is read.
    pub(crate) async fn begin<'a>(
        ctx: &'a GpuContext,
        config: &Config,
        layout: &Layout,
        options: GpuModelOptions,
    ) -> Result<Loading<'a>> {
        if options.max_tokens == 0 {
            return Err(Error::InvalidInput("max_tokens must be at least 1".into()));
        }
        checks::check_supported(config, ctx, options.kv_format)?;
        checks::check_dispatch(config, options.max_tokens, options.matmul, ctx)?;
        let max_context = kv::max_context(config, ctx, options.max_context)?;
        let allocated = ctx
            .scoped("allocating the model's GPU buffers", || -> Result<_> {
                let w = GpuWeights::allocate(
                    ctx,
                    config,
                    layout,
                    (options.weights, options.gguf_blocks),
                    options.max_binding_bytes,
                )?;
                let needs: Vec<_> = config
                    .blocks
                    .iter()
                    .map(|b| b.kind.scratch(config.d_model, options.max_tokens))
                    .collect();
                let reads = reads(config);
                let capture_bytes = options.capture_bytes.unwrap_or(CAPTURE_BYTES);
                let sizes = (options.max_tokens, MAX_GREEDY_STEPS);
                let acts = Activations::new(ctx, config, (&needs, &reads), sizes, capture_bytes)?;
                let state = StateBuffers::new(ctx, config)?;
                let capacity =
                    if context::kv_bytes_per_position(config) > 0 { kv::PAGE.min(max_context) } else { 0 };
                let kv = KvCaches::new(ctx, config, (capacity, max_context), options.kv_format)?;
                Ok((w, acts, state, kv))
            })
            .await;
        let (w, acts, state, kv) = match allocated {
            Ok(inner) => inner?,
            Err(refused @ (Error::Gpu { .. } | Error::OutOfMemory { .. })) => {
                let message = match refused {
                    Error::Gpu { message, .. } => message,
                    other => other.to_string(),
                };
                // What was asked for, computed again without the device: matrices in their
                // format, vectors in f32.
                let weights: u64 =
                    layout.planned().map(|p| options.weights.bytes_of(p.role, p.rows, p.cols)).sum();
                return Err(Error::OutOfMemory {
                    what: format!(
                        "the model's GPU buffers (weights in {} ~{}, plus activations for {} tokens)",
                        options.weights.name(),
                        crate::error::gb(weights),
                        options.max_tokens
                    ),
                    needed: weights,
                    limit: format!("the device refused them: {message}"),
                });
            }
            Err(other) => return Err(other),
        };
        let sink = Upload::new(ctx, w);
        Ok(Loading { ctx, config: config.clone(), options, sink, acts, state, kv })
    }
}

impl Loading<'_> {
    /// After every weight was streamed in: waits for the uploads, compiles the kernels (one set
    /// per weight format in use) and builds every bind group.
    pub(crate) async fn finish(self, fingerprint: [u8; 32], reporter: &mut Reporter) -> Result<GpuModel> {
        let Loading { ctx, config, options, sink, acts, state, kv } = self;
        ctx.flush().await?;
        let (w, conversion) = (sink.weights, sink.stats);
        let mut formats: Vec<WeightFormat> = w.matrices().map(|m| m.format).collect();
        formats.sort();
        formats.dedup();
        // Kept: the plan is built again when the key/value caches grow.
        let mut block_kernels: Vec<_> =
            config.blocks.iter().flat_map(|b| b.kind.gpu_kernels(options.kv_format)).collect();
        if options.fused {
            let direct = options.matmul.is_direct(ctx);
            block_kernels.extend(config.blocks.iter().flat_map(|b| b.kind.decode_kernels(&formats, direct)));
            block_kernels.push(blocks::decode::in_proj_spec(w.lm_head().format, direct));
        }
        let kernels = Kernels::new(ctx, &options, &formats, block_kernels, reporter).await?;
        let plan = ctx
            .scoped("building the forward pass", || {
                Plan::new(ctx, &config, &kernels, &w, &acts, (&state, &kv))
            })
            .await??;
        let memory = GpuMemory {
            weight_format: w.embedding.format,
            weights: w.bytes(),
            activations: acts.bytes(),
            state: state.bytes(),
            kv: 0,
            slots: 0,
            pages: 0,
            conversion,
        };
        let slots = Slots::new(ctx, State::bytes(&config) as u64, &kv)?;
        let adapter = ctx.summary();
        let numerics = format!(
            "gpu {} ({}) weights {} kv {} matmul {}",
            adapter.name,
            adapter.driver,
            formats.iter().map(|f| f.name()).collect::<Vec<_>>().join("+"),
            kv.format.name(),
            match (kernels.direct, kernels.subgroups) {
                (true, _) => "direct",
                (false, false) => "tiled",
                (false, true) => "tiled+subgroups",
            }
        );
        Ok(GpuModel {
            ctx: ctx.clone(),
            config,
            kernels,
            weights: w,
            acts,
            state,
            kv,
            context: 0,
            rewind_context: 0,
            prepared: None,
            prepared_used: 0,
            plan,
            slots,
            pages: None,
            fingerprint,
            numerics,
            memory,
        })
    }
}

/// The names of the inputs across layers some block of `c` reads, each once.
fn reads(c: &Config) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for input in c.blocks.iter().flat_map(|b| b.kind.inputs()) {
        if !out.contains(&input.name()) {
            out.push(input.name());
        }
    }
    out
}
