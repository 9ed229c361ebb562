//! Pass 2 of the chunked selective scan (chains chunk summaries into chunk start states): the
//! Rust side of `shaders/scan_carry.wgsl`.

use crate::gpu::Binding;
use crate::kernels::{PARAMS, STEP};

/// WGSL source.
pub(crate) const SOURCE: &str = include_str!("../../shaders/scan_carry.wgsl");

/// The kernel's bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                             // ScanCarryParams
    Binding::read(2, "chunk_ab"),       // (chunks, 2, E·D, N) a ‖ b
    Binding::read(3, "ssm_state"),      // (L, E·D, N)
    Binding::read_write(4, "chunk_h0"), // (chunks, E·D, N) start states
];

/// `Params` of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ScanCarryParams {
    /// E·D·N.
    pub plane: u32,
    /// layer · E·D·N.
    pub state_offset: u32,
    /// Padding to 16 bytes.
    pub _pad: [u32; 2],
}

/// Workgroups: one invocation per (channel, state index).
pub(crate) fn groups(plane: u32) -> (u32, u32, u32) {
    (plane.div_ceil(64), 1, 1)
}
