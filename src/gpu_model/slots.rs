//! Checkpoint slots on the GPU: fixed-size regions holding one whole recurrent state each, in
//! the [`crate::model::StateLayout`]'s flat order (every layer's conv window, then every layer's
//! SSM state: [`crate::State::to_flat`]'s). Slots are only ever copied to and from (never bound
//! to a kernel), so they live in large copy-only slab buffers, free of the storage-binding size
//! limit.
//!
//! Slots are handed out as ids at once but their slabs are created on first write: a cache
//! budget far beyond what the device holds (`budgetBytes: Infinity`) costs nothing until the
//! checkpoints are really kept, and a slab the device refuses is a typed error then.
//!
//! A model with attention also keeps, per slot, the key/value rows of the context the state
//! was taken after ([`SlotKv`]): a copy-only buffer holding, attention layer after attention
//! layer, its K rows (tokens, Hkv·hd) then its V rows — made or enlarged when a longer context
//! is saved into the slot.

use std::ops::Range;

use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::gpu_model::kv::KvCaches;

/// Most slots one slab holds: a slab is what is allocated at once, so it stays small (≤ 47 MB
/// for a 130M model's 2.95 MB states).
const SLAB_SLOTS: u64 = 16;

/// All slots of a model: slabs of `per_slab` slots of `slot_bytes` each.
pub(crate) struct Slots {
    /// Slab buffers, created on first write into one of their slots.
    slabs: Vec<Option<wgpu::Buffer>>,
    /// Slots handed out so far.
    len: usize,
    per_slab: usize,
    pub slot_bytes: u64,
    /// Per slot, the key/value rows saved with its state (models with attention).
    kv: Vec<Option<SlotKv>>,
    /// Hkv·hd of each attention layer, in block order.
    widths: Vec<usize>,
    /// Bytes of one key or value (as the live caches store them).
    value_bytes: usize,
}

/// One slot's key/value rows: `tokens` positions of every attention layer.
pub(crate) struct SlotKv {
    pub buffer: wgpu::Buffer,
    pub tokens: usize,
}

impl SlotKv {
    /// Byte offsets of attention layer `j`'s K rows and V rows for `widths` (Hkv·hd per
    /// attention layer) of `value_bytes` each.
    pub fn at(&self, (widths, value_bytes): (&[usize], usize), j: usize) -> (u64, u64) {
        let before: usize = widths[..j].iter().map(|w| 2 * w).sum();
        let k_at = (value_bytes * self.tokens * before) as u64;
        (k_at, k_at + (value_bytes * self.tokens * widths[j]) as u64)
    }
}

impl Slots {
    /// No slots yet; fails when one slot would not fit a buffer of this device.
    pub fn new(ctx: &GpuContext, slot_bytes: u64, kv: &KvCaches) -> Result<Self> {
        let max = ctx.summary().max_buffer_size;
        if slot_bytes > max {
            return Err(Error::LimitExceeded {
                what: "one state checkpoint (bytes)",
                requested: slot_bytes,
                limit: max,
            });
        }
        let per_slab = (max.min(256 << 20) / slot_bytes.max(1)).clamp(1, SLAB_SLOTS) as usize;
        let widths = kv.layers.iter().flatten().map(|l| l.width).collect();
        let value_bytes = kv.format.bytes();
        Ok(Self { slabs: Vec::new(), len: 0, per_slab, slot_bytes, kv: Vec::new(), widths, value_bytes })
    }

    /// Bytes of every slab created so far, and of the key/value rows saved.
    pub fn bytes(&self) -> u64 {
        let kv = self.kv.iter().flatten().map(|k| k.buffer.size());
        self.slabs.iter().flatten().map(wgpu::Buffer::size).chain(kv).sum()
    }

    /// Hkv·hd of each attention layer, in block order, and the bytes of one value.
    pub fn widths(&self) -> (&[usize], usize) {
        (&self.widths, self.value_bytes)
    }

    /// The key/value rows saved in slot `id` (none: no attention, or nothing saved yet).
    pub fn kv(&self, id: usize) -> Option<&SlotKv> {
        self.kv.get(id)?.as_ref()
    }

    /// Slot `id`'s key/value rows, made ready to take `tokens` positions (a buffer made or
    /// enlarged as needed); `None` for a model without attention.
    pub fn kv_for_write(&mut self, ctx: &GpuContext, id: usize, tokens: usize) -> Result<Option<&SlotKv>> {
        self.check(id)?;
        if self.widths.is_empty() {
            return Ok(None);
        }
        let bytes =
            (self.value_bytes * tokens * self.widths.iter().map(|w| 2 * w).sum::<usize>()).max(4) as u64;
        if self.kv.len() < self.len {
            self.kv.resize_with(self.len, || None);
        }
        let slot = &mut self.kv[id];
        match slot {
            Some(k) if k.buffer.size() >= bytes => k.tokens = tokens,
            _ => {
                ctx.check("before saving key/value rows")?;
                let usage = wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
                let buffer = ctx.create_buffer("checkpoint key/value rows", bytes, usage);
                if let Err(e) = ctx.check("creating a checkpoint's key/value rows") {
                    return Err(match e {
                        Error::OutOfMemory { what, limit, .. } => {
                            Error::OutOfMemory { what, needed: bytes, limit }
                        }
                        other => other,
                    });
                }
                *slot = Some(SlotKv { buffer, tokens });
            }
        }
        Ok(self.kv[id].as_ref())
    }

    /// Hands out `n` more slot ids (no memory yet).
    pub fn add(&mut self, n: usize) -> Range<usize> {
        let first = self.len;
        self.len += n;
        self.slabs.resize_with(self.len.div_ceil(self.per_slab), || None);
        first..self.len
    }

    /// Where slot `id` lives, for reading: its slab must exist (something was written to it).
    pub fn locate(&self, id: usize) -> Result<(&wgpu::Buffer, u64)> {
        self.check(id)?;
        let slab = self.slabs[id / self.per_slab].as_ref().ok_or_else(|| {
            Error::InvalidInput(format!("checkpoint slot {id} was read before anything was saved in it"))
        })?;
        Ok((slab, (id % self.per_slab) as u64 * self.slot_bytes))
    }

    /// Where slot `id` lives, for writing: creates its slab if needed. A slab the device
    /// refuses is [`Error::OutOfMemory`] (natively at once; in a browser, where WebGPU reports
    /// it asynchronously, at the model's next check) and is tried again on the next write.
    pub fn locate_for_write(&mut self, ctx: &GpuContext, id: usize) -> Result<(&wgpu::Buffer, u64)> {
        self.check(id)?;
        let s = id / self.per_slab;
        if self.slabs[s].is_none() {
            let bytes = self.per_slab as u64 * self.slot_bytes;
            ctx.check("before creating a checkpoint slab")?;
            let usage = wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
            let slab = ctx.create_buffer("checkpoint slots", bytes, usage);
            if let Err(e) = ctx.check("creating a checkpoint slab") {
                return Err(match e {
                    Error::OutOfMemory { what, limit, .. } => {
                        Error::OutOfMemory { what, needed: bytes, limit }
                    }
                    other => other,
                });
            }
            self.slabs[s] = Some(slab);
        }
        self.locate(id)
    }

    fn check(&self, id: usize) -> Result<()> {
        if id >= self.len {
            return Err(Error::InvalidInput(format!("no checkpoint slot {id} (there are {})", self.len)));
        }
        Ok(())
    }
}
