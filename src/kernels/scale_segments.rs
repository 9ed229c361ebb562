//! Per-segment multipliers on the rows of a Mamba-2 in_proj's output z ‖ x ‖ B ‖ C ‖ δ, in
//! place (Falcon-H1's `ssm_multipliers`): the Rust side of `shaders/scale_segments.wgsl`.

use crate::gpu::Binding;
use crate::kernels::{PARAMS, STEP};

/// WGSL source.
pub(crate) const SOURCE: &str = include_str!("../../shaders/scale_segments.wgsl");

/// The kernel's bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                      // ScaleSegmentsParams
    Binding::read_write(2, "x"), // (T, width), scaled in place
];

/// Invocations per workgroup: one per (token, column).
pub const WG: u32 = 64;

/// `Params` of the shader: a row's width, where its first four segments end, the five scales.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ScaleSegmentsParams {
    /// Floats per row (E·D + conv_dim + H): where the last segment, δ, ends.
    pub width: u32,
    /// Where the first four segments end, the five scales.
    pub segments: Segments,
    /// Uniform structs are padded to 16 bytes.
    pub _pad: [u32; 2],
}

/// The row segments z ‖ x ‖ B ‖ C ‖ δ of a Mamba-2 in_proj's output and their multipliers:
/// members of this kernel's and `decode_in_proj`'s `Params`, which embed it (`repr(C)`, nine
/// 4-byte members in this order).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Segments {
    /// Where z ends and x starts (E·D).
    pub end_z: u32,
    /// Where x ends and B starts (2·E·D).
    pub end_x: u32,
    /// Where B ends and C starts (2·E·D + G·N).
    pub end_b: u32,
    /// Where C ends and δ starts (2·E·D + 2·G·N).
    pub end_c: u32,
    /// Multiplies z.
    pub scale_z: f32,
    /// Multiplies x.
    pub scale_x: f32,
    /// Multiplies B.
    pub scale_b: f32,
    /// Multiplies C.
    pub scale_c: f32,
    /// Multiplies δ (before dt_bias is added in the scan).
    pub scale_dt: f32,
}
