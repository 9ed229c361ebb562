//! [`GpuModel`]: the Mamba forward pass on WebGPU — the same WGSL kernels in the browser and
//! natively. Everything is created at load (weights, activations sized for `max_tokens`, state,
//! pipelines, every bind group); a forward call writes the token ids and a [`Step`] uniform,
//! records dispatches, submits, and reads back only the logits it returns.
//!
//! Per layer: rms_norm → linear (in_proj) → conv1d_silu → linear (x_proj) → linear (dt_proj +
//! softplus) → selective scan (scan_chunks → scan_carry → scan_output, or scan_output alone
//! when T fits one chunk, as in decode) → linear (out_proj, added onto the residual).

mod activations;
mod encode;
mod plan;
mod weights;

use crate::cpu::{LayerState, Logits, State};
use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::kernels::Step;
use crate::model::{Config, ModelWeights};

use activations::{Activations, StateBuffers};
use encode::Head;
use plan::{Kernels, Plan};
use weights::GpuWeights;

/// Which kernel multiplies matrices of many rows (prefill); decode steps always use `gemv`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Matmul {
    /// `linear_direct` on adapters that run on the CPU (lavapipe, SwiftShader), else `linear`.
    #[default]
    Auto,
    /// `linear`: tiles staged in workgroup memory (what real GPUs want).
    Tiled,
    /// `linear_direct`: 4×4 register blocks, no barriers (what software adapters want).
    Direct,
}

/// Load-time options.
#[derive(Clone, Copy, Debug)]
pub struct GpuModelOptions {
    /// Most tokens one forward chunk processes; longer inputs run in several chunks. Activation
    /// buffers scale with it.
    pub max_tokens: usize,
    /// The prefill matmul kernel.
    pub matmul: Matmul,
}

impl Default for GpuModelOptions {
    fn default() -> Self {
        Self { max_tokens: 512, matmul: Matmul::Auto }
    }
}

/// A model loaded on the GPU, with one recurrent state (the "working state") that every
/// forward call continues from.
pub struct GpuModel {
    ctx: GpuContext,
    config: Config,
    kernels: Kernels,
    // Kept alive with the bind groups that reference them.
    _weights: GpuWeights,
    acts: Activations,
    state: StateBuffers,
    plan: Plan,
}

impl GpuModel {
    /// Uploads `weights` and builds every pipeline and bind group.
    pub async fn new(ctx: &GpuContext, weights: &ModelWeights, options: GpuModelOptions) -> Result<Self> {
        let config = weights.config.clone();
        if options.max_tokens == 0 {
            return Err(Error::InvalidInput("max_tokens must be at least 1".into()));
        }
        let kernels = Kernels::new(ctx, options.matmul).await?;
        let (w, acts, state, plan) = ctx
            .scoped("uploading the model", || -> Result<_> {
                let w = GpuWeights::upload(ctx, weights)?;
                let acts = Activations::new(ctx, &config, options.max_tokens)?;
                let state = StateBuffers::new(ctx, &config)?;
                let plan = Plan::new(ctx, &config, &kernels, &w, &acts, &state)?;
                Ok((w, acts, state, plan))
            })
            .await??;
        Ok(Self { ctx: ctx.clone(), config, kernels, _weights: w, acts, state, plan })
    }

    /// The model's hyper-parameters.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The GPU context the model lives on.
    pub fn context(&self) -> &GpuContext {
        &self.ctx
    }

    /// Runs `tokens` from the working state and leaves it at the last token; returns the logits
    /// of every position (T, V) or of the last one (V). Longer inputs than `max_tokens` run in
    /// several chunks. Bad ids fail before anything runs, leaving the state as it was.
    pub async fn forward(&mut self, tokens: &[u32], which: Logits) -> Result<Vec<f32>> {
        let c = &self.config;
        if tokens.is_empty() {
            return Err(Error::InvalidInput("forward needs at least one token".into()));
        }
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= c.vocab_size) {
            return Err(Error::InvalidInput(format!(
                "token id {bad} is outside the vocabulary (size {})",
                c.vocab_size
            )));
        }
        let mut out =
            Vec::with_capacity(if which == Logits::All { tokens.len() * c.vocab_size } else { c.vocab_size });
        let chunks: Vec<&[u32]> = tokens.chunks(self.acts.max_tokens).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            let last = i + 1 == chunks.len();
            match which {
                Logits::All => out.extend(self.run_chunk(chunk, Head::AllRowsNormalised).await?),
                Logits::Last if last => out = self.run_chunk(chunk, Head::Last).await?,
                Logits::Last => {
                    self.run_chunk(chunk, Head::None).await?;
                }
            }
        }
        Ok(out)
    }

    /// One chunk of at most `max_tokens` tokens; returns the logits `head` asks for.
    async fn run_chunk(&mut self, tokens: &[u32], head: Head) -> Result<Vec<f32>> {
        let (c, a) = (&self.config, &self.acts);
        let t = tokens.len() as u32;
        let chunks = t.div_ceil(a.chunk as u32);
        let queue = self.ctx.queue();
        queue.write_buffer(&a.ids, 0, bytemuck::cast_slice(tokens));
        queue.write_buffer(
            &a.step,
            0,
            bytemuck::bytes_of(&Step { t_len: t, n_chunks: chunks, _pad: [0; 2] }),
        );
        let max_dim = self.ctx.summary().max_compute_workgroups_per_dimension;
        let mut encoder = self.ctx.encoder("forward");
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            let dims = encode::Dims { t, chunks, max_dim };
            encode::body(&mut pass, &self.kernels, c, &self.plan, dims, head);
        }
        queue.submit([encoder.finish()]);
        match head {
            Head::None => return Ok(Vec::new()),
            Head::Last => return a.readback.read_f32(&self.ctx, &a.logits, 0, c.vocab_size).await,
            Head::AllRowsNormalised => {}
        }
        // All positions: the LM head block by block, each read back before the next.
        let mut out = Vec::with_capacity(tokens.len() * c.vocab_size);
        for (b, block) in self.plan.head_blocks.iter().enumerate() {
            let start = b * a.logits_rows;
            if start >= tokens.len() {
                break;
            }
            let rows = a.logits_rows.min(tokens.len() - start);
            let mut encoder = self.ctx.encoder("lm head");
            {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
                encode::linear(&mut pass, &self.kernels, block, rows as u32);
            }
            queue.submit([encoder.finish()]);
            out.extend(a.readback.read_f32(&self.ctx, &a.logits, 0, rows * c.vocab_size).await?);
        }
        Ok(out)
    }

    /// Resets the working state to all zeros (the state before any token).
    pub fn reset_state(&mut self) {
        let mut encoder = self.ctx.encoder("reset state");
        encoder.clear_buffer(&self.state.conv, 0, None);
        encoder.clear_buffer(&self.state.ssm, 0, None);
        self.ctx.queue().submit([encoder.finish()]);
    }

    /// Copies the working state to the CPU.
    pub async fn read_state(&self) -> Result<State> {
        let c = &self.config;
        let conv_len = (c.d_conv - 1) * c.d_inner;
        let ssm_len = c.d_inner * c.d_state;
        let conv = self.ctx.read_f32(&self.state.conv, 0, c.n_layer * conv_len).await?;
        let ssm = self.ctx.read_f32(&self.state.ssm, 0, c.n_layer * ssm_len).await?;
        let layers = (0..c.n_layer)
            .map(|l| LayerState {
                conv: conv[l * conv_len..(l + 1) * conv_len].to_vec(),
                ssm: ssm[l * ssm_len..(l + 1) * ssm_len].to_vec(),
            })
            .collect();
        Ok(State { layers })
    }

    /// Replaces the working state with `state` (which must fit this model).
    pub fn write_state(&mut self, state: &State) -> Result<()> {
        state.check_fits(&self.config)?;
        let conv: Vec<f32> = state.layers.iter().flat_map(|l| l.conv.iter().copied()).collect();
        let ssm: Vec<f32> = state.layers.iter().flat_map(|l| l.ssm.iter().copied()).collect();
        if !conv.is_empty() {
            self.ctx.queue().write_buffer(&self.state.conv, 0, bytemuck::cast_slice(&conv));
        }
        self.ctx.queue().write_buffer(&self.state.ssm, 0, bytemuck::cast_slice(&ssm));
        Ok(())
    }
}
