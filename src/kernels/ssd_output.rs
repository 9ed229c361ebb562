//! Pass 3 of Mamba-2's chunked scan, and the whole scan of a decode step: outputs
//! `y = (h·C + D·x) · silu(z)` (without `· silu(z)` when the pipeline's `GATE` is false) and the
//! final state. The Rust side of `shaders/ssd_output.wgsl`.

use crate::gpu::Binding;
use crate::kernels::ssd_chunks::{self, SsdParams};
use crate::kernels::{PARAMS, STEP};

/// WGSL source.
pub(crate) const SOURCE: &str = include_str!("../../shaders/ssd_output.wgsl");

/// The kernel's bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS, // SsdOutputParams
    // u, zxbcdt, a_dt: as ssd_chunks reads them.
    ssd_chunks::INPUTS[0],
    ssd_chunks::INPUTS[1],
    ssd_chunks::INPUTS[2],
    Binding::read(5, "chunk_h0"),        // (chunks, E·D, N) start states
    Binding::read_write(6, "ssm_state"), // (L, H, P, N)
    Binding::read_write(7, "y"),         // (T, E·D) gated (GATE) output
    Binding::read_write(8, "capture"),   // (T_max) map, then (captures, slot_len) slots
];

/// `Params` of the shader: [`SsdParams`], then where this layer's state lives.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SsdOutputParams {
    /// As in `ssd_chunks`.
    pub(crate) ssd: SsdParams,
    /// layer · E·D·N: this layer's SSM state in the state buffer.
    pub state_offset: u32,
    /// T_max: length of the position map at the start of the capture buffer.
    pub map_len: u32,
    /// Floats per checkpoint slot.
    pub slot_len: u32,
    /// Where this layer's SSM state sits in a slot: L·(K−1)·conv_dim + layer·E·D·N.
    pub slot_ssm_at: u32,
    /// Where u's row 0 starts in the buffer bound as `u`: 0, or E·D for the fused decode step
    /// (which binds zxbcdt as u: decode_in_proj leaves the conv's output in place of x ‖ B ‖ C).
    pub u_at: u32,
    /// Padding to 80 bytes.
    pub(crate) _pad: [u32; 3],
}
