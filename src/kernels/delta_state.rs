//! Pass 2 of the Gated DeltaNet's chunked prefill: the state carried from chunk to chunk
//! (V' = U − W S, O = e^c ⊙ Q S + P V', S ← e^{c_last} S + (e^{c_last − c} ⊙ K)ᵀ V'), with
//! checkpoints anywhere in a chunk. The Rust side of `shaders/delta_state.wgsl`.

use crate::gpu::Binding;
use crate::kernels::{PARAMS, STEP};

/// WGSL source.
pub(crate) const SOURCE: &str = include_str!("../../shaders/delta_state.wgsl");

/// Value channels per workgroup (delta_state's and delta_step's).
pub const JB: usize = 16;

/// Largest d_k the kernels support (delta_state's and delta_step's).
pub const DK_MAX: usize = 128;

/// The kernel's bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                              // DeltaStateParams
    Binding::read(2, "ud"),              // (T, conv_dim): q ‖ k ‖ v, q and k normalised
    Binding::read(3, "xz"),              // (T, xz_stride): c at c_at
    Binding::read(4, "uw"),              // (T, H_v, d_v + d_k): U ‖ W rows
    Binding::read(5, "pmat"),            // (chunks, H_v, C, C): P
    Binding::read_write(6, "ssm_state"), // (…, H_v, d_v, d_k) at state_offset
    Binding::read_write(7, "y"),         // (T, H_v·d_v)
    Binding::read_write(8, "capture"),   // (T_max) map, then (captures, slot_len) slots
];

/// `Params` of delta_state.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct DeltaStateParams {
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
    /// Column of c (H_v) in a row of xz.
    pub c_at: u32,
    /// This layer's state (H_v, d_v, d_k) in the SSM state buffer.
    pub state_offset: u32,
    /// T_max: length of the position map at the start of the capture buffer.
    pub map_len: u32,
    /// Floats per checkpoint slot.
    pub slot_len: u32,
    /// Where this layer's state sits in a slot.
    pub slot_ssm_at: u32,
    pub _pad: u32,
}

/// Workgroups of delta_state and delta_step: one per (value head, block of JB channels).
pub(crate) fn groups(v_heads: usize, v_dim: usize) -> (u32, u32, u32) {
    ((v_heads * v_dim.div_ceil(JB)) as u32, 1, 1)
}
