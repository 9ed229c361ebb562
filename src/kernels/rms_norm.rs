//! RMSNorm on the GPU: the Rust side of `shaders/rms_norm.wgsl`.
//!
//! `y[t, :] = x[t, :] / sqrt(mean(x[t, :]²) + eps) ⊙ weight` — the pre-mixer norm of every
//! Mamba block and the final `norm_f`. One workgroup per row.

use crate::error::{Error, Result};
use crate::gpu::{Binding, GpuContext, Kernel, grid_2d};

/// WGSL source of the kernel.
pub const SOURCE: &str = include_str!("../../shaders/rms_norm.wgsl");

/// The kernel's uniform parameters (`Params` in the shader).
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RmsNormParams {
    /// T: number of rows.
    pub rows: u32,
    /// d: row length.
    pub cols: u32,
    /// ε added to the mean square.
    pub eps: f32,
    /// Uniform structs are padded to 16 bytes.
    pub _pad: u32,
}

/// The compiled RMSNorm pipeline. Create once at load; bind buffers once; encode per step.
pub struct RmsNorm {
    kernel: Kernel,
    max_workgroups_per_dim: u32,
}

impl RmsNorm {
    /// Compiles the pipeline.
    pub async fn new(ctx: &GpuContext) -> Result<Self> {
        let bindings = [
            Binding::Uniform,
            Binding::Read,
            Binding::Read,
            Binding::ReadWrite,
        ];
        let kernel = Kernel::new(ctx, "rms_norm", SOURCE, &bindings, &[]).await?;
        let max_workgroups_per_dim = ctx.summary().max_compute_workgroups_per_dimension;
        Ok(Self {
            kernel,
            max_workgroups_per_dim,
        })
    }

    /// Binds `params` (RmsNormParams), `x` (T, d), `weight` (d) and the output `y` (T, d).
    pub fn bind(
        &self,
        ctx: &GpuContext,
        params: &wgpu::Buffer,
        x: &wgpu::Buffer,
        weight: &wgpu::Buffer,
        y: &wgpu::Buffer,
    ) -> wgpu::BindGroup {
        self.kernel.bind(ctx, &[params, x, weight, y])
    }

    /// Records the dispatch for `rows` rows into `pass`.
    pub fn encode(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        bind_group: &wgpu::BindGroup,
        rows: u32,
    ) {
        let (gx, gy) = grid_2d(rows, self.max_workgroups_per_dim);
        pass.set_pipeline(&self.kernel.pipeline);
        pass.set_bind_group(0, bind_group, &[]);
        pass.dispatch_workgroups(gx, gy, 1);
    }

    /// One-shot convenience for tests, tools and the demo: uploads `x` (rows, cols) and
    /// `weight` (cols), runs the kernel and reads `y` (rows, cols) back. Allocates buffers on
    /// every call; a model binds its buffers once and calls [`RmsNorm::encode`].
    pub async fn run(
        &self,
        ctx: &GpuContext,
        x: &[f32],
        weight: &[f32],
        eps: f32,
    ) -> Result<Vec<f32>> {
        let cols = weight.len();
        if cols == 0 || x.is_empty() {
            return Err(Error::InvalidInput(format!(
                "rms_norm needs a non-empty input and weight (got {} and {} values)",
                x.len(),
                cols
            )));
        }
        if !x.len().is_multiple_of(cols) {
            return Err(Error::ShapeMismatch {
                tensor: "rms_norm input x (rows, d = weight length)".into(),
                expected: vec![x.len().div_ceil(cols), cols],
                got: vec![x.len()],
            });
        }
        let rows = x.len() / cols;
        let params = RmsNormParams {
            rows: rows as u32,
            cols: cols as u32,
            eps,
            _pad: 0,
        };
        let params = ctx.uniform("rms_norm params", &params);
        let x_buf = ctx.storage_from_f32("rms_norm x", x)?;
        let w_buf = ctx.storage_from_f32("rms_norm weight", weight)?;
        let y_buf = ctx.storage_zeroed_f32("rms_norm y", x.len())?;
        ctx.scoped("running rms_norm", |device| {
            let bind_group = self.bind(ctx, &params, &x_buf, &w_buf, &y_buf);
            let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("rms_norm"),
            });
            {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("rms_norm"),
                    timestamp_writes: None,
                });
                self.encode(&mut pass, &bind_group, rows as u32);
            }
            ctx.queue.submit([encoder.finish()]);
        })
        .await?;
        ctx.read_f32(&y_buf, 0, x.len()).await
    }
}
