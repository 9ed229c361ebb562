//! The RMSNorms of x_proj's output on the GPU (Falcon-Mamba's weightless ones, Jamba's with
//! gains): the Rust side of `shaders/rms_slices.wgsl`.
//!
//! In place on x_proj's output `dbc` (T, R + 2N): each token's δ (R), B (N) and C (N) are each
//! divided by their own `sqrt(mean(v²) + eps)`, then with [`HAS_GAINS`] times their gains. One
//! workgroup per (row, slice).

use crate::gpu::Binding;
use crate::kernels::{PARAMS, STEP};

/// WGSL source of the kernel.
pub(crate) const SOURCE: &str = include_str!("../../shaders/rms_slices.wgsl");

/// The kernel's bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                        // RmsSlicesParams
    Binding::read_write(2, "dbc"), // (T, R + 2N): δ ‖ B ‖ C, normalised in place
    Binding::read(3, "gains"),     // (R + 2N): the three gains ‖; a 1-element dummy without HAS_GAINS
];

/// Multiply each normalised slice by its gain.
pub(crate) const HAS_GAINS: u32 = 1;

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
    /// [`HAS_GAINS`] or 0.
    pub flags: u32,
    /// Uniform structs are padded to 16 bytes.
    pub _pad: [u32; 3],
}

/// Workgroups along z: one per slice (δ, B, C); the rows go on a 2-D grid within the device's
/// limit, a workgroup each.
pub(crate) const SLICES: u32 = 3;
