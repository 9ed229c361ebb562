//! Pass 1 of the chunked selective scan (per-chunk affine summaries): the Rust side of
//! `shaders/scan_chunks.wgsl`. See ARCHITECTURE.md for the three passes.

use crate::gpu::Binding;
use crate::kernels::{PARAMS, STEP};

/// WGSL source.
pub(crate) const SOURCE: &str = include_str!("../../shaders/scan_chunks.wgsl");

/// Floats of workgroup memory the scan kernels stage B (and C) in (`STAGE`).
pub const STAGE: usize = 2048;

/// Workgroup memory the shader uses for state size `n` (B staging, then the 64 channels' rows
/// padded to n + 1): as much as `scan_output`'s.
pub(crate) fn workgroup_bytes(n: usize) -> usize {
    4 * (STAGE + 64 * (n + 1))
}

/// The kernel's bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                             // ScanChunksParams
    Binding::read(2, "ud"),             // (2, T_max, E·D): conv output u, then Δ
    Binding::read(3, "dbc"),            // (T, R + 2N) δ ‖ B ‖ C
    Binding::read(4, "a_d"),            // (E·D·N + E·D) A ‖ D
    Binding::read_write(5, "chunk_ab"), // (chunks, 2, E·D, N) a ‖ b
];

/// `Params` of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ScanChunksParams {
    /// E·D.
    pub d_inner: u32,
    /// R + 2N.
    pub dbc_stride: u32,
    /// R.
    pub dt_rank: u32,
    /// Tokens per chunk.
    pub chunk: u32,
    /// T_max · E·D: where Δ starts in the u‖Δ buffer.
    pub delta_at: u32,
    /// Padding to 32 bytes.
    pub _pad: [u32; 3],
}

/// Tokens per scan chunk for state size `d_state`: B‖C of a chunk must fit the staging area.
pub(crate) fn chunk_len(d_state: usize) -> usize {
    (STAGE / (2 * d_state)).min(64)
}

/// Workgroups: 64 channels × one chunk each.
pub(crate) fn groups(d_inner: u32, n_chunks: u32) -> (u32, u32, u32) {
    (d_inner.div_ceil(64), n_chunks, 1)
}
