//! `Y = X · Wᵀ (+ bias)` (then optional softplus, optional scale, optional `Y +=`): the Rust side of
//! `shaders/linear.wgsl` (tiled GEMM, many rows) and `shaders/gemv.wgsl` (a few rows). Both
//! take [`LinearParams`] and the same bindings, so one bind group serves both pipelines.

use crate::gpu::Binding;
use crate::kernels::{PARAMS, STEP};

/// WGSL source of the tiled GEMM.
pub(crate) const SOURCE: &str = include_str!("../../shaders/linear.wgsl");

/// The bindings of `linear`, `linear_direct`, `gemv` and `gemv_coalesced` (one declaration:
/// `tests/kernel_contract.rs` checks all four shaders against it).
pub const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                      // LinearParams
    Binding::read(2, "x"),       // (T, x_stride)
    Binding::read(3, "w"),       // (O, K) in W_FORMAT (int8: then the scales)
    Binding::read(4, "bias"),    // (O), a 1-element dummy without BIAS
    Binding::read_write(5, "y"), // (rows, y_stride)
];

/// Add `bias[o]`.
pub const BIAS: u32 = 1;
/// `y += result` (the residual add after `out_proj`).
pub const ACCUMULATE: u32 = 2;
/// Apply softplus (Δ after `dt_proj`).
pub const SOFTPLUS: u32 = 4;
/// Multiply the result (after bias and softplus, before `ACCUMULATE`) by `scale`: a block's
/// residual multiplier, Falcon-H1's key and output multipliers, the logits' scale.
pub const SCALE: u32 = 8;

/// Rows up to which the GEMV pipeline is used instead of the tiled GEMM.
pub(crate) const GEMV_MAX_ROWS: u32 = 1;

/// Outputs and rows per workgroup tile of `linear` (the GPUs' GEMM).
pub const TILE: u32 = 64;

/// Outputs and rows per workgroup tile of `linear_direct` (the software adapters' GEMM).
pub const DIRECT_TILE: u32 = 32;

/// `Params` of both shaders.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct LinearParams {
    /// K: input features.
    pub n_in: u32,
    /// O: outputs (rows of this W part).
    pub n_out: u32,
    /// Floats between rows of X.
    pub x_stride: u32,
    /// int8 weights: index (in u32) of the part's first scale, after its quants; else 0.
    pub w_scales: u32,
    /// First row of X read.
    pub x_row_start: u32,
    /// Floats between rows of Y.
    pub y_stride: u32,
    /// Column of Y written for output 0 (the part's first row, for split matrices).
    pub y_col: u32,
    /// At most this many rows (0: all T rows from `x_row_start`).
    pub rows_max: u32,
    /// `BIAS | ACCUMULATE | SOFTPLUS | SCALE`.
    pub flags: u32,
    /// With [`SCALE`]: what the result is multiplied by.
    pub scale: f32,
    /// Padding to 48 bytes.
    pub(crate) _pad: [u32; 2],
}

impl LinearParams {
    /// These parameters with the result multiplied by `s` ([`SCALE`]; nothing when `s` is 1).
    pub(crate) fn scaled(mut self, s: f32) -> Self {
        if s != 1.0 {
            self.flags |= SCALE;
            self.scale = s;
        }
        self
    }
}

/// Workgroups for `linear` over `rows` × `n_out`.
pub(crate) fn gemm_groups(rows: u32, n_out: u32) -> (u32, u32, u32) {
    (n_out.div_ceil(TILE), rows.div_ceil(TILE), 1)
}

/// Workgroups for `linear_direct` over `rows` × `n_out`.
pub(crate) fn direct_gemm_groups(rows: u32, n_out: u32) -> (u32, u32, u32) {
    (n_out.div_ceil(DIRECT_TILE), rows.div_ceil(DIRECT_TILE), 1)
}

/// Workgroups for the GEMV over `rows` × `n_out`.
pub(crate) fn gemv_groups(rows: u32, n_out: u32) -> (u32, u32, u32) {
    (n_out.div_ceil(64), rows, 1)
}
