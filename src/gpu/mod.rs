//! GPU plumbing shared by every kernel: the device context, buffer helpers, pipeline
//! construction and readback. Nothing here knows about Mamba.

mod buffers;
mod cache;
mod context;
mod pipeline;
mod readback;

pub use context::{AdapterSummary, GpuContext};
pub(crate) use pipeline::count_dispatch;
pub use pipeline::{
    Access, Binding, Kernel, KernelSpec, Layout, dispatch, dispatches_recorded, grid_2d, resolve,
};
pub use readback::Readback;
