//! Compute-pipeline construction shared by every kernel: an explicit bind-group layout built
//! from the kernel's declared bindings, compiled inside an error scope so a bad shader or layout
//! is a typed [`crate::Error::Gpu`] instead of an uncaptured device error. Bind groups are made
//! by naming each buffer after the WGSL global it binds ([`resolve`]), never by position.

use crate::error::{Error, Result};
use crate::gpu::cache::{LayoutKey, PipelineKey};
use crate::gpu::context::GpuContext;
use crate::gpu::profile;

/// How a kernel uses one binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// `var<uniform>`: small parameter struct.
    Uniform,
    /// `var<storage, read>`: input tensor.
    Read,
    /// `var<storage, read_write>`: output tensor (or one updated in place).
    ReadWrite,
}

/// One binding of a kernel's bind group 0, as its WGSL declares it:
/// `@group(0) @binding(index) var<access> name`. `tests/kernel_contract.rs` checks every
/// kernel's list against its shader both ways.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Binding {
    /// The WGSL global's name: call sites bind a buffer by it.
    pub name: &'static str,
    /// `@binding(index)`.
    pub index: u32,
    /// How the kernel uses it.
    pub access: Access,
}

impl Binding {
    /// `@binding(index) var<uniform> name`.
    pub(crate) const fn uniform(index: u32, name: &'static str) -> Self {
        Self { name, index, access: Access::Uniform }
    }

    /// `@binding(index) var<storage, read> name`.
    pub const fn read(index: u32, name: &'static str) -> Self {
        Self { name, index, access: Access::Read }
    }

    /// `@binding(index) var<storage, read_write> name`.
    pub const fn read_write(index: u32, name: &'static str) -> Self {
        Self { name, index, access: Access::ReadWrite }
    }

    /// Its layout entry; `params_in_storage`: a `var<uniform>` is bound as read-only storage
    /// ([`crate::gpu::AdapterSummary::params_in_storage`]).
    fn entry(self, params_in_storage: bool) -> wgpu::BindGroupLayoutEntry {
        let ty = match self.access {
            Access::Uniform if params_in_storage => wgpu::BufferBindingType::Storage { read_only: true },
            Access::Uniform => wgpu::BufferBindingType::Uniform,
            Access::Read => wgpu::BufferBindingType::Storage { read_only: true },
            Access::ReadWrite => wgpu::BufferBindingType::Storage { read_only: false },
        };
        wgpu::BindGroupLayoutEntry {
            binding: self.index,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer { ty, has_dynamic_offset: false, min_binding_size: None },
            count: None,
        }
    }
}

/// Matches `named` resources — `(WGSL name, resource)` — to `kernel`'s declared `bindings`:
/// every declared binding must be named exactly once, and every name must be declared. Returns
/// `(binding index, resource)` in declaration order. A mismatch is a bug in the call site, an
/// [`Error::Internal`] (at load, where every bind group is made), not a panic.
pub fn resolve<T: Copy>(kernel: &str, bindings: &[Binding], named: &[(&str, T)]) -> Result<Vec<(u32, T)>> {
    let bug = |what: String| Error::Internal(format!("binding buffers to the {kernel} kernel: {what}"));
    for (i, (name, _)) in named.iter().enumerate() {
        if !bindings.iter().any(|b| b.name == *name) {
            let declared: Vec<_> = bindings.iter().map(|b| b.name).collect();
            return Err(bug(format!("it has no binding `{name}` (it declares {declared:?})")));
        }
        if named[..i].iter().any(|(n, _)| n == name) {
            return Err(bug(format!("`{name}` is named twice")));
        }
    }
    bindings
        .iter()
        .map(|b| {
            let found = named.iter().find(|(n, _)| *n == b.name);
            found.map(|&(_, r)| (b.index, r)).ok_or_else(|| bug(format!("no buffer for `{}`", b.name)))
        })
        .collect()
}

/// A bind-group layout with the declaration it was built from, so bind groups made against it
/// resolve their buffers by name (kernels that share a layout share its declaration).
#[derive(Clone, Debug)]
pub struct Layout {
    /// The bindings, as the kernel's Rust wrapper declares them.
    pub(crate) bindings: &'static [Binding],
    /// The wgpu layout made from them.
    pub(crate) layout: wgpu::BindGroupLayout,
    /// Whether its `var<uniform>` bindings are read-only storage here (the adapter wants it,
    /// [`crate::gpu::AdapterSummary::params_in_storage`], and the device allows that many
    /// storage buffers); kernels compiled against it read them so.
    pub(crate) params_in_storage: bool,
}

impl Layout {
    /// A bind-group layout for `bindings` (labelled `name` where it is made): the context's
    /// own for that binding list once one was made ([`crate::gpu::GpuContext`]'s kernel cache).
    pub(crate) fn new(ctx: &GpuContext, name: &str, bindings: &'static [Binding]) -> Self {
        let params_in_storage = ctx.summary().params_in_storage
            && bindings.len() <= ctx.limits().max_storage_buffers_per_shader_stage as usize;
        let layout = ctx.kernels.layout(layout_key(bindings, params_in_storage), || {
            let entries: Vec<_> = bindings.iter().map(|b| b.entry(params_in_storage)).collect();
            ctx.device().create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(name),
                entries: &entries,
            })
        });
        Self { bindings, layout, params_in_storage }
    }

    fn key(&self) -> LayoutKey {
        layout_key(self.bindings, self.params_in_storage)
    }
}

fn layout_key(bindings: &[Binding], params_in_storage: bool) -> LayoutKey {
    (format!("{bindings:?}"), params_in_storage)
}

/// A kernel a block kind needs: its WGSL, its declared bindings and the pipeline-overridable
/// constants it is specialised with (`N_STATE`: the model's state size).
#[derive(Clone, Debug, PartialEq)]
pub struct KernelSpec {
    /// Its name (= WGSL file stem = entry point).
    pub(crate) name: &'static str,
    /// Its WGSL.
    pub(crate) source: &'static str,
    /// Its declared bindings.
    pub(crate) bindings: &'static [Binding],
    /// Pipeline-overridable constants and their values.
    pub(crate) constants: Vec<(&'static str, f64)>,
}

/// A compiled kernel: its pipeline and the layout its bind groups must follow.
pub struct Kernel {
    /// Name of the kernel (= WGSL file stem = entry point), used in labels and errors.
    pub(crate) name: &'static str,
    /// Layout of bind group 0, with the bindings it declares.
    pub(crate) layout: Layout,
    /// The compute pipeline.
    pub(crate) pipeline: wgpu::ComputePipeline,
}

impl Kernel {
    /// Compiles `source` (entry point `name`) with a new bind-group layout for `bindings`.
    pub async fn new(
        ctx: &GpuContext,
        name: &'static str,
        source: &str,
        bindings: &'static [Binding],
    ) -> Result<Self> {
        Self::with_layout(ctx, name, source, Layout::new(ctx, name, bindings)).await
    }

    /// Compiles `source` (entry point `name`) against an existing layout, so bind groups made
    /// for another kernel with that layout work with this one too (GEMM and GEMV share theirs).
    pub(crate) async fn with_layout(
        ctx: &GpuContext,
        name: &'static str,
        source: &str,
        layout: Layout,
    ) -> Result<Self> {
        Self::with_constants(ctx, name, source, layout, &[]).await
    }

    /// Like [`Kernel::with_layout`], with values for the shader's pipeline-overridable
    /// constants (`override W_FORMAT: u32` ...): one pipeline per variant, from one source.
    pub(crate) async fn with_constants(
        ctx: &GpuContext,
        name: &'static str,
        source: &str,
        layout: Layout,
        constants: &[(&str, f64)],
    ) -> Result<Self> {
        let key: PipelineKey = (
            name,
            source.to_string(),
            constants.iter().map(|&(c, v)| (c.to_string(), v.to_bits())).collect(),
            layout.key(),
        );
        if let Some(pipeline) = ctx.kernels.pipeline(&key) {
            return Ok(Kernel { name, layout, pipeline });
        }
        ctx.counters.pipelines.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let device = ctx.device();
        let kernel = ctx
            .scoped(&format!("creating the {name} pipeline"), || {
                let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                    label: Some(name),
                    bind_group_layouts: &[Some(&layout.layout)],
                    immediate_size: 0,
                });
                let source = match layout.params_in_storage {
                    true => source.replace("var<uniform>", "var<storage, read>").into(),
                    false => std::borrow::Cow::Borrowed(source),
                };
                let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(name),
                    source: wgpu::ShaderSource::Wgsl(source),
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
            .await?;
        ctx.kernels.keep(key, &kernel.pipeline);
        Ok(kernel)
    }

    /// A bind group with each of `buffers` — `(WGSL name, buffer)` — bound where the kernel
    /// declares that name; every declared binding must be named once ([`resolve`]).
    pub fn bind(&self, ctx: &GpuContext, buffers: &[(&str, &wgpu::Buffer)]) -> Result<wgpu::BindGroup> {
        let entries = resolve(self.name, self.layout.bindings, buffers)?;
        Ok(ctx.create_bind_group(self.name, &self.layout.layout, &entries))
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
        dispatch(pass, self.name, &self.pipeline, bind_group, groups);
    }
}

thread_local! {
    /// Dispatches recorded by this thread so far (direct and indirect; every one goes through
    /// [`dispatch`] or [`dispatch_indirect`]): `bench --suite`'s `dispatches_per_token`. Per
    /// thread, so that tests running side by side in one process count only their own (a
    /// model records on the thread that calls it).
    static DISPATCHES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many dispatches this thread has recorded so far.
pub fn dispatches_recorded() -> u64 {
    DISPATCHES.with(std::cell::Cell::get)
}

/// Records one dispatch of `pipeline` (kernel `name`) with `bind_group` over `groups`
/// workgroups.
pub fn dispatch(
    pass: &mut wgpu::ComputePass<'_>,
    name: &'static str,
    pipeline: &wgpu::ComputePipeline,
    bind_group: &wgpu::BindGroup,
    groups: (u32, u32, u32),
) {
    record(pass, name, pipeline, bind_group, |pass| pass.dispatch_workgroups(groups.0, groups.1, groups.2));
}

/// Records one dispatch of `pipeline` (kernel `name`) with `bind_group` whose workgroup counts
/// the GPU reads: three u32 at byte `offset` of `args`.
pub(crate) fn dispatch_indirect(
    pass: &mut wgpu::ComputePass<'_>,
    name: &'static str,
    pipeline: &wgpu::ComputePipeline,
    bind_group: &wgpu::BindGroup,
    (args, offset): (&wgpu::Buffer, u64),
) {
    record(pass, name, pipeline, bind_group, |pass| pass.dispatch_workgroups_indirect(args, offset));
}

/// What every dispatch records around its `dispatch_workgroups*` call: pipeline and bind group,
/// the stamps when this thread times dispatches ([`crate::gpu::start_dispatch_timing`]), and
/// the count.
fn record(
    pass: &mut wgpu::ComputePass<'_>,
    name: &'static str,
    pipeline: &wgpu::ComputePipeline,
    bind_group: &wgpu::BindGroup,
    workgroups: impl FnOnce(&mut wgpu::ComputePass<'_>),
) {
    let timed = profile::stamp_start(pass, name);
    pass.set_pipeline(pipeline);
    pass.set_bind_group(0, bind_group, &[]);
    workgroups(pass);
    if timed {
        profile::stamp_end(pass);
    }
    DISPATCHES.with(|n| n.set(n.get() + 1));
}

/// Splits `n` workgroups over a 2-D grid whose dimensions stay within `max_per_dim`;
/// kernels recover the linear index as `wid.y * nwg.x + wid.x` and skip indices ≥ n.
pub fn grid_2d(n: u32, max_per_dim: u32) -> (u32, u32) {
    if n <= max_per_dim { (n, 1) } else { (max_per_dim, n.div_ceil(max_per_dim)) }
}
