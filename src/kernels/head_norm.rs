//! Per-head RMSNorms of an attention's queries and keys, in place: the Rust side of
//! `shaders/head_norm.wgsl`.

use crate::gpu::Binding;
use crate::kernels::{PARAMS, STEP};

/// WGSL source.
pub(crate) const SOURCE: &str = include_str!("../../shaders/head_norm.wgsl");

/// The kernel's bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                      // HeadNormParams
    Binding::read_write(2, "x"), // (T, stride): q ‖ k ‖ v rows
    Binding::read(3, "gains"),   // (2, hd): q's gain, then k's
];

/// `Params` of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct HeadNormParams {
    /// Floats per token row: Hq·hd + 2·Hkv·hd.
    pub stride: u32,
    /// Hq + Hkv: the heads normed per token.
    pub heads: u32,
    /// Hq: the first heads, which take the q gain.
    pub q_heads: u32,
    /// hd.
    pub head_dim: u32,
    /// ε.
    pub eps: f32,
    pub _pad: [u32; 3],
}
