//! GPU plumbing shared by every kernel: the device context, buffer helpers, pipeline
//! construction and readback. Nothing here knows about Mamba.

mod buffers;
mod cache;
mod context;
mod pipeline;
mod profile;
mod readback;

pub use context::{AdapterSummary, GpuContext};
pub(crate) use pipeline::dispatch_indirect;
pub use pipeline::{
    Access, Binding, Kernel, KernelSpec, Layout, dispatch, dispatches_recorded, grid_2d, resolve,
};
pub use profile::{
    DispatchTime, MAX_TIMED_DISPATCHES, can_time_dispatches, finish_dispatch_timing, start_dispatch_timing,
};
pub(crate) use readback::Readback;
