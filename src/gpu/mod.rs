//! GPU plumbing shared by every kernel: the device context, buffer helpers, pipeline
//! construction and readback. Nothing here knows about Mamba.

mod buffers;
mod context;
mod pipeline;
mod readback;

pub use context::{AdapterSummary, GpuContext};
pub use pipeline::{Binding, Kernel, bind_group_layout, dispatch, grid_2d};
pub use readback::Readback;
