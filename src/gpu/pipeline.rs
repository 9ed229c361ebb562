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
    /// A forward-pass kernel's `N` bindings in the order they all follow: the `Step` and
    /// `Params` uniforms, `reads` read-only storage buffers, then read-write ones.
    pub const fn forward<const N: usize>(reads: usize) -> [Binding; N] {
        let mut out = [Binding::ReadWrite; N];
        let mut i = 0;
        while i < N {
            if i < 2 {
                out[i] = Binding::Uniform;
            } else if i < 2 + reads {
                out[i] = Binding::Read;
            }
            i += 1;
        }
        out
    }

    fn entry(self, binding: u32) -> wgpu::BindGroupLayoutEntry {
        let ty = match self {
            Binding::Uniform => wgpu::BufferBindingType::Uniform,
            Binding::Read => wgpu::BufferBindingType::Storage { read_only: true },
            Binding::ReadWrite => wgpu::BufferBindingType::Storage { read_only: false },
        };
        wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer { ty, has_dynamic_offset: false, min_binding_size: None },
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
    /// Compiles `source` (entry point `name`) with a new bind-group layout for `bindings`.
    pub async fn new(
        ctx: &GpuContext,
        name: &'static str,
        source: &str,
        bindings: &[Binding],
    ) -> Result<Self> {
        Self::with_layout(ctx, name, source, bind_group_layout(ctx, name, bindings)).await
    }

    /// Compiles `source` (entry point `name`) against an existing layout, so bind groups made
    /// for another kernel with that layout work with this one too (GEMM and GEMV share theirs).
    pub async fn with_layout(
        ctx: &GpuContext,
        name: &'static str,
        source: &str,
        layout: wgpu::BindGroupLayout,
    ) -> Result<Self> {
        Self::with_constants(ctx, name, source, layout, &[]).await
    }

    /// Like [`Kernel::with_layout`], with values for the shader's pipeline-overridable
    /// constants (`override W_FORMAT: u32` ...): one pipeline per variant, from one source.
    pub async fn with_constants(
        ctx: &GpuContext,
        name: &'static str,
        source: &str,
        layout: wgpu::BindGroupLayout,
        constants: &[(&str, f64)],
    ) -> Result<Self> {
        ctx.counters.pipelines.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let device = ctx.device();
        ctx.scoped(&format!("creating the {name} pipeline"), || {
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
                compilation_options: wgpu::PipelineCompilationOptions { constants, ..Default::default() },
                cache: None,
            });
            Kernel { name, layout, pipeline }
        })
        .await
    }

    /// A bind group with `buffers` bound, in order, to bindings 0, 1, 2, ...
    pub fn bind(&self, ctx: &GpuContext, buffers: &[&wgpu::Buffer]) -> wgpu::BindGroup {
        ctx.create_bind_group(self.name, &self.layout, buffers)
    }

    /// Submits one dispatch of this kernel in a pass of its own, inside error scopes
    /// (`context` names it in errors): the one-shot runs of tests and tools.
    pub async fn submit_once(
        &self,
        ctx: &GpuContext,
        bind_group: &wgpu::BindGroup,
        groups: (u32, u32, u32),
        context: &str,
    ) -> Result<()> {
        ctx.scoped(context, || {
            let mut encoder = ctx.encoder(self.name);
            {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
                self.dispatch(&mut pass, bind_group, groups);
            }
            ctx.queue().submit([encoder.finish()]);
        })
        .await
    }

    /// Records one dispatch of this kernel with `bind_group` over `groups` workgroups.
    pub fn dispatch(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        bind_group: &wgpu::BindGroup,
        groups: (u32, u32, u32),
    ) {
        dispatch(pass, &self.pipeline, bind_group, groups);
    }
}

/// A bind-group layout for `bindings`, numbered in order (for kernels that share one).
pub fn bind_group_layout(ctx: &GpuContext, name: &str, bindings: &[Binding]) -> wgpu::BindGroupLayout {
    let entries: Vec<_> = bindings.iter().enumerate().map(|(i, b)| b.entry(i as u32)).collect();
    ctx.device()
        .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some(name), entries: &entries })
}

/// Records one dispatch of `pipeline` with `bind_group` over `groups` workgroups.
pub fn dispatch(
    pass: &mut wgpu::ComputePass<'_>,
    pipeline: &wgpu::ComputePipeline,
    bind_group: &wgpu::BindGroup,
    groups: (u32, u32, u32),
) {
    pass.set_pipeline(pipeline);
    pass.set_bind_group(0, bind_group, &[]);
    pass.dispatch_workgroups(groups.0, groups.1, groups.2);
}

/// Splits `n` workgroups over a 2-D grid whose dimensions stay within `max_per_dim`;
/// kernels recover the linear index as `wid.y * nwg.x + wid.x` and skip indices ≥ n.
pub fn grid_2d(n: u32, max_per_dim: u32) -> (u32, u32) {
    if n <= max_per_dim { (n, 1) } else { (max_per_dim, n.div_ceil(max_per_dim)) }
}
