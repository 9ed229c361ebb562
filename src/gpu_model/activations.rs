//! Activation and state buffers, sized once at load for the largest forward chunk.

use crate::error::Result;
use crate::gpu::{GpuContext, Readback};
use crate::kernels::{Step, scan_chunks};
use crate::model::Config;

/// Scratch buffers of one forward chunk of at most `max_tokens` tokens (T ≤ max_tokens).
pub(crate) struct Activations {
    pub step: wgpu::Buffer,     // Step uniform
    pub ids: wgpu::Buffer,      // (T) u32
    pub h: wgpu::Buffer,        // (T, D) residual stream
    pub x_norm: wgpu::Buffer,   // (T, D) normalised h
    pub xz: wgpu::Buffer,       // (T, 2·E·D) in_proj output: xs ‖ z
    pub u: wgpu::Buffer,        // (T, E·D) conv1d + SiLU output
    pub dbc: wgpu::Buffer,      // (T, R + 2N) x_proj output: δ ‖ B ‖ C
    pub delta: wgpu::Buffer,    // (T, E·D) Δ
    pub y: wgpu::Buffer,        // (T, E·D) gated scan output
    pub chunk_ab: wgpu::Buffer, // (chunks, 2, E·D, N) per-chunk affine maps
    pub chunk_h0: wgpu::Buffer, // (chunks, E·D, N) chunk start states
    pub logits: wgpu::Buffer,   // (logits_rows, V)
    pub readback: Readback,     // logits_rows · V floats
    pub max_tokens: usize,
    pub logits_rows: usize,
    pub chunk: usize,
}

/// The recurrent state of every layer on the GPU (the same layout as [`crate::State`]).
pub(crate) struct StateBuffers {
    pub conv: wgpu::Buffer, // (layers, K−1, E·D)
    pub ssm: wgpu::Buffer,  // (layers, E·D, N)
}

impl Activations {
    pub fn new(ctx: &GpuContext, c: &Config, max_tokens: usize) -> Result<Self> {
        let t = max_tokens;
        let chunk = scan_chunks::chunk_len(c.d_state);
        let chunks = t.div_ceil(chunk);
        let plane = c.d_inner * c.d_state;
        // All-position logits are computed in blocks of rows that fit one binding (≤ 64 MiB).
        let logits_rows = ((64 << 20).min(ctx.max_binding()) as usize / (4 * c.vocab_size)).clamp(1, t);
        let z = |label: &str, len: usize| ctx.storage_zeroed_f32(label, len);
        Ok(Self {
            step: ctx.uniform("step", &Step::default()),
            ids: z("ids", t)?,
            h: z("h", t * c.d_model)?,
            x_norm: z("x_norm", t * c.d_model)?,
            xz: z("xz", t * 2 * c.d_inner)?,
            u: z("u", t * c.d_inner)?,
            dbc: z("dbc", t * c.x_proj_dim())?,
            delta: z("delta", t * c.d_inner)?,
            y: z("y", t * c.d_inner)?,
            chunk_ab: z("chunk_ab", chunks * 2 * plane)?,
            chunk_h0: z("chunk_h0", chunks * plane)?,
            logits: z("logits", logits_rows * c.vocab_size)?,
            readback: Readback::new(ctx, (logits_rows * c.vocab_size * 4) as u64, "logits readback"),
            max_tokens,
            logits_rows,
            chunk,
        })
    }
}

impl StateBuffers {
    pub fn new(ctx: &GpuContext, c: &Config) -> Result<Self> {
        Ok(Self {
            conv: ctx.storage_zeroed_f32("conv state", c.n_layer * (c.d_conv - 1) * c.d_inner)?,
            ssm: ctx.storage_zeroed_f32("ssm state", c.n_layer * c.d_inner * c.d_state)?,
        })
    }
}
