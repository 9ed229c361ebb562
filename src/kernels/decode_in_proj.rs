//! A Mamba-1 decode step's RMSNorm + in_proj + conv1d + SiLU in one dispatch: the Rust side of
//! `shaders/decode_in_proj.wgsl` (only for a chunk of one token with no checkpoint to capture).

use crate::gpu::Binding;
use crate::kernels::scale_segments::Segments;
use crate::kernels::{PARAMS, STEP};

/// WGSL source (its workgroup sum a tree; [`crate::kernels::lanes`] makes the subgroup version).
pub(crate) const SOURCE: &str = include_str!("../../shaders/decode_in_proj.wgsl");

/// Outputs one group of lanes computes (`OUT`).
pub const OUTPUTS_PER_LANE_GROUP: u32 = 4;

/// The kernel's bindings. Eight storage bindings: WebGPU's guaranteed minimum.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                               // DecodeInProjParams
    Binding::read(2, "h"),                // (1, D) the residual
    Binding::read(3, "gain"),             // (D) the RMSNorm's weight
    Binding::read(4, "w"),                // (O, D) in W_FORMAT (int8: then the scales)
    Binding::read(5, "bias"),             // (O), a 1-element dummy without BIAS
    Binding::read(6, "conv"),             // (channels, K) taps
    Binding::read(7, "conv_bias"),        // (channels), a 1-element dummy without CONV_BIAS
    Binding::read_write(8, "conv_state"), // (L, K−1, channels), oldest first
    Binding::read_write(9, "xz"),         // (1, in_proj rows): u ‖ z
];

/// in_proj has a bias.
pub const BIAS: u32 = 1;
/// conv1d has a bias.
pub const CONV_BIAS: u32 = 2;
/// The outputs (after the bias) times `scale`.
pub const SCALE: u32 = 4;
/// Then each of five row segments (z, x, B, C, δ) times its own scale.
pub const SEGMENTS: u32 = 8;

/// `Params` of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct DecodeInProjParams {
    /// D: in_proj's columns.
    pub n_in: u32,
    /// Rows of this in_proj part.
    pub n_out: u32,
    /// in_proj row of the part's first output.
    pub row_start: u32,
    /// int8 weights: index (in u32) of the part's first scale; else 0.
    pub w_scales: u32,
    /// First in_proj row fed to the conv.
    pub conv_from: u32,
    /// Conv channels.
    pub channels: u32,
    /// K: conv taps.
    pub d_conv: u32,
    /// layer · (K−1) · channels.
    pub state_offset: u32,
    /// `BIAS | CONV_BIAS | SCALE | SEGMENTS`.
    pub flags: u32,
    /// The RMSNorm's ε.
    pub eps: f32,
    /// With `SCALE`: the factor.
    pub scale: f32,
    /// With `SEGMENTS`: the in_proj rows where z, x, B and C end (δ: the rest), the scales of
    /// z, x, B, C and δ.
    pub segments: Segments,
}

/// Lanes per group of outputs: one invocation per four rows on software adapters (`direct`),
/// a whole workgroup reading one group's rows side by side on GPUs.
pub(crate) fn lanes(direct: bool) -> u32 {
    if direct { 1 } else { 64 }
}

/// Workgroups for `n_out` outputs.
pub(crate) fn groups(n_out: u32, direct: bool) -> (u32, u32, u32) {
    let per_group = 64 / lanes(direct) * OUTPUTS_PER_LANE_GROUP;
    (n_out.div_ceil(per_group), 1, 1)
}
