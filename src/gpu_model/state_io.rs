//! The working state to and from the host and the checkpoint slots, key/value rows included:
//! a state's fixed part (conv windows, SSM states) in the slot layout, and for a model with
//! attention the first `context` rows of every layer's cache. On the host a layer's cache is
//! one region holding per token its keys then its values ([`crate::State`]); on the GPU, a K
//! region and a V region (`kv.rs`), so reads interleave and writes split.

use crate::error::{Error, Result};
use crate::gpu_model::GpuModel;
use crate::gpu_model::plan::Plan;
use crate::model::State;

/// Per token k (width) then v (width): the host's layout of a cache region.
fn interleave(k: &[f32], v: &[f32], width: usize) -> Vec<f32> {
    k.chunks_exact(width).zip(v.chunks_exact(width)).flat_map(|(k, v)| k.iter().chain(v)).copied().collect()
}

/// The inverse of [`interleave`]: (keys, values).
fn split(region: &[f32], width: usize) -> (Vec<f32>, Vec<f32>) {
    let (mut k, mut v) = (Vec::with_capacity(region.len() / 2), Vec::with_capacity(region.len() / 2));
    for row in region.chunks_exact(2 * width) {
        k.extend_from_slice(&row[..width]);
        v.extend_from_slice(&row[width..]);
    }
    (k, v)
}

impl GpuModel {
    /// Makes the key/value caches hold `needed` positions: [`Error::ContextFull`] past
    /// `max_context`; else grown (new buffers, the live rows copied, the plan rebuilt) when
    /// they hold fewer.
    pub(crate) fn reserve(&mut self, needed: usize) -> Result<()> {
        self.kv.check_room(needed)?;
        let Some(capacity) = self.kv.growth(needed) else { return Ok(()) };
        self.ctx.check("before growing the key/value caches")?;
        let mut encoder = self.ctx.encoder("grow key/value caches");
        let kv = self.kv.grown(&self.ctx, &self.config, capacity, self.context, &mut encoder)?;
        self.ctx.queue().submit([encoder.finish()]);
        let plan =
            Plan::new(&self.ctx, &self.config, &self.kernels, &self.weights, &self.acts, (&self.state, &kv))?;
        self.ctx.check("growing the key/value caches")?;
        (self.kv, self.plan) = (kv, plan);
        self.prepared = None; // recorded with the old plan's bind groups
        Ok(())
    }

    /// Makes the checkpoint capture area hold `needed` checkpoints per forward chunk where it
    /// holds fewer — as many as fit, at most 64 and within one binding: a new
    /// buffer, the plan built again. A device that refuses the buffer (out of memory) keeps the
    /// smaller area: the forward call then splits its chunks at that room, as before.
    pub(crate) fn reserve_captures(&mut self, needed: usize) -> Result<()> {
        let layout = &self.acts.capture_layout;
        let target = needed.min(layout.captures_within(self.ctx.max_binding()));
        if target <= layout.captures {
            return Ok(());
        }
        self.ctx.check("before growing the checkpoint capture area")?;
        let layout = layout.with_captures(target);
        let buffer = self.ctx.storage_zeroed_f32("checkpoint capture", layout.floats())?;
        let old = (
            std::mem::replace(&mut self.acts.capture, buffer),
            std::mem::replace(&mut self.acts.capture_layout, layout),
        );
        let (state, kv) = (&self.state, &self.kv);
        let grown = Plan::new(&self.ctx, &self.config, &self.kernels, &self.weights, &self.acts, (state, kv))
            .and_then(|plan| self.ctx.check("growing the checkpoint capture area").map(|()| plan));
        match grown {
            Ok(plan) => {
                self.plan = plan;
                self.prepared = None; // recorded with the old plan's bind groups
                self.memory.activations = self.acts.bytes();
                Ok(())
            }
            Err(e) => {
                (self.acts.capture, self.acts.capture_layout) = old;
                match e {
                    Error::OutOfMemory { .. } => Ok(()),
                    e => Err(e),
                }
            }
        }
    }

    /// Records copying the live caches' rows that slot `slot` keeps (made ready by
    /// `Slots::kv_for_write`) into it.
    pub(crate) fn record_kv_save(&self, encoder: &mut wgpu::CommandEncoder, slot: usize) {
        let Some(saved) = self.slots.kv(slot) else { return };
        let widths = self.slots.widths();
        for (j, layer) in self.kv.layers.iter().flatten().enumerate() {
            let (k_at, v_at) = saved.at(widths, j);
            layer.record_rows(encoder, self.kv.capacity, saved.rows(), (&saved.buffer, k_at, v_at));
        }
    }

    /// Copies the working state to the CPU.
    pub async fn read_state(&self) -> Result<State> {
        let c = &self.config;
        self.ctx.check("before reading the state")?;
        let conv_len = (self.state.conv_bytes / 4) as usize;
        let conv = self.ctx.read_f32(&self.state.conv, 0, conv_len).await;
        let mut flat = self.ctx.checked("reading the state", conv)?;
        if self.state.ssm_bytes > 0 {
            let ssm = self.ctx.read_f32(&self.state.ssm, 0, State::floats(c) - conv_len).await;
            flat.extend(self.ctx.checked("reading the state", ssm)?);
        }
        for layer in self.kv.layers.iter().flatten() {
            let rows = self.context * layer.width;
            let k = self.read_rows(&layer.kv, 0, rows).await?;
            let v = self.read_rows(&layer.kv, layer.kv_rows_at(self.kv.capacity), rows).await?;
            flat.extend(interleave(&k, &v, layer.width));
        }
        State::from_flat(c, &flat)
    }

    /// `values` keys or values from byte `offset` of `buffer`, in the caches' format, as f32.
    async fn read_rows(&self, buffer: &wgpu::Buffer, offset: u64, values: usize) -> Result<Vec<f32>> {
        if values == 0 {
            return Ok(Vec::new());
        }
        let words = (values * self.kv.format.bytes()).div_ceil(4);
        let rows = self.ctx.read_f32(buffer, offset, words).await;
        Ok(self.kv.format.decode(&self.ctx.checked("reading key/value rows", rows)?, values))
    }

    /// Replaces the working state with `state` (which must fit this model; its context, at
    /// most `max_context`).
    pub fn write_state(&mut self, state: &State) -> Result<()> {
        state.check_fits(&self.config)?;
        let tokens = state.context().unwrap_or(0);
        self.reserve(tokens)?;
        self.ctx.check("before writing the state")?;
        let flat = state.to_flat();
        // The fixed part (conv windows, then SSM states); the caches come from the regions.
        let (conv, ssm) = flat[..State::floats(&self.config)].split_at((self.state.conv_bytes / 4) as usize);
        let queue = self.ctx.queue();
        if !conv.is_empty() {
            queue.write_buffer(&self.state.conv, 0, bytemuck::cast_slice(conv));
        }
        if !ssm.is_empty() {
            queue.write_buffer(&self.state.ssm, 0, bytemuck::cast_slice(ssm));
        }
        for (i, layer) in self.kv.layers.iter().enumerate() {
            let (Some(layer), Some(region)) = (layer, state.region(i, "kv")) else { continue };
            let (k, v) = split(region, layer.width);
            if !k.is_empty() {
                queue.write_buffer(&layer.kv, 0, &self.kv.format.encode(&k));
                queue.write_buffer(&layer.kv, layer.kv_rows_at(self.kv.capacity), &self.kv.format.encode(&v));
            }
        }
        self.context = tokens;
        Ok(())
    }

    /// Adds `n` checkpoint slots, each holding one whole state; returns their ids.
    pub fn add_slots(&mut self, n: usize) -> Result<std::ops::Range<usize>> {
        Ok(self.slots.add(n))
    }

    /// Copies the whole working state, every key/value row included, into slot `slot` (on the
    /// GPU: no CPU round trip).
    pub(crate) fn save_state(&mut self, slot: usize) -> Result<()> {
        self.save_rows(slot, 0)
    }

    /// Copies the working state into checkpoint slot `slot`: in pages mode only the key/value
    /// rows after its whole pages (which [`GpuModel::save_pages`] keeps), else all of them.
    pub(crate) fn save_checkpoint(&mut self, slot: usize) -> Result<()> {
        self.save_rows(slot, self.tail_start(self.context))
    }

    fn save_rows(&mut self, slot: usize, from: usize) -> Result<()> {
        self.ctx.check("before saving a state")?;
        self.slots.kv_for_write(&self.ctx, slot, from..self.context)?;
        let (buffer, offset) = self.slots.locate_for_write(&self.ctx, slot)?;
        let mut encoder = self.ctx.encoder("save state");
        self.state.record_copy(&mut encoder, buffer, offset, true);
        self.record_kv_save(&mut encoder, slot);
        self.ctx.queue().submit([encoder.finish()]);
        Ok(())
    }

    /// Replaces the working state with slot `slot`'s, saved whole ([`GpuModel::save_state`]).
    pub fn load_state(&mut self, slot: usize) -> Result<()> {
        self.load_checkpoint(slot, &[])
    }

    /// The fixed regions of checkpoint slot `slot` (its key/value rows apart), in
    /// [`State::to_flat`]'s order.
    pub async fn read_slot_fixed(&self, slot: usize) -> Result<Vec<f32>> {
        self.ctx.check("before reading a checkpoint")?;
        let (buffer, offset) = self.slots.locate(slot)?;
        let flat = self.ctx.read_f32(buffer, offset, State::floats(&self.config)).await;
        self.ctx.checked("reading a checkpoint", flat)
    }

    /// A CPU copy of slot `slot`.
    pub async fn read_slot(&self, slot: usize) -> Result<State> {
        self.ctx.check("before reading a checkpoint")?;
        let (buffer, offset) = self.slots.locate(slot)?;
        let flat = self.ctx.read_f32(buffer, offset, State::floats(&self.config)).await;
        let mut flat = self.ctx.checked("reading a checkpoint", flat)?;
        if let Some(saved) = self.slots.kv(slot) {
            if saved.from > 0 {
                return Err(Error::InvalidInput(format!("checkpoint slot {slot} is read with its pages")));
            }
            let widths = self.slots.widths();
            for (j, &width) in widths.0.iter().enumerate() {
                let (k_at, v_at) = saved.at(widths, j);
                let k = self.read_rows(&saved.buffer, k_at, saved.tokens * width).await?;
                let v = self.read_rows(&saved.buffer, v_at, saved.tokens * width).await?;
                flat.extend(interleave(&k, &v, width));
            }
        }
        State::from_flat(&self.config, &flat)
    }
}
