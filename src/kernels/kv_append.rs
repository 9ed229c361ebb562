//! Appending a call's keys and values to a layer's KV cache: the Rust side of
//! `shaders/kv_append.wgsl`.
//!
//! Rows (T, Hkv · hd) of K and V are read in place from the projection output (one fused
//! q ‖ k ‖ v buffer bound as both `k` and `v`, or two buffers) and written at positions
//! past .. past + T of the layer's cache ([`crate::kernels::attention`] has its layout). Rotary
//! embedding is not applied here: `rope` rotates k in place first, so the cache holds rotated
//! keys and this kernel stays a plain copy.

use crate::error::{Error, Result};
use crate::gpu::{Binding, GpuContext, Kernel, grid_2d};
use crate::kernels::attention::rows_of;
use crate::kernels::{PARAMS, STEP, Step};

/// WGSL source of the kernel.
pub(crate) const SOURCE: &str = include_str!("../../shaders/kv_append.wgsl");

/// The kernel's bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                       // KvAppendParams
    Binding::read(2, "k"),        // (T, k_stride): (Hkv, hd) at k_col
    Binding::read(3, "v"),        // (T, v_stride): (Hkv, hd) at v_col
    Binding::read_write(4, "kv"), // at kv_offset: K, V each (capacity, Hkv, hd)
];

/// Invocations per workgroup (`WG` in the shader): one per (token, column).
pub const WG: u32 = 64;

/// The kernel's uniform parameters (`Params` in the shader).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct KvAppendParams {
    /// Hkv · hd: floats of one token's keys (and of its values).
    pub width: u32,
    /// Floats between rows of k.
    pub k_stride: u32,
    /// Column of the first key in a row of k.
    pub k_col: u32,
    /// Floats between rows of v.
    pub v_stride: u32,
    /// Column of the first value in a row of v.
    pub v_col: u32,
    /// Floats from the start of `kv` to the layer's K region.
    pub kv_offset: u32,
    /// Positions the layer's cache holds.
    pub capacity: u32,
    /// Uniform structs are padded to 16 bytes.
    pub _pad: u32,
}

/// Workgroups for a call of `t` tokens (one invocation per copied key/value pair, 2-D grid).
pub(crate) fn groups(t: u32, width: u32, max_per_dim: u32) -> (u32, u32, u32) {
    let (x, y) = grid_2d((t * width).div_ceil(WG), max_per_dim);
    (x, y, 1)
}

/// The compiled kv_append pipeline, with a one-shot [`KvAppend::run`] for tests and tools.
pub struct KvAppend {
    kernel: Kernel,
}

impl KvAppend {
    /// Compiles the pipeline.
    pub async fn new(ctx: &GpuContext) -> Result<Self> {
        Ok(Self { kernel: Kernel::new(ctx, "kv_append", SOURCE, BINDINGS).await? })
    }

    /// Uploads `kv` (the whole cache buffer) and a fused projection output `qkv` (T rows of
    /// `k_stride` = `v_stride` floats, bound as both k and v), appends at `past` and reads kv
    /// back. Allocates buffers on every call.
    pub async fn run(
        &self,
        ctx: &GpuContext,
        qkv: &[f32],
        kv: &[f32],
        params: KvAppendParams,
        past: u32,
    ) -> Result<Vec<f32>> {
        let p = params;
        let t = rows_of("kv_append qkv (T, stride)", qkv.len(), p.k_stride as usize)?;
        let fits = p.k_stride == p.v_stride
            && p.k_col.max(p.v_col) + p.width <= p.k_stride
            && past + t <= p.capacity
            && p.kv_offset as usize + 2 * p.capacity as usize * p.width as usize <= kv.len();
        if !fits {
            return Err(Error::InvalidInput(format!(
                "kv_append: {t} rows at position {past} do not fit {p:?} with a kv buffer of {}",
                kv.len()
            )));
        }
        let step = ctx.uniform("kv_append step", &Step { t_len: t, past, ..Default::default() });
        let params = ctx.uniform("kv_append params", &p);
        let src = ctx.storage_from_f32("kv_append qkv", qkv)?;
        let kv_buf = ctx.storage_from_f32("kv_append kv", kv)?;
        let bind_group = self
            .kernel
            .bind(ctx, &[("step", &step), ("p", &params), ("k", &src), ("v", &src), ("kv", &kv_buf)])?;
        let groups = groups(t, p.width, ctx.summary().max_compute_workgroups_per_dimension);
        self.kernel.submit_once(ctx, &bind_group, groups, "running kv_append").await?;
        ctx.read_f32(&kv_buf, 0, kv.len()).await
    }
}
