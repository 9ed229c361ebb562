//! Checkpoint slots on the GPU: fixed-size regions holding one whole recurrent state each
//! (every layer's conv window, then every layer's SSM state — [`crate::State::to_flat`]'s
//! layout). Slots are only ever copied to and from (never bound to a kernel), so they live in
//! large copy-only slab buffers, free of the storage-binding size limit.

use std::ops::Range;

use crate::error::{Error, Result};
use crate::gpu::GpuContext;

/// All slots of a model: slabs of `per_buffer` slots of `slot_bytes` each.
pub(crate) struct Slots {
    buffers: Vec<wgpu::Buffer>,
    /// Slot id → (buffer, byte offset).
    table: Vec<(usize, u64)>,
    pub slot_bytes: u64,
}

impl Slots {
    pub fn new(slot_bytes: u64) -> Self {
        Self { buffers: Vec::new(), table: Vec::new(), slot_bytes }
    }

    /// Bytes of every slot buffer.
    pub fn bytes(&self) -> u64 {
        self.buffers.iter().map(wgpu::Buffer::size).sum()
    }

    /// Adds `n` slots (new slab buffers) and returns their ids.
    pub fn add(&mut self, ctx: &GpuContext, n: usize) -> Result<Range<usize>> {
        let first = self.table.len();
        let max = ctx.summary().max_buffer_size.min(256 << 20);
        let per_buffer = ((max / self.slot_bytes) as usize).max(1);
        if self.slot_bytes > ctx.summary().max_buffer_size {
            return Err(Error::LimitExceeded {
                what: "one state checkpoint (bytes)",
                requested: self.slot_bytes,
                limit: ctx.summary().max_buffer_size,
            });
        }
        let mut left = n;
        while left > 0 {
            let k = left.min(per_buffer);
            let usage = wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
            let buffer = ctx.create_buffer("checkpoint slots", k as u64 * self.slot_bytes, usage);
            let b = self.buffers.len();
            self.table.extend((0..k).map(|i| (b, i as u64 * self.slot_bytes)));
            self.buffers.push(buffer);
            left -= k;
        }
        Ok(first..self.table.len())
    }

    /// Where slot `id` lives.
    pub fn locate(&self, id: usize) -> Result<(&wgpu::Buffer, u64)> {
        let &(b, offset) = self.table.get(id).ok_or_else(|| {
            Error::InvalidInput(format!("no checkpoint slot {id} (there are {})", self.table.len()))
        })?;
        Ok((&self.buffers[b], offset))
    }
}
