//! What the Gated DeltaNet needs per token before its recurrence: q and k L2-normalised per
//! key head (q also · d_k^−½) in place, β = σ(b) and the log decay g in place of b and a. The
//! Rust side of `shaders/delta_prep.wgsl`.

use crate::gpu::Binding;
use crate::kernels::{PARAMS, STEP};

/// WGSL source.
pub(crate) const SOURCE: &str = include_str!("../../shaders/delta_prep.wgsl");

/// The kernel's bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                       // DeltaPrepParams
    Binding::read_write(2, "ud"), // (T, conv_dim): q ‖ k ‖ v, q and k normalised in place
    Binding::read_write(3, "xz"), // (T, xz_stride): b → β, a → g in place
    Binding::read(4, "a_dt"),     // (2·H_v): A = −exp(A_log) ‖ dt_bias
];

/// `Params` of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct DeltaPrepParams {
    /// 2·H_k·d_k + H_v·d_v: floats per row of ud.
    pub conv_dim: u32,
    /// H_k.
    pub k_heads: u32,
    /// d_k.
    pub k_dim: u32,
    /// H_v.
    pub v_heads: u32,
    /// Floats per row of xz.
    pub xz_stride: u32,
    /// Column of b (H_v) in a row of xz; a follows.
    pub beta_at: u32,
    /// d_k^−½.
    pub scale: f32,
    pub _pad: u32,
}
