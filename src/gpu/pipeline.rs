//! Compute-pipeline construction shared by every kernel: an explicit bind-group layout built
//! from a list of binding kinds, compiled inside an error scope so a bad shader or layout is a
//! typed [`crate::Error::Gpu`] instead of an uncaptured device error.

use crate::error::Result;
use crate::gpu::context::GpuContext;

/// How a kernel uses one binding (its index is its position in the list).
#[derive(Clone, Copy, Debug)]
pub enum Binding {
    /// `var<uniform>`: small parameter struct.
    Uniform,
    /// `var<storage, read>`: input tensor.
    Read,
    /// `var<storage, read_write>`: output tensor.
    ReadWrite,
}

impl Binding {
    fn entry(self, binding: u32) -> wgpu::BindGroupLayoutEntry {
        let ty = match self {
            Binding::Uniform => wgpu::BufferBindingType::Uniform,
            Binding::Read => wgpu::BufferBindingType::Storage { read_only: true },
            Binding::ReadWrite => wgpu::BufferBindingType::Storage { read_only: false },
        };
        wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty,
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        }
    }
}

/// A compiled kernel: its pipeline and the layout its bind groups must follow.
pub struct Kernel {
    /// Name of the kernel (= WGSL file stem = entry point), used in labels and errors.
    pub name: &'static str,
    /// Layout of bind group 0.
    pub layout: wgpu::BindGroupLayout,
    /// The compute pipeline.
    pub pipeline: wgpu::ComputePipeline,
}

impl Kernel {
    /// Compiles `source` (entry point `name`) with the given bindings and override constants.
    pub async fn new(
        ctx: &GpuContext,
        name: &'static str,
        source: &str,
        bindings: &[Binding],
        constants: &[(&str, f64)],
    ) -> Result<Self> {
        ctx.scoped(&format!("creating the {name} pipeline"), |device| {
            let entries: Vec<_> = bindings
                .iter()
                .enumerate()
                .map(|(i, b)| b.entry(i as u32))
                .collect();
            let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(name),
                entries: &entries,
            });
            let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(name),
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
            let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(name),
                source: wgpu::ShaderSource::Wgsl(source.into()),
            });
            let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(name),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some(name),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants,
                    ..Default::default()
                },
                cache: None,
            });
            Kernel {
                name,
                layout,
                pipeline,
            }
        })
        .await
    }

    /// A bind group with `buffers` bound, in order, to bindings 0, 1, 2, ...
    pub fn bind(&self, ctx: &GpuContext, buffers: &[&wgpu::Buffer]) -> wgpu::BindGroup {
        let entries: Vec<_> = buffers
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: b.as_entire_binding(),
            })
            .collect();
        ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(self.name),
            layout: &self.layout,
            entries: &entries,
        })
    }
}

/// Splits `n` workgroups over a 2-D grid whose dimensions stay within `max_per_dim`;
/// kernels recover the linear index as `wid.y * nwg.x + wid.x` and skip indices ≥ n.
pub fn grid_2d(n: u32, max_per_dim: u32) -> (u32, u32) {
    if n <= max_per_dim {
        (n, 1)
    } else {
        (max_per_dim, n.div_ceil(max_per_dim))
    }
}
