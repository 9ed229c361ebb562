//! Causal depthwise conv1d + bias + SiLU, carrying the conv window: the Rust side of
//! `shaders/conv1d_silu.wgsl`.

use crate::gpu::Binding;

/// WGSL source.
pub const SOURCE: &str = include_str!("../../shaders/conv1d_silu.wgsl");

/// Largest `conv_kernel` the shader supports (`K_MAX`).
pub const K_MAX: usize = 8;

/// step, params, xz (T, 2·E·D), weight (E·D, K), bias (E·D), conv state (L, K−1, E·D),
/// u‖Δ (2, T_max, E·D), capture (map + checkpoint slots).
pub const BINDINGS: &[Binding] = &Binding::forward::<8>(3);

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
pub fn groups(d_inner: u32) -> (u32, u32, u32) {
    (d_inner.div_ceil(64), 1, 1)
}
