//! Causal grouped-query attention over a call's T tokens, flash style: the Rust side of
//! `shaders/attention_prefill.wgsl`.
//!
//! A workgroup takes BQ query rows — (token, head) pairs of one kv head — and walks the keys
//! they see in tiles of BK staged in workgroup memory, with an online softmax (running max and
//! sum, f32). [`tiles`] picks BQ and BK from hd so the four stages (Q, K, V, scores) take
//! [`WORKGROUP_BYTES`] = 16 KiB, WebGPU's guaranteed minimum, for any hd ≤ [`HEAD_DIM_MAX`].

use crate::error::Result;
use crate::gpu::{Binding, GpuContext, Kernel, grid_2d};
use crate::kernels::attention::{AttentionShape, HEAD_DIM_MAX, upload};
use crate::kernels::{PARAMS, STEP};

/// WGSL source of the kernel.
pub(crate) const SOURCE: &str = include_str!("../../shaders/attention_prefill.wgsl");

/// The kernel's bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                      // AttentionPrefillParams
    Binding::read(2, "q"),       // (T, q_stride): (Hq, hd) at q_col
    Binding::read(3, "kv"),      // at kv_offset: K, V each (capacity, Hkv, hd)
    Binding::read_write(4, "o"), // (T, o_stride): (Hq, hd) at o_col
];

/// Invocations per workgroup (`WG` in the shader).
pub const WG: u32 = 64;

/// Floats of each of the four workgroup-memory stages (`STAGE` in the shader).
pub const STAGE: u32 = 1024;

/// Workgroup memory the kernel declares: Q, K, V and score stages of [`STAGE`] f32 each
/// (`tests/kernel_contract.rs` sums the shader's declarations and compares).
pub const WORKGROUP_BYTES: u32 = 4 * STAGE * 4;

const _: () = assert!(WORKGROUP_BYTES <= 16 * 1024, "WebGPU guarantees 16 KiB of workgroup memory");
const _: () = assert!(HEAD_DIM_MAX * 4 <= STAGE, "BQ ≥ 4 rows of the largest head must fit a stage");

/// The kernel's uniform parameters (`Params` in the shader).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct AttentionPrefillParams {
    /// Floats between token rows of q.
    pub q_stride: u32,
    /// Column of head 0's query in a row of q.
    pub q_col: u32,
    /// Floats between token rows of o.
    pub o_stride: u32,
    /// Column of head 0's output in a row of o.
    pub o_col: u32,
    /// Hq, Hkv, hd, the layer's K region and capacity, the softmax scale.
    pub shape: AttentionShape,
    /// BQ: query rows per workgroup ([`tiles`]).
    pub rows: u32,
    /// BK: keys per staged tile ([`tiles`]).
    pub keys: u32,
}

impl AttentionPrefillParams {
    /// The parameters for `shape`, with q and o dense (T, Hq · hd) rows.
    pub(crate) fn new(shape: &AttentionShape) -> Self {
        let (rows, keys) = tiles(shape.head_dim);
        let width = shape.heads * shape.head_dim;
        Self { q_stride: width, q_col: 0, o_stride: width, o_col: 0, shape: *shape, rows, keys }
    }
}

/// (BQ, BK) for head dim `head_dim` (1..=[`HEAD_DIM_MAX`]): BQ the largest power of two ≤ 64
/// with BQ · hd ≤ STAGE (so an invocation owns ≤ STAGE / WG = 16 output dims), BK the most
/// keys with BK · hd ≤ STAGE and BQ · BK ≤ STAGE. hd 64: (16, 16); 128: (8, 8); 256: (4, 4).
pub(crate) fn tiles(head_dim: u32) -> (u32, u32) {
    let hd = head_dim.clamp(1, HEAD_DIM_MAX);
    let fit = (STAGE / hd).min(WG);
    let rows = 1 << fit.ilog2();
    (rows, (STAGE / hd).min(STAGE / rows))
}

/// Workgroups for a call of `t` tokens: ceil(T · Hq/Hkv / BQ) row tiles per kv head, 2-D grid.
pub(crate) fn groups(t: u32, params: &AttentionPrefillParams, max_per_dim: u32) -> (u32, u32, u32) {
    let (heads, kv_heads) = (params.shape.heads, params.shape.kv_heads);
    let rows = t * (heads / kv_heads);
    let (x, y) = grid_2d(rows.div_ceil(params.rows) * kv_heads, max_per_dim);
    (x, y, 1)
}

/// The compiled prefill attention pipeline, with a one-shot [`AttentionPrefill::run`].
pub struct AttentionPrefill {
    kernel: Kernel,
}

impl AttentionPrefill {
    /// Compiles the pipeline.
    pub async fn new(ctx: &GpuContext) -> Result<Self> {
        Ok(Self { kernel: Kernel::new(ctx, "attention_prefill", SOURCE, BINDINGS).await? })
    }

    /// Uploads q (T, Hq · hd) and the cache buffer `kv` (holding positions 0 .. past + T of
    /// the layer), runs the kernel for positions past .. past + T and reads o (T, Hq · hd)
    /// back. Allocates buffers on every call.
    pub async fn run(
        &self,
        ctx: &GpuContext,
        q: &[f32],
        kv: &[f32],
        shape: AttentionShape,
        past: u32,
    ) -> Result<Vec<f32>> {
        let up = upload(ctx, "attention_prefill", q, kv, &shape, past)?;
        let p = AttentionPrefillParams::new(&shape);
        let params = ctx.uniform("attention_prefill params", &p);
        let o_buf = ctx.storage_zeroed_f32("attention_prefill o", q.len())?;
        let bind_group = self
            .kernel
            .bind(ctx, &[("step", &up.step), ("p", &params), ("q", &up.q), ("kv", &up.kv), ("o", &o_buf)])?;
        let groups = groups(up.t, &p, ctx.summary().max_compute_workgroups_per_dimension);
        self.kernel.submit_once(ctx, &bind_group, groups, "running attention_prefill").await?;
        ctx.read_f32(&o_buf, 0, q.len()).await
    }
}
