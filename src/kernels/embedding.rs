//! Token-embedding gather: the Rust side of `shaders/embedding.wgsl`. One dispatch per part of
//! a row-split embedding matrix.

use crate::gpu::Binding;
use crate::kernels::{PARAMS, STEP};

/// WGSL source.
pub(crate) const SOURCE: &str = include_str!("../../shaders/embedding.wgsl");

/// The kernel's bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                      // EmbeddingParams
    Binding::read(2, "ids"),     // (T) u32
    Binding::read(3, "w"),       // (n_rows, D) this part of the table, in W_FORMAT
    Binding::read_write(4, "h"), // (T, D)
];

/// `Params` of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct EmbeddingParams {
    /// D.
    pub d_model: u32,
    /// First vocabulary row in this part.
    pub row_start: u32,
    /// Rows in this part.
    pub n_rows: u32,
    /// int8 weights: index (in u32) of the part's first scale, after its quants; else 0.
    pub w_scales: u32,
    /// Multiplies every row (Granite's and Falcon-H1's embedding multiplier; 1 elsewhere).
    pub scale: f32,
    /// Uniform structs are padded to 16 bytes.
    pub _pad: [u32; 3],
}

/// Columns of a token's row per workgroup (the workgroup size; one token per grid row).
pub const COLUMNS: u32 = 64;
