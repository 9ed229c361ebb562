//! The top of the logits for top-k sampling on the host: the Rust side of
//! `shaders/top_k.wgsl` (two entry points: a workgroup per [`SLICE`] logits keeping each
//! slice's top, then one selecting over what they kept). The model dispatches both after a
//! sampled decode step (see `GpuModel::forward_top`); [`TopK::run`] is a one-shot for tests.

use crate::error::{Error, Result};
use crate::gpu::{Binding, GpuContext, Kernel, Readback};
use crate::kernels::{PARAMS, STEP, Step};
use crate::sampling::LogitsTop;

/// WGSL source of the kernel.
pub(crate) const SOURCE: &str = include_str!("../../shaders/top_k.wgsl");

/// The kernel's bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                           // TopKParams
    Binding::read(2, "logits"),       // (V): row 0 of the logits
    Binding::read_write(3, "top"),    // (4 + 2·capacity) u32: count, flag, keys; (index, bits) pairs
    Binding::read_write(4, "slices"), // (slices(V), SLICE_WORDS) u32: each slice's header and kept pairs
];

/// Logits per workgroup of the first entry point, `top_k_slices`.
pub const SLICE: usize = 2048;

/// u32 words the first entry point writes per slice: a 4-word header, room for the whole
/// slice as (index, bits) pairs.
pub const SLICE_WORDS: usize = 4 + 2 * SLICE;

/// Slices (workgroups of `top_k_slices`) of `vocab` logits.
pub(crate) fn slices(vocab: usize) -> usize {
    vocab.div_ceil(SLICE)
}

/// Workgroups of the second entry point, `top_k` (the first's: [`slices`]).
pub(crate) const GROUPS: (u32, u32, u32) = (1, 1, 1);

/// (index, value) pairs the model's `top` buffer holds: top-k sampling on the GPU serves
/// `top_k` up to this (and ties at the threshold up to it).
pub(crate) const CAPACITY: usize = 512;

/// u32 words of a `top` buffer with room for `capacity` pairs.
pub(crate) fn words(capacity: usize) -> usize {
    4 + 2 * capacity
}

/// The kernel's uniform parameters (`Params` in the shader).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct TopKParams {
    /// V: logits.
    pub vocab: u32,
    /// The rank of the threshold (1 ≤ k ≤ V).
    pub k: u32,
    /// Pairs the output has room for.
    pub capacity: u32,
    /// Uniform structs are padded to 16 bytes.
    pub _pad: u32,
}

/// The float a key (`order_key` in the shader) stands for.
fn from_key(key: u32) -> f32 {
    f32::from_bits(if key & 0x8000_0000 != 0 { key & 0x7fff_ffff } else { !key })
}

/// What the kernel found in the logits.
#[derive(Clone, Debug, PartialEq)]
pub enum Top {
    /// Their top (entries ascending by index).
    Found(LogitsTop),
    /// More logits tie at the threshold than the buffer holds: read them all.
    TooManyTies,
    /// A logit is NaN or ±Inf: the model overflowed (`Error::NonFiniteOutput`).
    NonFinite,
}

/// The kernel's output (`raw`: the `top` buffer) for `vocab` logits.
pub(crate) fn decode(raw: &[u32], vocab: usize) -> Top {
    let (found, non_finite, below) = (raw[0] as usize, raw[1] != 0, raw[2]);
    let pairs = &raw[4..];
    if non_finite {
        return Top::NonFinite;
    }
    if found > pairs.len() / 2 {
        return Top::TooManyTies;
    }
    let mut entries: Vec<(u32, f32)> =
        pairs[..2 * found].chunks_exact(2).map(|p| (p[0], f32::from_bits(p[1]))).collect();
    entries.sort_unstable_by_key(|e| e.0);
    Top::Found(LogitsTop { vocab, entries, below: (below != 0).then(|| from_key(below - 1)) })
}

/// The compiled pipelines (`top_k_slices`, then `top_k`), with a one-shot [`TopK::run`].
pub struct TopK {
    slices: Kernel,
    select: Kernel,
}

impl TopK {
    /// Compiles the pipelines (one layout: a bind group serves both).
    pub async fn new(ctx: &GpuContext) -> Result<Self> {
        let select = Kernel::new(ctx, "top_k", SOURCE, BINDINGS).await?;
        let slices = Kernel::with_layout(ctx, "top_k_slices", SOURCE, select.layout.clone()).await?;
        Ok(Self { slices, select })
    }

    /// Both pipelines, in dispatch order.
    pub(crate) fn kernels(&self) -> [&Kernel; 2] {
        [&self.slices, &self.select]
    }

    /// The top `k` of `logits` (see [`decode`]), with room for `capacity` pairs. Allocates
    /// buffers on every call.
    pub async fn run(&self, ctx: &GpuContext, logits: &[f32], k: usize, capacity: usize) -> Result<Top> {
        if k == 0 || k > logits.len() {
            return Err(Error::InvalidInput(format!("top-k of {} logits with k = {k}", logits.len())));
        }
        let step = ctx.uniform("top_k step", &Step::default());
        let params =
            TopKParams { vocab: logits.len() as u32, k: k as u32, capacity: capacity as u32, _pad: 0 };
        let params = ctx.uniform("top_k params", &params);
        let logits_buf = ctx.storage_from_f32("top_k logits", logits)?;
        let top = ctx.storage_zeroed_f32("top_k top", words(capacity))?;
        let slice_buf = ctx.storage_zeroed_f32("top_k slices", slices(logits.len()) * SLICE_WORDS)?;
        let bind_group = self.select.bind(
            ctx,
            &[
                ("step", &step),
                ("p", &params),
                ("logits", &logits_buf),
                ("top", &top),
                ("slices", &slice_buf),
            ],
        )?;
        let groups = (slices(logits.len()) as u32, 1, 1);
        self.slices.submit_once(ctx, &bind_group, groups, "running top_k_slices").await?;
        self.select.submit_once(ctx, &bind_group, GROUPS, "running top_k").await?;
        let readback = Readback::new(ctx, 4 * words(capacity) as u64, "top_k readback");
        let raw: Vec<u32> = readback.read(ctx, &top, 0, words(capacity)).await?;
        Ok(decode(&raw, logits.len()))
    }
}
