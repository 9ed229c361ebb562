//! A Mamba-1 decode step's dt_proj + softplus + scan step + gate in one dispatch: the Rust side
//! of `shaders/decode_scan.wgsl` (only for a chunk of one token with no checkpoint to capture).

use crate::gpu::Binding;
use crate::kernels::{PARAMS, STEP};

/// WGSL source.
pub(crate) const SOURCE: &str = include_str!("../../shaders/decode_scan.wgsl");

/// Floats of workgroup memory for δ ‖ B ‖ C (`STAGE`): R + 2N must fit.
pub const STAGE: usize = 1024;

/// Channels per workgroup.
pub const WG: u32 = 64;

/// The kernel's bindings. Seven storage bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                              // DecodeScanParams
    Binding::read(2, "xz"),              // (1, 2·E·D) u ‖ z
    Binding::read(3, "dbc"),             // (1, R + 2N) δ ‖ B ‖ C
    Binding::read(4, "a_d"),             // (E·D·N + E·D) A ‖ D
    Binding::read(5, "w"),               // (E·D, R) dt_proj in W_FORMAT (int8: then the scales)
    Binding::read(6, "bias"),            // (E·D), a 1-element dummy without BIAS
    Binding::read_write(7, "ssm_state"), // (L, E·D, N)
    Binding::read_write(8, "y"),         // (1, E·D) gated output
];

/// dt_proj has a bias.
pub const BIAS: u32 = 1;

/// `Params` of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct DecodeScanParams {
    /// E·D.
    pub d_inner: u32,
    /// R + 2N.
    pub dbc_stride: u32,
    /// R.
    pub dt_rank: u32,
    /// layer · E·D·N.
    pub state_offset: u32,
    /// int8 dt_proj: index (in u32) of its first scale; else 0.
    pub w_scales: u32,
    /// `BIAS`.
    pub flags: u32,
    /// Padding to 32 bytes.
    pub _pad: [u32; 2],
}

/// Workgroup memory the shader uses for state size `n`: the δ ‖ B ‖ C stage, then the 64
/// channels' rows padded to n + 1.
pub(crate) fn workgroup_bytes(n: usize) -> usize {
    4 * (STAGE + WG as usize * (n + 1))
}

/// Workgroups for E·D channels.
pub(crate) fn groups(d_inner: u32) -> (u32, u32, u32) {
    (d_inner.div_ceil(WG), 1, 1)
}
