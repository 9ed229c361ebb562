//! The second pass of split-context attention: the Rust side of
//! `shaders/attention_combine.wgsl`, which merges the partial softmaxes `attention_decode`
//! wrote per split into each (token, head) row's output. Its one-shot run is
//! [`crate::kernels::attention_decode::AttentionDecode::run`], which runs both passes.

use crate::gpu::{Binding, grid_2d};
use crate::kernels::{PARAMS, STEP};

/// WGSL source of the kernel.
pub(crate) const SOURCE: &str = include_str!("../../shaders/attention_combine.wgsl");

/// The kernel's bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                      // AttentionCombineParams
    Binding::read(2, "scratch"), // (splits, T, Hq, hd + 2): (m, l, acc) per split
    Binding::read_write(3, "o"), // (T, o_stride): (Hq, hd) at o_col
];

/// The kernel's uniform parameters (`Params` in the shader).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct AttentionCombineParams {
    /// Floats between token rows of o.
    pub o_stride: u32,
    /// Column of head 0's output in a row of o.
    pub o_col: u32,
    /// Hq.
    pub heads: u32,
    /// hd.
    pub head_dim: u32,
    /// Keys per split: `attention_decode`'s.
    pub split_keys: u32,
    /// Uniform structs are padded to 16 bytes.
    pub _pad: [u32; 3],
}

/// Workgroups for a call of `t` tokens: one per (token, head) row, on a 2-D grid.
pub(crate) fn groups(t: u32, heads: u32, max_per_dim: u32) -> (u32, u32, u32) {
    let (x, y) = grid_2d(t * heads, max_per_dim);
    (x, y, 1)
}
