//! Split-context attention for a few query rows (decode: T = 1) over a long context: the Rust
//! side of `shaders/attention_decode.wgsl`, whose workgroups each take one (split of keys,
//! token, head) and write a partial softmax (m, l, acc\[hd\]) to a scratch buffer, merged by
//! `attention_combine`. [`splits`] sizes the splits and the scratch.

use crate::error::Result;
use crate::gpu::{Binding, GpuContext, Kernel, grid_2d};
use crate::kernels::attention::{AttentionShape, HEAD_DIM_MAX, upload};
use crate::kernels::attention_combine::{self, AttentionCombineParams};
use crate::kernels::{PARAMS, STEP};

/// WGSL source of the kernel.
pub(crate) const SOURCE: &str = include_str!("../../shaders/attention_decode.wgsl");

/// The kernel's bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                            // AttentionDecodeParams
    Binding::read(2, "q"),             // (T, q_stride): (Hq, hd) at q_col
    Binding::read(3, "kv"),            // at kv_offset: K, V each (capacity, Hkv, hd)
    Binding::read_write(4, "scratch"), // (splits, T, Hq, hd + 2): (m, l, acc) per split
];

/// Invocations per workgroup (`WG` in the shader).
pub const WG: u32 = 64;

/// Most keys per split (`SPLIT_MAX` in the shader: the scores' workgroup array).
pub const SPLIT_MAX: u32 = 256;

/// Workgroup memory the kernel declares: the query row, a split's weights, a reduction array.
pub const WORKGROUP_BYTES: u32 = (HEAD_DIM_MAX + SPLIT_MAX + WG) * 4;

const _: () = assert!(WORKGROUP_BYTES <= 16 * 1024, "WebGPU guarantees 16 KiB of workgroup memory");

/// Workgroups [`splits`] aims for: enough to fill a GPU's cores a few times over.
const TARGET_GROUPS: u32 = 256;

/// The kernel's uniform parameters (`Params` in the shader).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct AttentionDecodeParams {
    /// Floats between token rows of q.
    pub q_stride: u32,
    /// Column of head 0's query in a row of q.
    pub q_col: u32,
    /// Hq, Hkv, hd, the layer's K region and capacity, the softmax scale.
    pub shape: AttentionShape,
    /// Keys per split, ≤ [`SPLIT_MAX`] ([`splits`]).
    pub split_keys: u32,
    /// Uniform structs are padded to 16 bytes.
    pub _pad: [u32; 3],
}

impl AttentionDecodeParams {
    /// The parameters for `shape` with `split_keys` keys per split ([`splits`]), q dense
    /// (T, Hq · hd) rows.
    pub(crate) fn new(shape: &AttentionShape, split_keys: u32) -> Self {
        Self { q_stride: shape.heads * shape.head_dim, q_col: 0, shape: *shape, split_keys, _pad: [0; 3] }
    }
}

/// How a context is split for [`AttentionDecode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Splits {
    /// Keys per split: a multiple of 64 in 64..=[`SPLIT_MAX`]; a `Params` value, fixed at load.
    pub split_keys: u32,
    /// Splits of the longest row (past + T keys): the decode dispatch's third factor.
    pub splits: u32,
    /// Floats of scratch: splits · T · Hq · (hd + 2).
    pub scratch_floats: u64,
}

/// Splits for calls of `t` tokens over a context of up to `context` keys (past + T), `heads`
/// query heads of `head_dim`: the context cut into enough splits for ≥ 256 workgroups, a
/// split's keys rounded up to a multiple of 64 within 64..=[`SPLIT_MAX`]. T = 1 over 4096 keys:
/// 32 heads, 16 splits of 256 (512 workgroups); 8 heads, 32 splits of 128 (256). Size the scratch for the largest (context, T) a layer will see; a smaller
/// call reuses the same `split_keys` and buffer (its later splits simply do nothing).
pub fn splits(context: u32, heads: u32, t: u32, head_dim: u32) -> Splits {
    let context = context.max(1);
    let rows = (heads * t).max(1);
    let wanted = TARGET_GROUPS.div_ceil(rows);
    let split_keys = context.div_ceil(wanted).next_multiple_of(64).clamp(64, SPLIT_MAX);
    let splits = context.div_ceil(split_keys);
    let scratch_floats = u64::from(splits) * u64::from(rows) * u64::from(head_dim + 2);
    Splits { split_keys, splits, scratch_floats }
}

/// Decode workgroups for a call of `t` tokens with `splits` splits: one per (split, token,
/// head), on a 2-D grid.
pub(crate) fn groups(t: u32, heads: u32, splits: u32, max_per_dim: u32) -> (u32, u32, u32) {
    let (x, y) = grid_2d(splits * t * heads, max_per_dim);
    (x, y, 1)
}

/// The compiled decode and combine pipelines, with a one-shot [`AttentionDecode::run`].
pub struct AttentionDecode {
    decode: Kernel,
    combine: Kernel,
}

impl AttentionDecode {
    /// Compiles both pipelines.
    pub async fn new(ctx: &GpuContext) -> Result<Self> {
        Ok(Self {
            decode: Kernel::new(ctx, "attention_decode", SOURCE, BINDINGS).await?,
            combine: Kernel::new(
                ctx,
                "attention_combine",
                attention_combine::SOURCE,
                attention_combine::BINDINGS,
            )
            .await?,
        })
    }

    /// Uploads q (T, Hq · hd) and the cache buffer `kv` (holding positions 0 .. past + T),
    /// runs both passes for positions past .. past + T and reads o (T, Hq · hd) back.
    /// Allocates buffers on every call.
    pub async fn run(
        &self,
        ctx: &GpuContext,
        q: &[f32],
        kv: &[f32],
        shape: AttentionShape,
        past: u32,
    ) -> Result<Vec<f32>> {
        let up = upload(ctx, "attention_decode", q, kv, &shape, past)?;
        let (t, width) = (up.t, shape.heads * shape.head_dim);
        let split = splits(past + t, shape.heads, t, shape.head_dim);
        let decode = AttentionDecodeParams::new(&shape, split.split_keys);
        let combine = AttentionCombineParams {
            o_stride: width,
            o_col: 0,
            heads: shape.heads,
            head_dim: shape.head_dim,
            split_keys: split.split_keys,
            _pad: [0; 3],
        };
        let decode = ctx.uniform("attention_decode params", &decode);
        let combine = ctx.uniform("attention_combine params", &combine);
        let scratch = ctx.storage_zeroed_f32("attention_decode scratch", split.scratch_floats as usize)?;
        let o_buf = ctx.storage_zeroed_f32("attention_combine o", q.len())?;
        let decode_group = self.decode.bind(
            ctx,
            &[("step", &up.step), ("p", &decode), ("q", &up.q), ("kv", &up.kv), ("scratch", &scratch)],
        )?;
        let combine_group = self
            .combine
            .bind(ctx, &[("step", &up.step), ("p", &combine), ("scratch", &scratch), ("o", &o_buf)])?;
        let max_dim = ctx.summary().max_compute_workgroups_per_dimension;
        let groups = groups(t, shape.heads, split.splits, max_dim);
        self.decode.submit_once(ctx, &decode_group, groups, "running attention_decode").await?;
        let groups = attention_combine::groups(t, shape.heads, max_dim);
        self.combine.submit_once(ctx, &combine_group, groups, "running attention_combine").await?;
        ctx.read_f32(&o_buf, 0, q.len()).await
    }
}
