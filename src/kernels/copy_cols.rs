//! Copying a block of columns of every row from one buffer to another: the Rust side of
//! `shaders/copy_cols.wgsl` (Zamba2's hidden ‖ embeddings rows and its Mamba input).

use crate::gpu::Binding;
use crate::kernels::{PARAMS, STEP};

/// WGSL source.
pub(crate) const SOURCE: &str = include_str!("../../shaders/copy_cols.wgsl");

/// The kernel's bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                      // CopyColsParams
    Binding::read(2, "x"),       // (T, x_stride)
    Binding::read_write(3, "y"), // (T, y_stride)
];

/// Invocations per workgroup: one per value.
pub(crate) const WG: u32 = 64;

/// `Params` of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct CopyColsParams {
    /// Columns copied per row.
    pub width: u32,
    /// Floats between rows of x.
    pub x_stride: u32,
    /// First column read.
    pub x_col: u32,
    /// Floats between rows of y.
    pub y_stride: u32,
    /// First column written.
    pub y_col: u32,
    /// Uniform structs are padded to 16 bytes.
    pub _pad: [u32; 3],
}
