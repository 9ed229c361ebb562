//! RMSNorm on the GPU: the Rust side of `shaders/rms_norm.wgsl`.
//!
//! `y[t, :] = x[t, :] / sqrt(mean(x[t, :]²) + eps) ⊙ weight` — the pre-mixer norm of every
//! Mamba block and the final `norm_f`. One workgroup per row.

use crate::error::{Error, Result};
use crate::gpu::{Binding, GpuContext, Kernel, grid_2d};
use crate::kernels::{PARAMS, STEP, Step};

/// WGSL source of the kernel.
pub(crate) const SOURCE: &str = include_str!("../../shaders/rms_norm.wgsl");

/// The kernel's bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                      // RmsNormParams
    Binding::read(2, "x"),       // (T, d)
    Binding::read(3, "weight"),  // (G · d)
    Binding::read_write(4, "y"), // (T, d), or (1, d) with LAST_ROW
];

/// Normalise only row T−1, into row 0 of y.
pub const LAST_ROW: u32 = 1;

/// Every row scaled by `weight[0 .. cols]`, whatever its group (the Gated DeltaNet's norm).
pub const SHARED: u32 = 2;

/// The kernel's uniform parameters (`Params` in the shader).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RmsNormParams {
    /// d: row length.
    pub cols: u32,
    /// ε added to the mean square.
    pub eps: f32,
    /// `LAST_ROW`, `SHARED` or 0.
    pub flags: u32,
    /// G: rows of `cols` per token, row r scaled by `weight[(r % G)·cols ..]` (Mamba-2's gated
    /// RMSNorm); 1 otherwise.
    pub groups: u32,
}

/// Workgroups for `rows` rows (one per row, on a 2-D grid within the device's limit).
pub(crate) fn groups(rows: u32, max_per_dim: u32) -> (u32, u32, u32) {
    let (x, y) = grid_2d(rows, max_per_dim);
    (x, y, 1)
}

/// The compiled RMSNorm pipeline, with a one-shot [`RmsNorm::run`] for tests, tools and the
/// demo. The model binds its own buffers once and dispatches the kernel directly.
pub struct RmsNorm {
    kernel: Kernel,
}

impl RmsNorm {
    /// Compiles the pipeline.
    pub async fn new(ctx: &GpuContext) -> Result<Self> {
        Ok(Self { kernel: Kernel::new(ctx, "rms_norm", SOURCE, BINDINGS).await? })
    }

    /// Uploads `x` (rows, cols) and `weight` (cols), runs the kernel and reads `y` (rows, cols)
    /// back. Allocates buffers on every call.
    pub async fn run(&self, ctx: &GpuContext, x: &[f32], weight: &[f32], eps: f32) -> Result<Vec<f32>> {
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
        let rows = (x.len() / cols) as u32;
        let step = ctx.uniform("rms_norm step", &Step { t_len: rows, ..Default::default() });
        let params =
            ctx.uniform("rms_norm params", &RmsNormParams { cols: cols as u32, eps, flags: 0, groups: 1 });
        let x_buf = ctx.storage_from_f32("rms_norm x", x)?;
        let w_buf = ctx.storage_from_f32("rms_norm weight", weight)?;
        let y_buf = ctx.storage_zeroed_f32("rms_norm y", x.len())?;
        let bind_group = self.kernel.bind(
            ctx,
            &[("step", &step), ("p", &params), ("x", &x_buf), ("weight", &w_buf), ("y", &y_buf)],
        )?;
        let groups = groups(rows, ctx.summary().max_compute_workgroups_per_dimension);
        self.kernel.submit_once(ctx, &bind_group, groups, "running rms_norm").await?;
        ctx.read_f32(&y_buf, 0, x.len()).await
    }
}
