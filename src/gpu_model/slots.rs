//! Checkpoint slots on the GPU: fixed-size regions holding one whole recurrent state each, in
//! the [`crate::model::StateLayout`]'s flat order (every layer's conv window, then every layer's
//! SSM state: [`crate::State::to_flat`]'s). Slots are only ever copied to and from (never bound
//! to a kernel), so they live in large copy-only slab buffers, free of the storage-binding size
//! limit.
//!
//! Slots are handed out as ids at once but their slabs are created on first write: a cache
//! budget far beyond what the device holds (`budgetBytes: Infinity`) costs nothing until the
//! checkpoints are really kept, and a slab the device refuses is a typed error then.

use std::ops::Range;

use crate::error::{Error, Result};
use crate::gpu::GpuContext;

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
}

impl Slots {
    /// No slots yet; fails when one slot would not fit a buffer of this device.
    pub fn new(ctx: &GpuContext, slot_bytes: u64) -> Result<Self> {
        let max = ctx.summary().max_buffer_size;
        if slot_bytes > max {
            return Err(Error::LimitExceeded {
                what: "one state checkpoint (bytes)",
                requested: slot_bytes,
                limit: max,
            });
        }
        let per_slab = (max.min(256 << 20) / slot_bytes.max(1)).clamp(1, SLAB_SLOTS) as usize;
        Ok(Self { slabs: Vec::new(), len: 0, per_slab, slot_bytes })
    }

    /// Bytes of every slab created so far.
    pub fn bytes(&self) -> u64 {
        self.slabs.iter().flatten().map(wgpu::Buffer::size).sum()
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
