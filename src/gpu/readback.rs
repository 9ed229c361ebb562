//! Reading GPU buffers back to the CPU, the same way on both targets.
//!
//! WebGPU never lets the CPU read a STORAGE buffer directly: only a buffer created with
//! `MAP_READ | COPY_DST` can be mapped, so we copy into such a staging buffer, map it and
//! copy the bytes out. Mapping is asynchronous: in the browser the event loop completes it;
//! natively nothing happens until we poll the device, so we wait on it before awaiting.

use futures_channel::oneshot;

use crate::error::{Error, Result};
use crate::gpu::context::GpuContext;

/// A staging buffer created once and reused for every read (nothing is allocated on the GPU per
/// read). Reads are at most `capacity` bytes.
pub(crate) struct Readback {
    staging: wgpu::Buffer, // (capacity / 4) f32, MAP_READ | COPY_DST
    capacity: u64,
}

impl Readback {
    /// Creates the staging buffer (`capacity` bytes, rounded up to a multiple of 4).
    pub(crate) fn new(ctx: &GpuContext, capacity: u64, label: &str) -> Self {
        let capacity = capacity.div_ceil(wgpu::COPY_BUFFER_ALIGNMENT) * wgpu::COPY_BUFFER_ALIGNMENT;
        let staging =
            ctx.create_buffer(label, capacity, wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST);
        Self { staging, capacity }
    }

    /// Bytes it can read at once.
    pub(crate) fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Copies `len` f32 values starting at byte `offset` of `src` (which needs `COPY_SRC`) to
    /// the CPU. Everything submitted before this call finishes first.
    pub(crate) async fn read_f32(
        &self,
        ctx: &GpuContext,
        src: &wgpu::Buffer,
        offset: u64,
        len: usize,
    ) -> Result<Vec<f32>> {
        self.read(ctx, src, offset, len).await
    }

    /// Like [`Readback::read_f32`], for any 4-byte plain type (`u32` token ids).
    pub(crate) async fn read<T: bytemuck::Pod>(
        &self,
        ctx: &GpuContext,
        src: &wgpu::Buffer,
        offset: u64,
        len: usize,
    ) -> Result<Vec<T>> {
        const { assert!(std::mem::size_of::<T>() == 4) };
        let bytes = (len * 4) as u64;
        if bytes > self.capacity {
            return Err(Error::LimitExceeded {
                what: "readback size (bytes)",
                requested: bytes,
                limit: self.capacity,
            });
        }
        if !offset.is_multiple_of(4) || offset + bytes > src.size() {
            return Err(Error::Readback(format!(
                "range {offset}..{} is not 4-byte aligned or is outside a buffer of {} bytes",
                offset + bytes,
                src.size()
            )));
        }
        if bytes == 0 {
            return Ok(Vec::new());
        }
        let mut encoder = ctx.encoder("readback");
        encoder.copy_buffer_to_buffer(src, offset, &self.staging, 0, bytes);
        ctx.queue().submit([encoder.finish()]);

        let slice = self.staging.slice(..bytes);
        let (tx, rx) = oneshot::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            // The receiver only disappears if the awaiting future was dropped: nothing to do.
            let _ = tx.send(r);
        });
        #[cfg(not(target_arch = "wasm32"))]
        ctx.device().poll(wgpu::PollType::wait_indefinitely()).map_err(|e| Error::Readback(e.to_string()))?;
        rx.await
            .map_err(|_| Error::Readback("the map callback was dropped".into()))?
            .map_err(|e| Error::Readback(e.to_string()))?;
        let values = {
            let view = slice.get_mapped_range().map_err(|e| Error::Readback(e.to_string()))?;
            bytemuck::pod_collect_to_vec::<u8, T>(&view)
        };
        self.staging.unmap();
        Ok(values)
    }
}

impl GpuContext {
    /// One-shot read of `len` f32 from `src`: creates a staging buffer for this call only.
    /// Fine for tests and tools; hot loops keep a [`Readback`].
    pub async fn read_f32(&self, src: &wgpu::Buffer, offset: u64, len: usize) -> Result<Vec<f32>> {
        Readback::new(self, (len * 4) as u64, "readback (one-shot)").read_f32(self, src, offset, len).await
    }
}
