//! Greedy decoding on the GPU: several decode steps per submit, each step's token the argmax of
//! the logits before it, picked (`shaders/argmax.wgsl`) and fed (ids[0]) on the GPU, so a step
//! reads back one u32 instead of V floats and waits for nothing. The state before a batch is
//! kept, so a caller that stops inside the batch can rewind and replay the tokens it kept.
//!
//! The next batch is recorded while this one runs: after a batch is submitted, the command
//! buffer of a batch of as many steps from the position after it is recorded (the CPU's part
//! of a batch: ~100 dispatches per step, each a call into WebGPU in the browser) before the
//! picks are read back, and the next `greedy` call of that shape submits it at once. What a
//! batch records depends only on the plan, the step count and the position (the token goes in
//! through `ids`, written at the call), so the prepared buffer is exactly what that call would
//! record; a call of another shape, or a plan rebuilt meanwhile (the key/value caches grew),
//! drops it and records its own.

use crate::error::{Error, Result};
use crate::gpu_kit::call::Dims;
use crate::gpu_model::GpuModel;
use crate::gpu_model::encode::{self, Head};
use crate::kernels::{Step, argmax};

/// Most greedy steps one submit runs (the picks list's room).
pub(crate) const MAX_GREEDY_STEPS: usize = 64;

/// A greedy batch recorded ahead, for the next call of its shape.
pub(super) struct Prepared {
    steps: usize,
    dims: Dims,
    commands: wgpu::CommandBuffer,
}

impl GpuModel {
    /// Feeds `first`, then `steps − 1` more tokens, each the argmax (the first on ties) of the
    /// logits after the token before it — in one submit — and returns the picks: `picks[i]` is
    /// the argmax of the logits after fed token `i` (`first` is fed token 0, `picks[i]` fed
    /// token `i + 1`), so the last pick is the next token to feed. Fewer than `steps` picks
    /// come back when the logits after fed token `picks.len()` held a NaN or ±Inf (the steps
    /// after it ran on garbage: rewind). The state from before the batch is kept for
    /// [`GpuModel::rewind`]; the last logits stay on the GPU ([`GpuModel::last_logits`]).
    pub async fn greedy(&mut self, first: u32, steps: usize) -> Result<Vec<u32>> {
        if steps == 0 || steps > self.acts.max_picks {
            return Err(Error::InvalidInput(format!(
                "a greedy batch runs 1 to {} steps, not {steps}",
                self.acts.max_picks
            )));
        }
        let dims = self.begin_decode_step(first, steps, "before greedy decode steps")?;
        let (a, queue) = (&self.acts, self.ctx.queue());
        queue.write_buffer(&a.picks, 0, bytemuck::bytes_of(&0u32));
        // With attention each step is at the next position: its `Step` is copied into the
        // uniform before its pass (a list written here, one copy per step).
        let attends = self.kv.any();
        if attends {
            let list: Vec<Step> = (0..steps as u32)
                .map(|i| Step { t_len: 1, n_chunks: 1, past: dims.past + i, _pad: 0 })
                .collect();
            queue.write_buffer(&a.step_list, 0, bytemuck::cast_slice(&list));
        }
        let prepared = self.prepared.take().filter(|p| p.steps == steps && p.dims == dims);
        self.prepared_used += u64::from(prepared.is_some());
        let next = Dims { past: dims.past + steps as u32, ..dims };
        let prepared = self
            .ctx
            .scoped("running greedy decode steps", || {
                let commands = prepared.map_or_else(|| self.record_greedy(dims, steps), |p| p.commands);
                queue.submit([commands]);
                // The next batch's commands, recorded while this one runs.
                Prepared { steps, dims: next, commands: self.record_greedy(next, steps) }
            })
            .await?;
        self.prepared = Some(prepared);
        self.rewind_context = self.context;
        self.context += steps;
        let raw = a.picks_readback.read::<u32>(&self.ctx, &a.picks, 0, 1 + steps).await;
        let raw = self.ctx.checked("running greedy decode steps", raw)?;
        if raw[0] as usize != steps {
            return Err(Error::Gpu {
                context: "running greedy decode steps".into(),
                message: format!("{} picks were written for {steps} steps", raw[0]),
            });
        }
        Ok(raw[1..].iter().copied().take_while(|&p| p != argmax::NON_FINITE_PICK).collect())
    }

    /// Records a batch of `steps` greedy steps from the position of `dims` (one token each), the
    /// state first copied into `rewind`. With attention each step's `Step` is copied from the
    /// list `greedy` writes before it.
    fn record_greedy(&self, dims: Dims, steps: usize) -> wgpu::CommandBuffer {
        let a = &self.acts;
        let mut encoder = self.ctx.encoder("greedy steps");
        self.state.record_copy(&mut encoder, &self.state.rewind, 0, true);
        if self.kv.any() {
            for i in 0..steps as u32 {
                let size = std::mem::size_of::<Step>() as u64;
                encoder.copy_buffer_to_buffer(&a.step_list, u64::from(i) * size, &a.step, 0, size);
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
                let dims = Dims { past: dims.past + i, ..dims };
                encode::body(&mut pass, &self.plan, dims, Head::Last);
                self.plan.argmax.iter().for_each(|call| call.dispatch(&mut pass, dims));
            }
        } else {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            for _ in 0..steps {
                encode::body(&mut pass, &self.plan, dims, Head::Last);
                self.plan.argmax.iter().for_each(|call| call.dispatch(&mut pass, dims));
            }
        }
        encoder.finish()
    }

    /// Records the commands of the batch that would follow the last [`GpuModel::greedy`] call
    /// (its step count, from the position after it) and drops them unsubmitted; returns the
    /// dispatches recorded, `None` before any batch. The CPU's part of a batch alone, for
    /// benchmarks to time (`bench --suite`'s `record_us_per_dispatch`).
    pub(crate) fn record_next_greedy_unsubmitted(&self) -> Option<u64> {
        let p = self.prepared.as_ref()?;
        let before = crate::gpu::dispatches_recorded();
        drop(self.record_greedy(p.dims, p.steps));
        Some(crate::gpu::dispatches_recorded() - before)
    }

    /// Greedy batches submitted from a buffer recorded while the batch before them ran (see
    /// the module's notes), since load.
    pub fn prepared_batches_used(&self) -> u64 {
        self.prepared_used
    }

    /// Checks `token`, the device and the room for `steps` more positions (the key/value
    /// caches grown if needed), and writes a one-token decode step's inputs (no checkpoint
    /// after it); returns the step's dispatch sizes.
    pub(super) fn begin_decode_step(&mut self, token: u32, steps: usize, context: &str) -> Result<Dims> {
        self.config.check_forward(&[token], [])?;
        self.ctx.check(context)?;
        self.reserve(self.context + steps)?;
        self.write_inputs(&[token], &[])
    }

    /// Most steps one [`GpuModel::greedy`] batch runs.
    pub(crate) fn max_greedy_steps(&self) -> usize {
        self.acts.max_picks
    }

    /// Puts back the working state from before the last [`GpuModel::greedy`] batch.
    pub fn rewind(&mut self) -> Result<()> {
        self.ctx.check("before rewinding a greedy batch")?;
        let mut encoder = self.ctx.encoder("rewind");
        self.state.record_copy(&mut encoder, &self.state.rewind, 0, false);
        self.ctx.queue().submit([encoder.finish()]);
        self.context = self.rewind_context;
        Ok(())
    }

    /// The logits (V) after the last token fed, read back.
    pub async fn last_logits(&self) -> Result<Vec<f32>> {
        self.read_logits(self.config.vocab_size).await
    }
}
