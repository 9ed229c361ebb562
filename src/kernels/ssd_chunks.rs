//! Pass 1 of Mamba-2's chunked scan (each chunk's state from zero and its decay): the Rust side
//! of `shaders/ssd_chunks.wgsl`. Passes 2 and 3: `scan_carry` (shared with Mamba-1) and
//! `ssd_output`.

use crate::gpu::Binding;
use crate::kernels::{PARAMS, STEP};

/// WGSL source.
pub(crate) const SOURCE: &str = include_str!("../../shaders/ssd_chunks.wgsl");

/// Largest `state_size` the SSD kernels support (`N_MAX`).
pub const N_MAX: usize = 256;

/// Most state entries one lane of `ssd_chunks` / `ssd_output` holds (`N_LANE`).
pub const N_LANE: usize = 16;

/// Lanes per channel in `ssd_chunks` and `ssd_output` (their `SPLIT`) for state size `n`: the
/// least power of two with n ≤ SPLIT · [`N_LANE`] (1 up to N = 16; Mamba-2's N = 128: 8).
pub(crate) fn split(n: usize) -> usize {
    n.div_ceil(N_LANE).next_power_of_two()
}

/// Floats of workgroup memory the SSD kernels stage B (and C) rows in (`STAGE`): 8 KiB, within
/// WebGPU's guaranteed 16 KiB for any N ≤ N_MAX (a tile of STAGE / 2N ≥ 4 tokens).
pub const STAGE: usize = 2048;

/// Tokens per chunk of the three-pass prefill scan.
pub(crate) const CHUNK: usize = 64;

/// The kernel's bindings (`PARAMS`: [`SsdParams`]).
pub(crate) const BINDINGS: &[Binding] = &[STEP, PARAMS, INPUTS[0], INPUTS[1], INPUTS[2], CHUNK_AB];

/// What both SSD passes (this and `ssd_output`) read, at bindings 2–4.
pub(crate) const INPUTS: [Binding; 3] = [
    Binding::read(2, "u"),      // (T, conv_dim) x ‖ B ‖ C after the conv
    Binding::read(3, "zxbcdt"), // (T, E·D + conv_dim + H) in_proj output
    Binding::read(4, "a_dt"),   // (3·H) A = −exp(A_log) ‖ D ‖ dt_bias
];

/// (chunks, 2, E·D, N): each chunk's affine map a ‖ b.
const CHUNK_AB: Binding = Binding::read_write(5, "chunk_ab");

/// `Params` of `ssd_chunks.wgsl`; `ssd_output.wgsl`'s starts with the same members.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SsdParams {
    /// E·D = H·P.
    pub d_inner: u32,
    /// conv_dim = E·D + 2·G·N: floats between rows of u.
    pub u_stride: u32,
    /// E·D + conv_dim + H: floats between rows of zxbcdt.
    pub proj_stride: u32,
    /// E·D + conv_dim: where δ starts in a zxbcdt row.
    pub dt_at: u32,
    /// P.
    pub head_dim: u32,
    /// H.
    pub n_heads: u32,
    /// G.
    pub n_groups: u32,
    /// E·D / G.
    pub group_channels: u32,
    /// Workgroups per group: ceil(E·D / G / 64).
    pub group_wgs: u32,
    /// Tokens per chunk.
    pub chunk: u32,
    /// `time_step_limit`'s lower bound.
    pub dt_min: f32,
    /// `time_step_limit`'s upper bound.
    pub dt_max: f32,
}

impl SsdParams {
    /// The parameters of Mamba-2 block `c` (chunks of `chunk` tokens).
    pub(crate) fn new(c: &crate::blocks::Mamba2, chunk: usize) -> Self {
        let group_channels = c.d_inner / c.n_groups;
        Self {
            d_inner: c.d_inner as u32,
            u_stride: c.conv_dim() as u32,
            proj_stride: c.in_proj_dim() as u32,
            dt_at: (c.d_inner + c.conv_dim()) as u32,
            head_dim: c.head_dim as u32,
            n_heads: c.n_heads as u32,
            n_groups: c.n_groups as u32,
            group_channels: group_channels as u32,
            group_wgs: group_channels.div_ceil(64 / split(c.d_state)) as u32,
            chunk: chunk as u32,
            dt_min: c.time_step_limit.0,
            dt_max: c.time_step_limit.1,
        }
    }

    /// Workgroups: 64 / [`split`] channels of one group × one chunk each.
    pub(crate) fn groups(&self, n_chunks: u32) -> (u32, u32, u32) {
        (self.n_groups * self.group_wgs, n_chunks, 1)
    }
}
