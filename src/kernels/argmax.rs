//! Greedy picking on the GPU: the Rust side of `shaders/argmax.wgsl` (two entry points: a
//! workgroup per [`SLICE`] logits, then one reducing the slices). The model dispatches both
//! after each greedy decode step (see `GpuModel::greedy`); [`Argmax::run`] is a one-shot for
//! tests.

use crate::error::{Error, Result};
use crate::gpu::{Binding, GpuContext, Kernel, Readback};
use crate::kernels::{PARAMS, STEP, Step};

/// WGSL source of the kernel.
pub(crate) const SOURCE: &str = include_str!("../../shaders/argmax.wgsl");

/// The kernel's bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                           // ArgmaxParams
    Binding::read(2, "logits"),       // (V): row 0 of the logits
    Binding::read_write(3, "ids"),    // (T_max) u32: the pick goes to ids[0]
    Binding::read_write(4, "picks"),  // (1 + capacity) u32: count, then the picks
    Binding::read_write(5, "slices"), // (slices(V), SLICE_WORDS) u32: each slice's best
];

/// Logits per workgroup of the first entry point, `argmax_slices`.
pub const SLICE: usize = 2048;

/// u32 words the first entry point writes per slice (value bits, index, non-finite seen).
pub(crate) const SLICE_WORDS: usize = 3;

/// Slices (workgroups of `argmax_slices`) of `vocab` logits.
pub(crate) fn slices(vocab: usize) -> usize {
    vocab.div_ceil(SLICE)
}

/// The pick when the logits held a NaN or ±Inf (the model overflowed).
pub const NON_FINITE_PICK: u32 = 0xffff_fffe;

/// Workgroups of the second entry point, `argmax` (the first's: [`slices`]).
pub(crate) const GROUPS: (u32, u32, u32) = (1, 1, 1);

/// The kernel's uniform parameters (`Params` in the shader).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ArgmaxParams {
    /// V: logits to compare.
    pub vocab: u32,
    /// Picks the list has room for.
    pub capacity: u32,
    /// Uniform structs are padded to 16 bytes.
    pub _pad: [u32; 2],
}

/// The compiled pipelines (`argmax_slices`, then `argmax`), with a one-shot [`Argmax::run`].
pub struct Argmax {
    slices: Kernel,
    pick: Kernel,
}

impl Argmax {
    /// Compiles the pipelines (one layout: a bind group serves both).
    pub async fn new(ctx: &GpuContext) -> Result<Self> {
        let pick = Kernel::new(ctx, "argmax", SOURCE, BINDINGS).await?;
        let slices = Kernel::with_layout(ctx, "argmax_slices", SOURCE, pick.layout.clone()).await?;
        Ok(Self { slices, pick })
    }

    /// Both pipelines, in dispatch order.
    pub(crate) fn kernels(&self) -> [&Kernel; 2] {
        [&self.slices, &self.pick]
    }

    /// The index of the largest of `logits` (the first on ties), or [`NON_FINITE_PICK`]. Allocates
    /// buffers on every call.
    pub async fn run(&self, ctx: &GpuContext, logits: &[f32]) -> Result<u32> {
        if logits.is_empty() {
            return Err(Error::InvalidInput("argmax of no logits".into()));
        }
        let step = ctx.uniform("argmax step", &Step::default());
        let params = ArgmaxParams { vocab: logits.len() as u32, capacity: 1, _pad: [0; 2] };
        let params = ctx.uniform("argmax params", &params);
        let logits_buf = ctx.storage_from_f32("argmax logits", logits)?;
        let ids = ctx.storage_zeroed_f32("argmax ids", 1)?;
        let picks = ctx.storage_zeroed_f32("argmax picks", 2)?;
        let slice_buf = ctx.storage_zeroed_f32("argmax slices", slices(logits.len()) * SLICE_WORDS)?;
        let bind_group = self.pick.bind(
            ctx,
            &[
                ("step", &step),
                ("p", &params),
                ("logits", &logits_buf),
                ("ids", &ids),
                ("picks", &picks),
                ("slices", &slice_buf),
            ],
        )?;
        let groups = (slices(logits.len()) as u32, 1, 1);
        self.slices.submit_once(ctx, &bind_group, groups, "running argmax_slices").await?;
        self.pick.submit_once(ctx, &bind_group, GROUPS, "running argmax").await?;
        let readback = Readback::new(ctx, 8, "argmax readback");
        let list: Vec<u32> = readback.read(ctx, &picks, 0, 2).await?;
        let id: Vec<u32> = readback.read(ctx, &ids, 0, 1).await?;
        if list[0] != 1 || list[1] != id[0] {
            return Err(Error::Readback(format!("argmax wrote picks {list:?} and id {}", id[0])));
        }
        Ok(id[0])
    }
}
