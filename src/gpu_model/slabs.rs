//! [`Slabs`]: fixed-size items (checkpoint slots, key/value pages) in copy-only slab buffers.
//! Items are only ever copied to and from (never bound to a kernel), so a slab is free of the
//! storage-binding size limit. Ids are handed out at once but a slab is created on the first
//! write into one of its items: a budget far beyond what the device holds (`budgetBytes:
//! Infinity`) costs nothing until the items are really kept, and a slab the device refuses is
//! a typed error then (and is tried again on the next write).

use std::ops::Range;

use crate::error::{Error, Result};
use crate::gpu::GpuContext;

/// Most items one slab holds: a slab is what is allocated at once, so it stays small (≤ 47 MB
/// for a 130M model's 2.95 MB states).
const SLAB_ITEMS: u64 = 16;

/// Items of `item_bytes` each, `per_slab` to a slab buffer.
pub(crate) struct Slabs {
    /// Slab buffers, created on first write into one of their items.
    slabs: Vec<Option<wgpu::Buffer>>,
    /// Items handed out so far.
    len: usize,
    per_slab: usize,
    pub(crate) item_bytes: u64,
    /// What an item is, for errors ("checkpoint slot", "key/value page").
    what: &'static str,
}

impl Slabs {
    /// No items yet; fails when one item would not fit a buffer of this device.
    pub(crate) fn new(ctx: &GpuContext, item_bytes: u64, what: &'static str) -> Result<Self> {
        let max = ctx.summary().max_buffer_size;
        if item_bytes > max {
            return Err(Error::LimitExceeded { what, requested: item_bytes, limit: max });
        }
        let per_slab = (max.min(256 << 20) / item_bytes.max(1)).clamp(1, SLAB_ITEMS) as usize;
        Ok(Self { slabs: Vec::new(), len: 0, per_slab, item_bytes, what })
    }

    /// Bytes of every slab created so far.
    pub(crate) fn bytes(&self) -> u64 {
        self.slabs.iter().flatten().map(wgpu::Buffer::size).sum()
    }

    /// Hands out `n` more ids (no memory yet).
    pub(crate) fn add(&mut self, n: usize) -> Range<usize> {
        let first = self.len;
        self.len += n;
        self.slabs.resize_with(self.len.div_ceil(self.per_slab), || None);
        first..self.len
    }

    /// Where item `id` lives, for reading: its slab must exist (something was written to it).
    pub(crate) fn locate(&self, id: usize) -> Result<(&wgpu::Buffer, u64)> {
        self.check(id)?;
        let slab = self.slabs[id / self.per_slab].as_ref().ok_or_else(|| {
            Error::InvalidInput(format!("{} {id} was read before anything was saved in it", self.what))
        })?;
        Ok((slab, (id % self.per_slab) as u64 * self.item_bytes))
    }

    /// Where item `id` lives, for writing: creates its slab if needed. A slab the device
    /// refuses is [`Error::OutOfMemory`] (natively at once; in a browser, where WebGPU reports
    /// it asynchronously, at the model's next check).
    pub(crate) fn locate_for_write(&mut self, ctx: &GpuContext, id: usize) -> Result<(&wgpu::Buffer, u64)> {
        self.check(id)?;
        let s = id / self.per_slab;
        if self.slabs[s].is_none() {
            let bytes = self.per_slab as u64 * self.item_bytes;
            ctx.check("before creating a checkpoint slab")?;
            let usage = wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
            let slab = ctx.create_buffer(self.what, bytes, usage);
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

    /// Fails unless `id` was handed out.
    pub(crate) fn check(&self, id: usize) -> Result<()> {
        if id >= self.len {
            return Err(Error::InvalidInput(format!("no {} {id} (there are {})", self.what, self.len)));
        }
        Ok(())
    }
}
