//! Pass 3 of the chunked selective scan, and the whole scan of a decode step: outputs
//! `y = (h·C + D·u) · silu(z)` and the final state. The Rust side of `shaders/scan_output.wgsl`.

use crate::gpu::Binding;

/// WGSL source.
pub const SOURCE: &str = include_str!("../../shaders/scan_output.wgsl");

/// Largest `state_size` the shader supports (`N_MAX`).
pub const N_MAX: usize = 64;

/// step, params, u, Δ, dbc, xz, A‖D, chunk start states, SSM state (L, E·D, N), y (T, E·D).
pub const BINDINGS: &[Binding] = &[
    Binding::Uniform,
    Binding::Uniform,
    Binding::Read,
    Binding::Read,
    Binding::Read,
    Binding::Read,
    Binding::Read,
    Binding::Read,
    Binding::ReadWrite,
    Binding::ReadWrite,
];

/// `Params` of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ScanOutputParams {
    /// E·D.
    pub d_inner: u32,
    /// N.
    pub d_state: u32,
    /// R + 2N.
    pub dbc_stride: u32,
    /// R.
    pub dt_rank: u32,
    /// Tokens per chunk.
    pub chunk: u32,
    /// layer · E·D·N.
    pub state_offset: u32,
    /// 2·E·D.
    pub xz_stride: u32,
    /// Padding to 32 bytes.
    pub _pad: u32,
}
