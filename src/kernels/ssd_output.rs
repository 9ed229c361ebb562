//! Pass 3 of Mamba-2's chunked scan, and the whole scan of a decode step: outputs
//! `y = (h·C + D·x) · silu(z)` and the final state. The Rust side of `shaders/ssd_output.wgsl`.

use crate::gpu::Binding;
use crate::kernels::ssd_chunks::SsdParams;

/// WGSL source.
pub const SOURCE: &str = include_str!("../../shaders/ssd_output.wgsl");

/// step, params, u, zxbcdt, A‖D‖dt_bias, chunk start states (chunks, E·D, N), SSM state
/// (L, H, P, N), y (T, E·D), capture (map + checkpoint slots).
pub const BINDINGS: &[Binding] = &Binding::forward::<9>(4);

/// `Params` of the shader: [`SsdParams`], then where this layer's state lives.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SsdOutputParams {
    /// As in `ssd_chunks`.
    pub ssd: SsdParams,
    /// layer · E·D·N: this layer's SSM state in the state buffer.
    pub state_offset: u32,
    /// T_max: length of the position map at the start of the capture buffer.
    pub map_len: u32,
    /// Floats per checkpoint slot.
    pub slot_len: u32,
    /// Where this layer's SSM state sits in a slot: L·(K−1)·conv_dim + layer·E·D·N.
    pub slot_ssm_at: u32,
}
