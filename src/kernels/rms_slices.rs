//! Falcon-Mamba's weightless RMSNorms on the GPU: the Rust side of `shaders/rms_slices.wgsl`.
//!
//! In place on x_proj's output `dbc` (T, R + 2N): each token's δ (R), B (N) and C (N) are each
//! divided by their own `sqrt(mean(v²) + eps)`. One workgroup per (row, slice).

use crate::gpu::Binding;
use crate::kernels::{PARAMS, STEP};

/// WGSL source of the kernel.
pub const SOURCE: &str = include_str!("../../shaders/rms_slices.wgsl");

/// The kernel's bindings.
pub const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                        // RmsSlicesParams
    Binding::read_write(2, "dbc"), // (T, R + 2N): δ ‖ B ‖ C, normalised in place
];

/// The kernel's uniform parameters (`Params` in the shader).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RmsSlicesParams {
    /// Floats per row of dbc: R + 2N.
    pub stride: u32,
    /// R: the δ slice's length.
    pub dt_rank: u32,
    /// N: the B and C slices' length.
    pub d_state: u32,
    /// `mixer_rms_eps`.
    pub eps: f32,
}

/// Workgroups along z: one per slice (δ, B, C); the rows go on a 2-D grid within the device's
/// limit, a workgroup each.
pub const SLICES: u32 = 3;
