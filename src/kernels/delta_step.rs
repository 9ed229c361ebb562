//! A decode step of the Gated DeltaNet in one dispatch: delta_prep's normalisation, β and
//! decay for its heads, then the recurrence's state update. The Rust side of
//! `shaders/delta_step.wgsl`.

use crate::gpu::Binding;
use crate::kernels::{PARAMS, STEP};

/// WGSL source.
pub(crate) const SOURCE: &str = include_str!("../../shaders/delta_step.wgsl");

/// The kernel's bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                              // DeltaStepParams
    Binding::read(2, "ud"),              // (T, conv_dim): q ‖ k ‖ v (the conv's output)
    Binding::read(3, "xz"),              // (T, xz_stride): b, a at beta_at
    Binding::read_write(4, "ssm_state"), // (…, H_v, d_v, d_k) at state_offset
    Binding::read_write(5, "y"),         // (T, H_v·d_v)
    Binding::read_write(6, "capture"),   // (T_max) map, then (captures, slot_len) slots
    Binding::read(7, "a_dt"),            // (2·H_v): A = −exp(A_log) ‖ dt_bias
];

/// `Params` of delta_step.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct DeltaStepParams {
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
    /// Column of b (H_v) in a row of xz; a (H_v) follows.
    pub beta_at: u32,
    /// This layer's state (H_v, d_v, d_k) in the SSM state buffer.
    pub state_offset: u32,
    /// T_max: length of the position map at the start of the capture buffer.
    pub map_len: u32,
    /// Floats per checkpoint slot.
    pub slot_len: u32,
    /// Where this layer's state sits in a slot.
    pub slot_ssm_at: u32,
    /// d_k^−½.
    pub scale: f32,
}
