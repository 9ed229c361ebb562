//! webmamba: Mamba state-space language models on WebGPU, in the browser (wasm32) and natively.
//!
//! Layout (see ARCHITECTURE.md):
//! - [`gpu`]: device context, buffers, pipelines, readback;
//! - [`kernels`]: one wrapper per WGSL kernel in `shaders/`;
//! - `wasm` (wasm32 only): the thin JavaScript API over the native types;
//! - [`Error`]: the one error type.

pub mod error;
pub mod gpu;
pub mod kernels;
mod platform;
#[cfg(target_arch = "wasm32")]
pub mod wasm;

pub use error::{Error, Result};
pub use gpu::GpuContext;
