//! Buffer creation helpers that check the device's limits before asking WebGPU, so an
//! oversized tensor is a typed [`Error::LimitExceeded`] rather than a device error.

use wgpu::util::DeviceExt;

use crate::error::{Error, Result};
use crate::gpu::context::GpuContext;

impl GpuContext {
    /// Fails unless a storage binding of `bytes` fits this device.
    pub fn check_storage_binding(&self, bytes: u64) -> Result<()> {
        let limit = self
            .summary()
            .max_storage_buffer_binding_size
            .min(self.summary().max_buffer_size);
        if bytes > limit {
            return Err(Error::LimitExceeded {
                what: "storage buffer binding size (bytes)",
                requested: bytes,
                limit,
            });
        }
        Ok(())
    }

    /// A storage buffer holding `data` (also `COPY_SRC | COPY_DST`, so it can be read back and
    /// rewritten).
    pub fn storage_from_f32(&self, label: &str, data: &[f32]) -> Result<wgpu::Buffer> {
        self.check_storage_binding(std::mem::size_of_val(data) as u64)?;
        Ok(self
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: bytemuck::cast_slice(data),
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
            }))
    }

    /// A zeroed storage buffer of `len` f32 (also `COPY_SRC | COPY_DST`).
    pub fn storage_zeroed_f32(&self, label: &str, len: usize) -> Result<wgpu::Buffer> {
        let bytes = (len * 4) as u64;
        self.check_storage_binding(bytes)?;
        Ok(self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        }))
    }

    /// A uniform buffer holding `value` (also `COPY_DST`, so it can be rewritten in place).
    pub fn uniform<T: bytemuck::Pod>(&self, label: &str, value: &T) -> wgpu::Buffer {
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: bytemuck::bytes_of(value),
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            })
    }
}
