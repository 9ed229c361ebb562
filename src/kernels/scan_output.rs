//! Pass 3 of the chunked selective scan, and the whole scan of a decode step: outputs
//! `y = (h·C + D·u) · silu(z)` and the final state. The Rust side of `shaders/scan_output.wgsl`.

use crate::gpu::Binding;
use crate::kernels::{PARAMS, STEP};

/// WGSL source.
pub(crate) const SOURCE: &str = include_str!("../../shaders/scan_output.wgsl");

/// Largest `state_size` the shader supports (`N_MAX`).
pub const N_MAX: usize = 64;

/// Workgroup memory the shader uses for state size `n` (B ‖ C staging, then the 64 channels'
/// rows padded to n + 1): 12.3 KiB for N = 16; WebGPU guarantees 16 KiB, so N ≤ 31 runs
/// everywhere.
pub(crate) fn workgroup_bytes(n: usize) -> usize {
    4 * (super::scan_chunks::STAGE + 64 * (n + 1))
}

/// The kernel's bindings. Eight storage bindings: WebGPU's guaranteed minimum.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                              // ScanOutputParams
    Binding::read(2, "ud"),              // (2, T_max, E·D): conv output u, then Δ
    Binding::read(3, "dbc"),             // (T, R + 2N) δ ‖ B ‖ C
    Binding::read(4, "xz"),              // (T, 2·E·D) xs ‖ z
    Binding::read(5, "a_d"),             // (E·D·N + E·D) A ‖ D
    Binding::read(6, "chunk_h0"),        // (chunks, E·D, N) start states
    Binding::read_write(7, "ssm_state"), // (L, E·D, N)
    Binding::read_write(8, "y"),         // (T, E·D) gated output
    Binding::read_write(9, "capture"),   // (T_max) map, then (captures, slot_len) slots
];

/// `Params` of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ScanOutputParams {
    /// E·D.
    pub d_inner: u32,
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
    /// T_max · E·D: where Δ starts in the u‖Δ buffer.
    pub delta_at: u32,
    /// T_max: length of the position map at the start of the capture buffer.
    pub map_len: u32,
    /// Floats per checkpoint slot.
    pub slot_len: u32,
    /// Where this layer's SSM state sits in a slot: L·(K−1)·E·D + layer·E·D·N.
    pub slot_ssm_at: u32,
    /// Padding to 48 bytes.
    pub _pad: [u32; 2],
}
