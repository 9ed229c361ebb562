//! A Mamba-2 decode step's gated RMSNorm + out_proj + the residual add in one dispatch: the
//! Rust side of `shaders/decode_out_proj.wgsl` (only for a chunk of one token with no
//! checkpoint to capture).

use crate::gpu::Binding;
use crate::kernels::{PARAMS, STEP};

/// WGSL source (its workgroup sum a tree; [`crate::kernels::lanes`] makes the subgroup version).
pub(crate) const SOURCE: &str = include_str!("../../shaders/decode_out_proj.wgsl");

/// Most norm groups the shader supports (`G_MAX`).
pub const G_MAX: usize = 8;

/// The kernel's bindings. Five storage bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                      // DecodeOutProjParams
    Binding::read(2, "x"),       // (1, E·D) the scan's gated output
    Binding::read(3, "gain"),    // (E·D) the gated norm's weight
    Binding::read(4, "w"),       // (O, E·D) in W_FORMAT (int8: then the scales)
    Binding::read(5, "bias"),    // (O), a 1-element dummy without BIAS
    Binding::read_write(6, "h"), // (1, D) the residual, added to
    Binding::read(7, "z"),       // (1, ≥ E·D) with GATE_AFTER: the gate z in row 0's first E·D; else a dummy
];

/// out_proj has a bias.
pub const BIAS: u32 = 1;
/// The result (after the bias) times `scale`.
pub const SCALE: u32 = 8;
/// The normed input times silu(z) (the norm before the gate: Falcon-H1).
pub const GATE_AFTER: u32 = 16;

/// `Params` of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct DecodeOutProjParams {
    /// E·D: out_proj's columns.
    pub n_in: u32,
    /// Rows of this out_proj part.
    pub n_out: u32,
    /// Column of h written for the part's first output.
    pub y_col: u32,
    /// int8 weights: index (in u32) of the part's first scale; else 0.
    pub w_scales: u32,
    /// G: norm groups.
    pub groups: u32,
    /// `BIAS | SCALE`.
    pub flags: u32,
    /// The gated norm's ε.
    pub eps: f32,
    /// With [`SCALE`]: the residual multiplier.
    pub scale: f32,
}
