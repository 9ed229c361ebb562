//! LFM2's gated short convolution (B ⊙ x̃ → causal depthwise conv → C ⊙), carrying the conv
//! window: the Rust side of `shaders/short_conv.wgsl`.

use crate::gpu::Binding;
use crate::kernels::{PARAMS, STEP};

/// WGSL source.
pub(crate) const SOURCE: &str = include_str!("../../shaders/short_conv.wgsl");

/// Most taps the shader supports (`K_MAX`).
pub const K_MAX: usize = 16;

/// The kernel's bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                               // ShortConvParams
    Binding::read(2, "bcx"),              // (T, 3·D): B ‖ C ‖ x̃
    Binding::read(3, "weight"),           // (D, K)
    Binding::read(4, "bias"),             // (D), a 1-element dummy without bias
    Binding::read_write(5, "conv_state"), // (…, K−1, D) at state_offset, oldest first
    Binding::read_write(6, "y"),          // (T, D)
    Binding::read_write(7, "capture"),    // (T_max) map, then (captures, slot_len) slots
];

/// `Params` of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ShortConvParams {
    /// D.
    pub channels: u32,
    /// K.
    pub taps: u32,
    /// Where the layer's window starts in the conv state and in a checkpoint slot.
    pub state_offset: u32,
    /// 1 when the conv has a bias.
    pub has_bias: u32,
    /// T_max: length of the position map at the start of the capture buffer.
    pub map_len: u32,
    /// Floats per checkpoint slot.
    pub slot_len: u32,
    pub _pad: [u32; 2],
}

/// Workgroups: one invocation per channel.
pub(crate) fn groups(channels: u32) -> (u32, u32, u32) {
    (channels.div_ceil(64), 1, 1)
}
