//! [`GpuModel`]: the Mamba forward pass on WebGPU — the same WGSL kernels in the browser and
//! natively. Everything is created at load (weights, activations sized for `max_tokens`, state,
//! pipelines, every bind group); a forward call writes the token ids and a [`Step`] uniform,
//! records dispatches, submits, and reads back only the logits it returns.
//!
//! Per layer: rms_norm, then the calls its block kind records (`src/blocks/<kind>/gpu.rs`; a
//! Mamba-1 block: linear (in_proj) → conv1d_silu → linear (x_proj) → linear (dt_proj +
//! softplus) → selective scan (scan_chunks → scan_carry → scan_output, or scan_output alone
//! when T fits one chunk, as in decode) → linear (out_proj, added onto the residual)). The
//! block kinds build with the GPU toolkit below them (`src/gpu_kit/`), as this does.

mod checks;
mod encode;
#[cfg(not(target_arch = "wasm32"))]
mod gemm_rate;
mod greedy;
mod kv_pages;
mod load;
mod plan;
mod slabs;
mod slots;
mod state_io;
mod top;
mod upload;
pub(crate) mod weights;

pub use crate::gpu_kit::{
    ConversionStats, GpuMemory, GpuModelOptions, KV_PAGE, KvFormat, Matmul, WeightFormat,
};
#[cfg(not(target_arch = "wasm32"))]
pub use gemm_rate::gemm_gflop_s;
pub(crate) use greedy::MAX_GREEDY_STEPS;
#[cfg(target_arch = "wasm32")]
pub(crate) use upload::FLUSH_BYTES;

use crate::error::Result;
use crate::gpu::GpuContext;
use crate::kernels::Step;
use crate::model::Config;
use crate::model::Logits;

use crate::gpu_kit::activations::{Activations, StateBuffers};
use crate::gpu_kit::call;
use crate::gpu_kit::kv::KvCaches;
use crate::gpu_kit::pipelines::Kernels;
use encode::Head;
use plan::Plan;
use slots::Slots;
use weights::GpuWeights;

/// A model loaded on the GPU, with one recurrent state (the "working state") that every
/// forward call continues from.
pub struct GpuModel {
    ctx: GpuContext,
    config: Config,
    // Kept: the plan is built again (new bind groups) when the key/value caches grow.
    kernels: Kernels,
    weights: GpuWeights,
    acts: Activations,
    state: StateBuffers,
    kv: KvCaches,
    /// Tokens the working state has seen (the position of the next token).
    context: usize,
    /// `context` before the last greedy batch.
    rewind_context: usize,
    /// The next greedy batch, recorded while the last one ran (dropped when the plan is rebuilt).
    prepared: Option<greedy::Prepared>,
    /// Greedy batches that were submitted prepared.
    prepared_used: u64,
    plan: Plan,
    slots: Slots,
    /// Key/value pages (pages mode: `kv_pages.rs`).
    pages: Option<kv_pages::KvPages>,
    fingerprint: [u8; 32],
    /// How it computes: adapter, weight and cache formats, matmul kernels (`GpuModel::numerics`).
    numerics: String,
    memory: GpuMemory,
}

impl GpuModel {
    /// GPU memory by category, and the weight format.
    pub fn memory(&self) -> GpuMemory {
        GpuMemory {
            slots: self.slots.bytes(),
            pages: self.pages.as_ref().map_or(0, kv_pages::KvPages::bytes),
            kv: self.kv.bytes(),
            ..self.memory
        }
    }

    /// Every format its weight matrices are stored in, in order (one for most models; a GGUF
    /// file's float matrices and its ggml block types side by side: f16, Q4_K, Q6_K).
    pub fn weight_formats(&self) -> Vec<WeightFormat> {
        let mut formats: Vec<WeightFormat> = self.weights.matrices().map(|m| m.format).collect();
        formats.sort();
        formats.dedup();
        formats
    }

    /// How this model computes — adapter, weight formats, cache format, matmul kernels: two
    /// models with equal fingerprints and numerics give the same numbers (the state store's
    /// records are only used under equal ones).
    pub fn numerics(&self) -> &str {
        &self.numerics
    }

    /// Whether the GEMV kernels sum across workgroups with subgroup operations
    /// ([`GpuModelOptions::subgroups`]).
    pub fn uses_subgroups(&self) -> bool {
        self.kernels.subgroups
    }

    /// Tokens of context the working state holds (its next token's position).
    pub fn context_len(&self) -> usize {
        self.context
    }

    /// For each mixture-of-experts block, which routed experts the last forward chunk (or
    /// decode step) ran — read their weights: those any token chose, from the dispatch
    /// arguments the router wrote on the device. `(block, experts)` per mixture.
    pub async fn experts_run(&self) -> Result<Vec<(usize, Vec<bool>)>> {
        let mut out = Vec::new();
        for (i, layer) in self.weights.layers.iter().enumerate() {
            if let Some((dispatches, per)) = layer.mixer.expert_dispatches() {
                let words = dispatches.size() as usize / 4;
                let args = self.ctx.read_f32(dispatches, 0, words).await;
                let args: Vec<u32> = self
                    .ctx
                    .checked("reading the experts' dispatches", args)?
                    .iter()
                    .map(|v| v.to_bits())
                    .collect();
                out.push((i, args.chunks_exact(per).map(|a| a.iter().any(|&g| g > 0)).collect()));
            }
        }
        Ok(out)
    }

    /// How the key/value caches store keys and values.
    pub(crate) fn kv_format(&self) -> KvFormat {
        self.kv.format
    }

    /// The most tokens of context this model may hold ([`GpuModelOptions::max_context`];
    /// `usize::MAX` for a model without attention).
    pub fn max_context(&self) -> usize {
        self.kv.max_context
    }

    /// The model's hyper-parameters.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The model's fingerprint ([`crate::ModelWeights::fingerprint`]).
    pub fn fingerprint(&self) -> [u8; 32] {
        self.fingerprint
    }

    /// The GPU context the model lives on.
    pub fn context(&self) -> &GpuContext {
        &self.ctx
    }

    /// Runs `tokens` from the working state and leaves it at the last token; returns the logits
    /// of every position (T, V) or of the last one (V). Longer inputs than `max_tokens` run in
    /// several chunks. Bad ids fail before anything runs, leaving the state as it was.
    pub async fn forward(&mut self, tokens: &[u32], which: Logits) -> Result<Vec<f32>> {
        self.forward_capturing(tokens, which, &[]).await
    }

    /// Like [`GpuModel::forward`], and also writes the state after token `pos` into checkpoint
    /// slot `slot` for every `(pos, slot)` in `captures` (positions ascending, within
    /// `tokens`): the states come out of the same scan, not from a split forward pass.
    pub async fn forward_capturing(
        &mut self,
        tokens: &[u32],
        which: Logits,
        captures: &[(usize, usize)],
    ) -> Result<Vec<f32>> {
        self.config.check_forward(tokens, captures.iter().map(|c| c.0))?;
        self.ctx.check("before a forward pass")?;
        self.reserve(self.context + tokens.len())?;
        // The most checkpoints one forward chunk of max_tokens tokens writes.
        let t = self.acts.max_tokens;
        let needed = captures.chunk_by(|a, b| a.0 / t == b.0 / t).map(<[_]>::len).max().unwrap_or(0);
        self.reserve_captures(needed)?;
        for &(pos, slot) in captures {
            self.slots.locate_for_write(&self.ctx, slot)?;
            let end = self.context + pos + 1;
            self.slots.kv_for_write(&self.ctx, slot, self.tail_start(end)..end)?;
        }
        let c = &self.config;
        let mut out =
            Vec::with_capacity(if which == Logits::All { tokens.len() * c.vocab_size } else { c.vocab_size });
        let (mut start, mut next_capture) = (0, 0);
        while start < tokens.len() {
            // A forward chunk: at most max_tokens tokens and at most `captures` checkpoints.
            let mut end = (start + self.acts.max_tokens).min(tokens.len());
            let in_chunk = captures[next_capture..].iter().take_while(|(p, _)| *p < end).count();
            let room = self.acts.capture_layout.captures;
            if in_chunk > room {
                end = captures[next_capture + room - 1].0 + 1;
            }
            let chunk_captures: Vec<(usize, usize)> = captures[next_capture..]
                .iter()
                .take_while(|(p, _)| *p < end)
                .map(|&(p, slot)| (p - start, slot))
                .collect();
            next_capture += chunk_captures.len();
            let last = end == tokens.len();
            let head = match which {
                Logits::All => Head::AllRowsNormalised,
                Logits::Last if last => Head::Last,
                Logits::Last => Head::None,
            };
            let logits = self.run_chunk(&tokens[start..end], head, &chunk_captures).await?;
            self.context += end - start;
            match which {
                Logits::All => out.extend(logits),
                Logits::Last => out = logits,
            }
            start = end;
        }
        Ok(out)
    }

    /// Writes a forward chunk's inputs — the ids, the position map (checkpoint number + 1 after
    /// token t, else 0), the `Step` uniform and the mixtures' dispatch templates — and returns
    /// its dispatch sizes.
    fn write_inputs(&self, tokens: &[u32], captures: &[(usize, usize)]) -> Result<call::Dims> {
        let (a, queue) = (&self.acts, self.ctx.queue());
        let t = tokens.len() as u32;
        for layer in &self.weights.layers {
            layer.mixer.before_chunk(queue, &self.kernels, t)?;
        }
        let chunks = t.div_ceil(a.chunk as u32);
        queue.write_buffer(&a.ids, 0, bytemuck::cast_slice(tokens));
        // Whole numbers as f32 values, not u32 bits: 1–64 as bits are f32 denormals, which a GPU
        // may flush to 0 on a load (the kernels read `u32(capture[t])`; exact below 2^24).
        let mut map = vec![0f32; tokens.len()];
        for (i, &(pos, _)) in captures.iter().enumerate() {
            map[pos] = (i + 1) as f32;
        }
        queue.write_buffer(&a.capture, 0, bytemuck::cast_slice(&map));
        queue.write_buffer(
            &a.step,
            0,
            bytemuck::bytes_of(&Step { t_len: t, n_chunks: chunks, past: self.context as u32, _pad: 0 }),
        );
        let max_dim = self.ctx.summary().max_compute_workgroups_per_dimension;
        Ok(call::Dims { t, chunks, past: self.context as u32, max_dim, no_captures: captures.is_empty() })
    }

    /// One chunk of at most `max_tokens` tokens; returns the logits `head` asks for.
    async fn run_chunk(
        &mut self,
        tokens: &[u32],
        head: Head,
        captures: &[(usize, usize)],
    ) -> Result<Vec<f32>> {
        let (c, a) = (&self.config, &self.acts);
        let dims = self.write_inputs(tokens, captures)?;
        let queue = self.ctx.queue();
        // Inside error scopes: a dispatch or copy the device refuses is an error of this call.
        self.ctx
            .scoped("running the forward pass", || -> Result<()> {
                let mut encoder = self.ctx.encoder("forward");
                {
                    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
                    encode::body(&mut pass, &self.plan, dims, head);
                }
                let slot_bytes = self.slots.slot_bytes;
                for (i, &(_, slot)) in captures.iter().enumerate() {
                    let (buffer, offset) = self.slots.locate(slot)?;
                    let from = a.capture_layout.area_offset(i);
                    encoder.copy_buffer_to_buffer(&a.capture, from, buffer, offset, slot_bytes);
                    // Its key/value rows: positions up to it, all written by now.
                    self.record_kv_save(&mut encoder, slot);
                }
                queue.submit([encoder.finish()]);
                Ok(())
            })
            .await??;
        match head {
            Head::None => return Ok(Vec::new()),
            Head::Last => return self.read_logits(c.vocab_size).await,
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
                block.dispatch(&mut pass, rows as u32);
            }
            queue.submit([encoder.finish()]);
            out.extend(self.read_logits(rows * c.vocab_size).await?);
        }
        Ok(out)
    }

    /// Reads back `len` logits, then checks that no GPU error came up meanwhile (natively
    /// errors are reported at once; in a browser, asynchronously — by the time a read returns).
    async fn read_logits(&self, len: usize) -> Result<Vec<f32>> {
        let logits = self.acts.readback.read_f32(&self.ctx, &self.acts.logits, 0, len).await;
        self.ctx.checked("running the forward pass", logits)
    }

    /// Resets the working state to all zeros (the state before any token).
    pub fn reset_state(&mut self) {
        // A lost device needs no reset: the next call reports it.
        let mut encoder = self.ctx.encoder("reset state");
        encoder.clear_buffer(&self.state.conv, 0, None);
        encoder.clear_buffer(&self.state.ssm, 0, None);
        self.ctx.queue().submit([encoder.finish()]);
        self.context = 0;
    }
}
