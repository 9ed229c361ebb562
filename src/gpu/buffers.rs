//! Counted creation of buffers and bind groups. Every size is checked against the device's
//! limits before WebGPU sees it, so an oversized tensor is a typed [`Error::LimitExceeded`]
//! rather than a device error.

use std::sync::atomic::Ordering;

use wgpu::util::DeviceExt;

use crate::error::{Error, Result};
use crate::gpu::context::GpuContext;

/// Usage of every storage buffer: bound to kernels, copied to/from (readback, checkpoints).
const STORAGE: wgpu::BufferUsages =
    wgpu::BufferUsages::STORAGE.union(wgpu::BufferUsages::COPY_SRC).union(wgpu::BufferUsages::COPY_DST);

impl GpuContext {
    /// Largest storage binding this device allows, in bytes.
    pub(crate) fn max_binding(&self) -> u64 {
        self.summary().max_storage_buffer_binding_size.min(self.summary().max_buffer_size)
    }

    /// Fails unless a storage binding of `bytes` fits this device.
    pub(crate) fn check_storage_binding(&self, bytes: u64) -> Result<()> {
        let limit = self.max_binding();
        if bytes > limit {
            return Err(Error::LimitExceeded {
                what: "storage buffer binding size (bytes)",
                requested: bytes,
                limit,
            });
        }
        Ok(())
    }

    /// Creates a buffer (counted).
    pub(crate) fn create_buffer(&self, label: &str, size: u64, usage: wgpu::BufferUsages) -> wgpu::Buffer {
        self.counters.buffers.fetch_add(1, Ordering::Relaxed);
        self.device().create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage,
            mapped_at_creation: false,
        })
    }

    /// Creates a buffer holding `contents` (counted).
    pub(crate) fn create_buffer_init(
        &self,
        label: &str,
        contents: &[u8],
        usage: wgpu::BufferUsages,
    ) -> wgpu::Buffer {
        self.counters.buffers.fetch_add(1, Ordering::Relaxed);
        self.device().create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some(label),
            contents,
            usage,
        })
    }

    /// A storage buffer holding `data`.
    pub fn storage_from_f32(&self, label: &str, data: &[f32]) -> Result<wgpu::Buffer> {
        self.check_storage_binding(std::mem::size_of_val(data) as u64)?;
        // WebGPU rejects zero-sized bindings: an empty tensor still gets one element.
        let data = if data.is_empty() { &[0.0][..] } else { data };
        Ok(self.create_buffer_init(label, bytemuck::cast_slice(data), STORAGE))
    }

    /// A zeroed storage buffer of `len` f32 (at least one element).
    pub fn storage_zeroed_f32(&self, label: &str, len: usize) -> Result<wgpu::Buffer> {
        let bytes = (len.max(1) * 4) as u64;
        self.check_storage_binding(bytes)?;
        Ok(self.create_buffer(label, bytes, STORAGE))
    }

    /// A zeroed storage buffer of `bytes` bytes (rounded up to 4, at least 4).
    pub(crate) fn storage_zeroed_bytes(&self, label: &str, bytes: u64) -> Result<wgpu::Buffer> {
        let bytes = bytes.max(1).div_ceil(4) * 4;
        self.check_storage_binding(bytes)?;
        Ok(self.create_buffer(label, bytes, STORAGE))
    }

    /// A uniform buffer holding `value` (rewritable in place with `queue().write_buffer`); also
    /// usable as read-only storage, as kernels bind it where the adapter wants that
    /// ([`crate::gpu::AdapterSummary::params_in_storage`]).
    pub(crate) fn uniform<T: bytemuck::Pod>(&self, label: &str, value: &T) -> wgpu::Buffer {
        self.create_buffer_init(
            label,
            bytemuck::bytes_of(value),
            wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        )
    }

    /// Creates a bind group (counted) with each `(binding index, buffer)` bound whole.
    pub(crate) fn create_bind_group(
        &self,
        label: &str,
        layout: &wgpu::BindGroupLayout,
        buffers: &[(u32, &wgpu::Buffer)],
    ) -> wgpu::BindGroup {
        self.counters.bind_groups.fetch_add(1, Ordering::Relaxed);
        let entries: Vec<_> = buffers
            .iter()
            .map(|&(binding, b)| wgpu::BindGroupEntry { binding, resource: b.as_entire_binding() })
            .collect();
        self.device().create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(label),
            layout,
            entries: &entries,
        })
    }
}
