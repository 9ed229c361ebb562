//! Pass 1 of the Gated DeltaNet's chunked prefill (the WY / UT form): per value head and
//! chunk, the triangular system solved in workgroup memory into U ‖ W, the chunk's P and the
//! running decay c. The Rust side of `shaders/delta_chunks.wgsl`.

use crate::gpu::Binding;
use crate::kernels::{PARAMS, STEP};

/// WGSL source.
pub(crate) const SOURCE: &str = include_str!("../../shaders/delta_chunks.wgsl");

/// Tokens per chunk: the SSD scan's, as `Step::n_chunks` counts one chunk size for the model.
pub const CHUNK: usize = crate::kernels::ssd_chunks::CHUNK;

/// The kernel's bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                         // DeltaChunksParams
    Binding::read(2, "ud"),         // (T, conv_dim): q ‖ k ‖ v, q and k normalised
    Binding::read_write(3, "xz"),   // (T, xz_stride): β, then g → c
    Binding::read_write(4, "uw"),   // (T, H_v, d_v + d_k): U ‖ W rows
    Binding::read_write(5, "pmat"), // (chunks, H_v, C, C): P
];

/// `Params` of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct DeltaChunksParams {
    /// 2·H_k·d_k + H_v·d_v: floats per row of ud.
    pub conv_dim: u32,
    /// H_k.
    pub k_heads: u32,
    /// d_k.
    pub k_dim: u32,
    /// d_v.
    pub v_dim: u32,
    /// H_v.
    pub v_heads: u32,
    /// Floats per row of xz.
    pub xz_stride: u32,
    /// Column of β (H_v) in a row of xz; g (H_v), then c, follows.
    pub beta_at: u32,
    pub _pad: u32,
}
