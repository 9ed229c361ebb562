//! The gate after a Mamba-2 block's grouped RMSNorm (Falcon-H1's norm before the gate):
//! `y ← y · silu(z)` in place; compiled with [`SIGMOID`] true, Qwen3.5's attention output gate
//! `y ← y · σ(z)`. The Rust side of `shaders/silu_gate.wgsl`.

use crate::gpu::Binding;
use crate::kernels::{PARAMS, STEP};

/// WGSL source.
pub(crate) const SOURCE: &str = include_str!("../../shaders/silu_gate.wgsl");

/// The kernel's bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                      // SiluGateParams
    Binding::read(2, "z"),       // (T, z_stride): in_proj's (q_proj's) output, the gate at z_col
    Binding::read_write(3, "y"), // (T, y_stride), gated in place
];

/// Invocations per workgroup: one per (token, channel).
pub const WG: u32 = 64;

/// The pipeline constant that makes the gate σ(z) instead of silu(z).
pub(crate) const SIGMOID: &str = "SIGMOID";

/// `Params` of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SiluGateParams {
    /// E·D (an attention's Hq·hd): values per token gated.
    pub cols: u32,
    /// Floats between rows of y.
    pub y_stride: u32,
    /// Floats between rows of z (in_proj's width; an attention's q ‖ k ‖ v ‖ gate row).
    pub z_stride: u32,
    /// Column of the gate's first value in a row of z.
    pub z_col: u32,
}
