//! Per-dispatch GPU timing, for benchmarks: between [`start_dispatch_timing`] and
//! [`finish_dispatch_timing`], every dispatch this thread records (`gpu::dispatch`,
//! `gpu::dispatch_indirect`) is bracketed by two timestamps written inside its compute pass,
//! with its kernel's name. Read
//! back, they give each dispatch's time on the GPU and the gap before it (from the previous
//! dispatch's end stamp). A stamp latches when the work before it has completed (Vulkan
//! writes at the bottom of the pipe), and wgpu records the barrier a dispatch needs right
//! before the dispatch, after its start stamp: a dispatch's time includes the wait for the one
//! it depends on and its launch, and the gap is what lies outside both (near zero on Vulkan).
//! Stamps are for one device: time dispatches on `ctx`'s only. Needs wgpu's
//! `TIMESTAMP_QUERY_INSIDE_PASSES` (native Vulkan, Metal, DX12; not WebGPU). Outside a timing
//! window a dispatch pays one thread-local lookup. Only what is submitted before the window
//! closes is timed: a greedy batch records the next batch ahead (`gpu_model/greedy.rs`), whose
//! stamps would land in this window unwritten — time the per-token path, as the suite does.

use std::cell::RefCell;

use crate::error::{Error, Result};
use crate::gpu::context::GpuContext;
use crate::gpu::readback::Readback;

/// Most dispatches one timing window stamps (two queries each; wgpu's query-set limit is 4,096).
pub const MAX_TIMED_DISPATCHES: u32 = 2048;

/// What a timing window has recorded so far.
struct Window {
    set: wgpu::QuerySet, // 2 · MAX_TIMED_DISPATCHES timestamps: [start, end] per dispatch
    names: Vec<&'static str>,
    /// Dispatches recorded past the capacity (not stamped).
    missed: u64,
}

thread_local! {
    static WINDOW: RefCell<Option<Window>> = const { RefCell::new(None) };
}

/// One timed dispatch: its kernel and its start and end on the GPU's clock, in nanoseconds
/// from the window's first stamp.
#[derive(Clone, Debug, PartialEq)]
pub struct DispatchTime {
    pub kernel: &'static str,
    pub start_ns: f64,
    pub end_ns: f64,
}

/// Whether `ctx`'s device can stamp inside compute passes.
pub fn can_time_dispatches(ctx: &GpuContext) -> bool {
    ctx.device().features().contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES)
}

/// Starts stamping this thread's dispatches on `ctx` (a window already open is replaced). An
/// [`Error::Gpu`] where the device cannot stamp inside passes.
pub fn start_dispatch_timing(ctx: &GpuContext) -> Result<()> {
    if !can_time_dispatches(ctx) {
        return Err(Error::Gpu {
            context: "timing each dispatch".into(),
            message: format!("{} offers no timestamp queries inside compute passes", ctx.summary().name),
        });
    }
    let set = ctx.device().create_query_set(&wgpu::QuerySetDescriptor {
        label: Some("dispatch timestamps"),
        ty: wgpu::QueryType::Timestamp,
        count: 2 * MAX_TIMED_DISPATCHES,
    });
    WINDOW.with(|w| *w.borrow_mut() = Some(Window { set, names: Vec::new(), missed: 0 }));
    Ok(())
}

/// Writes the start stamp of a dispatch of `kernel` when a window is open and has room; true
/// when it did (the caller then writes the end with [`stamp_end`]).
pub(crate) fn stamp_start(pass: &mut wgpu::ComputePass<'_>, kernel: &'static str) -> bool {
    WINDOW.with(|w| {
        let mut w = w.borrow_mut();
        let Some(w) = w.as_mut() else { return false };
        let i = w.names.len() as u32;
        if i >= MAX_TIMED_DISPATCHES {
            w.missed += 1;
            return false;
        }
        pass.write_timestamp(&w.set, 2 * i);
        w.names.push(kernel);
        true
    })
}

/// Writes the end stamp of the dispatch [`stamp_start`] began.
pub(crate) fn stamp_end(pass: &mut wgpu::ComputePass<'_>) {
    WINDOW.with(|w| {
        if let Some(w) = w.borrow().as_ref() {
            pass.write_timestamp(&w.set, 2 * w.names.len() as u32 - 1);
        }
    });
}

/// Closes this thread's window and reads its stamps back (everything submitted before runs
/// first): the dispatches in the order they were recorded. An [`Error::InvalidInput`] when
/// none was open, or when dispatches were recorded past [`MAX_TIMED_DISPATCHES`].
pub async fn finish_dispatch_timing(ctx: &GpuContext) -> Result<Vec<DispatchTime>> {
    let Some(w) = WINDOW.with(|w| w.borrow_mut().take()) else {
        return Err(Error::InvalidInput("no dispatch timing window is open".into()));
    };
    if w.missed > 0 {
        return Err(Error::InvalidInput(format!(
            "{} dispatches were recorded past the {MAX_TIMED_DISPATCHES} a timing window stamps",
            w.missed
        )));
    }
    let n = 2 * w.names.len() as u32;
    if n == 0 {
        return Ok(Vec::new());
    }
    let bytes = u64::from(n) * 8;
    let resolved = ctx.create_buffer(
        "dispatch timestamps",
        bytes,
        wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
    );
    let mut encoder = ctx.encoder("resolve dispatch timestamps");
    encoder.resolve_query_set(&w.set, 0..n, &resolved, 0);
    ctx.queue().submit([encoder.finish()]);
    let raw: Vec<u32> =
        Readback::new(ctx, bytes, "dispatch timestamps").read(ctx, &resolved, 0, 2 * n as usize).await?;
    let ticks: Vec<u64> = raw.chunks_exact(2).map(|p| u64::from(p[0]) | (u64::from(p[1]) << 32)).collect();
    let period = f64::from(ctx.queue().get_timestamp_period()); // ns per tick
    let origin = ticks[0];
    let ns = |t: u64| t.saturating_sub(origin) as f64 * period;
    Ok(w.names
        .iter()
        .zip(ticks.chunks_exact(2))
        .map(|(&kernel, t)| DispatchTime { kernel, start_ns: ns(t[0]), end_ns: ns(t[1]) })
        .collect())
}
