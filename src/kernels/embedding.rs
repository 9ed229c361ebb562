//! Token-embedding gather: the Rust side of `shaders/embedding.wgsl`. One dispatch per part of
//! a row-split embedding matrix.

use crate::gpu::Binding;

/// WGSL source.
pub const SOURCE: &str = include_str!("../../shaders/embedding.wgsl");

/// step, params, ids (T), table part (rows, D) in its storage format (`W_FORMAT` override), h (T, D).
pub const BINDINGS: &[Binding] =
    &[Binding::Uniform, Binding::Uniform, Binding::Read, Binding::Read, Binding::ReadWrite];

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
}

/// Columns of a token's row per workgroup (the workgroup size; one token per grid row).
pub const COLUMNS: u32 = 64;
