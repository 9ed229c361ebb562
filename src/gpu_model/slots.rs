//! Checkpoint slots on the GPU: fixed-size regions holding one whole recurrent state each, in
//! the [`crate::model::StateLayout`]'s flat order (every layer's conv window, then every layer's
//! SSM state: [`crate::State::to_flat`]'s), in copy-only slabs ([`Slabs`]).
//!
//! A model with attention also keeps, per slot, key/value rows of the context the state was
//! taken after ([`SlotKv`]): positions `from..from + tokens` — all of them (`from` 0), or in
//! pages mode only those after its whole pages (`kv_pages.rs`) — in a copy-only buffer holding,
//! attention layer after attention layer, its K rows (tokens, Hkv·hd) then its V rows; made or
//! enlarged when more rows are saved into the slot.

use std::ops::Range;

use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::gpu_kit::kv::KvCaches;
use crate::gpu_model::slabs::Slabs;

/// All slots of a model.
pub(crate) struct Slots {
    slabs: Slabs,
    pub(crate) slot_bytes: u64,
    /// Per slot, the key/value rows saved with its state (models with attention).
    kv: Vec<Option<SlotKv>>,
    /// Hkv·hd of each attention layer, in block order.
    widths: Vec<usize>,
    /// Bytes of one key or value (as the live caches store them).
    value_bytes: usize,
}

/// One slot's key/value rows: positions `from..from + tokens` of every attention layer.
pub(crate) struct SlotKv {
    pub(crate) buffer: wgpu::Buffer,
    pub(crate) from: usize,
    pub(crate) tokens: usize,
}

impl SlotKv {
    /// Byte offsets of attention layer `j`'s K rows and V rows for `widths` (Hkv·hd per
    /// attention layer) of `value_bytes` each.
    pub(crate) fn at(&self, widths: (&[usize], usize), j: usize) -> (u64, u64) {
        kv_offsets(widths, self.tokens, j)
    }

    /// The positions it holds.
    pub(crate) fn rows(&self) -> Range<usize> {
        self.from..self.from + self.tokens
    }
}

/// Byte offsets of attention layer `j`'s K rows and V rows in a copy of `tokens` positions of
/// every attention layer, layer after layer, K rows then V rows (a slot's rows, a page), for
/// `widths` (Hkv·hd per attention layer) of `value_bytes` each.
pub(crate) fn kv_offsets((widths, value_bytes): (&[usize], usize), tokens: usize, j: usize) -> (u64, u64) {
    let before: usize = widths[..j].iter().map(|w| 2 * w).sum();
    let k_at = (value_bytes * tokens * before) as u64;
    (k_at, k_at + (value_bytes * tokens * widths[j]) as u64)
}

impl Slots {
    /// No slots yet; fails when one slot would not fit a buffer of this device.
    pub(crate) fn new(ctx: &GpuContext, slot_bytes: u64, kv: &KvCaches) -> Result<Self> {
        let slabs = Slabs::new(ctx, slot_bytes, "checkpoint slot")?;
        let widths = kv.layers.iter().flatten().map(|l| l.width).collect();
        let value_bytes = kv.format.bytes();
        Ok(Self { slabs, slot_bytes, kv: Vec::new(), widths, value_bytes })
    }

    /// Bytes of every slab created so far, and of the key/value rows saved.
    pub(crate) fn bytes(&self) -> u64 {
        self.slabs.bytes() + self.kv.iter().flatten().map(|k| k.buffer.size()).sum::<u64>()
    }

    /// Hkv·hd of each attention layer, in block order, and the bytes of one value.
    pub(crate) fn widths(&self) -> (&[usize], usize) {
        (&self.widths, self.value_bytes)
    }

    /// The key/value rows saved in slot `id` (none: no attention, or nothing saved yet).
    pub(crate) fn kv(&self, id: usize) -> Option<&SlotKv> {
        self.kv.get(id)?.as_ref()
    }

    /// Slot `id`'s key/value rows, made ready to take positions `rows` (a buffer made or
    /// enlarged as needed); `None` for a model without attention.
    pub(crate) fn kv_for_write(
        &mut self,
        ctx: &GpuContext,
        id: usize,
        rows: Range<usize>,
    ) -> Result<Option<&SlotKv>> {
        self.slabs.check(id)?;
        if self.widths.is_empty() {
            return Ok(None);
        }
        let tokens = rows.len();
        let bytes =
            (self.value_bytes * tokens * self.widths.iter().map(|w| 2 * w).sum::<usize>()).max(4) as u64;
        if self.kv.len() <= id {
            self.kv.resize_with(id + 1, || None);
        }
        let slot = &mut self.kv[id];
        match slot {
            Some(k) if k.buffer.size() >= bytes => (k.from, k.tokens) = (rows.start, tokens),
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
                *slot = Some(SlotKv { buffer, from: rows.start, tokens });
            }
        }
        Ok(self.kv[id].as_ref())
    }

    /// Hands out `n` more slot ids (no memory yet).
    pub(crate) fn add(&mut self, n: usize) -> Range<usize> {
        self.slabs.add(n)
    }

    /// Where slot `id` lives, for reading: its slab must exist (something was written to it).
    pub(crate) fn locate(&self, id: usize) -> Result<(&wgpu::Buffer, u64)> {
        self.slabs.locate(id)
    }

    /// Where slot `id` lives, for writing: creates its slab if needed ([`Slabs::locate_for_write`]).
    pub(crate) fn locate_for_write(&mut self, ctx: &GpuContext, id: usize) -> Result<(&wgpu::Buffer, u64)> {
        self.slabs.locate_for_write(ctx, id)
    }
}
