//! Causal depthwise conv1d + bias + SiLU, carrying the conv window: the Rust side of
//! `shaders/conv1d_silu.wgsl`.

use crate::gpu::Binding;
use crate::kernels::{PARAMS, STEP};

/// WGSL source.
pub(crate) const SOURCE: &str = include_str!("../../shaders/conv1d_silu.wgsl");

/// Largest `conv_kernel` the shader supports (`K_MAX`).
pub const K_MAX: usize = 8;

/// The kernel's bindings. Eight storage bindings: WebGPU's guaranteed minimum.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                               // Conv1dParams
    Binding::read(2, "xz"),               // (T, xz_stride): the input from column x_at
    Binding::read(3, "weight"),           // (E·D, K)
    Binding::read(4, "bias"),             // (E·D), a 1-element dummy without bias
    Binding::read_write(5, "conv_state"), // (L, K−1, E·D), oldest first
    Binding::read_write(6, "ud"),         // (2, T_max, E·D): u here, then Δ
    Binding::read_write(7, "capture"),    // (T_max) map, then (captures, slot_len) slots
];

/// `Params` of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Conv1dParams {
    /// E·D.
    pub d_inner: u32,
    /// K.
    pub d_conv: u32,
    /// 2·E·D.
    pub xz_stride: u32,
    /// layer · (K−1) · E·D.
    pub state_offset: u32,
    /// 1 when there is a bias.
    pub has_bias: u32,
    /// T_max: length of the position map at the start of the capture buffer.
    pub map_len: u32,
    /// Floats per checkpoint slot.
    pub slot_len: u32,
    /// Column of xz where the input starts: 0, or E·D for Mamba-2 (after z).
    pub x_at: u32,
}

/// Workgroups: one invocation per channel.
pub(crate) fn groups(d_inner: u32) -> (u32, u32, u32) {
    (d_inner.div_ceil(64), 1, 1)
}
