//! Rotary position embedding on the GPU: the Rust side of `shaders/rope.wgsl`, and the cos/sin
//! table it reads ([`rope_table`]).
//!
//! HF's NeoX-style rotation (`rotate_half`): within the first `rot` dims of each head, dims i
//! and i + rot/2 rotate by the angle pos · f_i; dims ≥ rot pass through (partial rotary).
//! Applied in place to q and to k (before `kv_append` copies k into the cache), for the
//! positions past .. past + T of a call.

use crate::error::{Error, Result};
use crate::gpu::{Binding, GpuContext, Kernel, grid_2d};
use crate::kernels::attention::rows_of;
use crate::kernels::{PARAMS, STEP, Step};

/// WGSL source of the kernel.
pub(crate) const SOURCE: &str = include_str!("../../shaders/rope.wgsl");

/// The kernel's bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                      // RopeParams
    Binding::read(2, "cos_sin"), // (positions, 2, rot/2): cos ‖ sin per position
    Binding::read_write(3, "x"), // (T, stride): (heads, hd) at col, rotated in place
];

/// Invocations per workgroup (`WG` in the shader): one per (token, head, pair).
pub const WG: u32 = 64;

/// The kernel's uniform parameters (`Params` in the shader).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RopeParams {
    /// Floats from one token's row of x to the next.
    pub stride: u32,
    /// Column of head 0's first dim in a row.
    pub col: u32,
    /// Heads per row to rotate.
    pub heads: u32,
    /// hd: dims per head.
    pub head_dim: u32,
    /// Rotated dims per head: even, ≤ hd (hd · partial_rotary_factor).
    pub rot: u32,
    /// Positions in the table; the kernel leaves rows at later positions untouched.
    pub positions: u32,
    /// Uniform structs are padded to 16 bytes.
    pub _pad: [u32; 2],
}

/// The cos/sin table of `positions` positions for `rot` rotated dims, (positions, 2, rot/2):
/// per position the rot/2 cosines, then the rot/2 sines.
///
/// This is HF's `RotaryEmbedding` with the default rope type (attention scaling 1), step for
/// step in f32: `inv_freq[i] = 1 / theta^(2i / rot)` (the exponent an f32 division of the
/// integer 2i by rot, the power and the reciprocal in f32), the angle `(pos as f32) ·
/// inv_freq[i]` one f32 multiply, then its cos and sin (computed in f64 and rounded: torch's
/// f32 cos/sin are within an ulp of that; checked once against transformers 5.24's
/// `LlamaRotaryEmbedding` for theta 1e4, 5e5, 1e6 over 5001 positions: ≤ 1 ulp, 5% differ). The f32 angle is what the model was trained with:
/// up to position 5000 its cos/sin differ from those of the exact pos · theta^(-2i/rot) by up
/// to 1.6e-4 (tests/gpu_attention.rs).
pub fn rope_table(theta: f64, rot: u32, positions: u32) -> Vec<f32> {
    rope_rows(theta, rot, 0, positions as usize)
}

/// The rows of [`rope_table`] for positions `start .. start + count` (the CPU reference rotates
/// a call's tokens with them; the same numbers, bit for bit).
pub(crate) fn rope_rows(theta: f64, rot: u32, start: usize, count: usize) -> Vec<f32> {
    let half = (rot / 2) as usize;
    let base = theta as f32;
    let inv_freq: Vec<f32> = (0..half).map(|i| 1.0 / base.powf((2 * i) as f32 / rot as f32)).collect();
    let mut table = Vec::with_capacity(count * 2 * half);
    for pos in start..start + count {
        let angles: Vec<f64> = inv_freq.iter().map(|&f| f64::from(pos as f32 * f)).collect();
        table.extend(angles.iter().map(|a| a.cos() as f32));
        table.extend(angles.iter().map(|a| a.sin() as f32));
    }
    table
}

/// Workgroups for a call of `t` tokens (one invocation per pair, on a 2-D grid).
pub(crate) fn groups(t: u32, params: &RopeParams, max_per_dim: u32) -> (u32, u32, u32) {
    let pairs = t * params.heads * (params.rot / 2);
    let (x, y) = grid_2d(pairs.div_ceil(WG), max_per_dim);
    (x, y, 1)
}

/// The compiled rope pipeline, with a one-shot [`Rope::run`] for tests and tools.
pub struct Rope {
    kernel: Kernel,
}

impl Rope {
    /// Compiles the pipeline.
    pub async fn new(ctx: &GpuContext) -> Result<Self> {
        Ok(Self { kernel: Kernel::new(ctx, "rope", SOURCE, BINDINGS).await? })
    }

    /// Uploads `x` (T, stride) and the table, rotates positions `past ..` in place and reads
    /// x back. Allocates buffers on every call.
    pub async fn run(
        &self,
        ctx: &GpuContext,
        x: &[f32],
        table: &[f32],
        params: RopeParams,
        past: u32,
    ) -> Result<Vec<f32>> {
        let p = params;
        let t = rows_of("rope x (T, stride)", x.len(), p.stride as usize)?;
        if p.rot == 0
            || !p.rot.is_multiple_of(2)
            || p.rot > p.head_dim
            || p.col + p.heads * p.head_dim > p.stride
        {
            return Err(Error::InvalidInput(format!("rope: inconsistent parameters {p:?}")));
        }
        if table.len() != p.positions as usize * p.rot as usize || past + t > p.positions {
            return Err(Error::InvalidInput(format!(
                "rope: a table of {} floats for {} positions of rot {} cannot serve positions {past}..{}",
                table.len(),
                p.positions,
                p.rot,
                past + t
            )));
        }
        let step = ctx.uniform("rope step", &Step { t_len: t, past, ..Default::default() });
        let params = ctx.uniform("rope params", &p);
        let table_buf = ctx.storage_from_f32("rope cos_sin", table)?;
        let x_buf = ctx.storage_from_f32("rope x", x)?;
        let bind_group = self
            .kernel
            .bind(ctx, &[("step", &step), ("p", &params), ("cos_sin", &table_buf), ("x", &x_buf)])?;
        let groups = groups(t, &p, ctx.summary().max_compute_workgroups_per_dimension);
        self.kernel.submit_once(ctx, &bind_group, groups, "running rope").await?;
        ctx.read_f32(&x_buf, 0, x.len()).await
    }
}
