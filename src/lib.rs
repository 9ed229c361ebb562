//! webmamba: Mamba state-space language models and the hybrids built on them, on WebGPU, in the
//! browser (wasm32) and natively.
//!
//! Layout (see ARCHITECTURE.md):
//! - [`blocks`]: the block kinds a model stacks (Mamba-1, Mamba-2, attention, MLP, mixture of
//!   experts, Falcon-H1's parallel block, Zamba2's shared block), each in `blocks/<kind>/` (its
//!   `HostKind` and `GpuKind`), each kind named once in `blocks/registry.rs`;
//! - [`model`]: config, checkpoint headers and layout, weights in memory, the recurrent state
//!   (+ the symbol glossary);
//! - [`load`]: streaming a checkpoint's weights into a backend, with progress;
//! - [`cpu`]: the reference forward pass;
//! - [`tokenizer`], [`sampling`]: text in, token ids out;
//! - [`gpu`]: device context, buffers, pipelines, readback;
//! - `gpu_kit`: the GPU toolkit the kinds and the forward pass build with (a floor below both);
//! - [`gpu_model`]: the forward pass on the GPU;
//! - [`kernels`]: one wrapper per WGSL kernel in `shaders/`;
//! - [`engine`]: one model on one backend behind one interface, with its checkpoint slots;
//! - [`cache`]: which recurrent states are kept, under which keys ([`cache::StateCache`]);
//! - [`store`]: checkpoints and key/value pages that outlive the page or the process;
//! - [`session`]: the runtime (one engine, one cache, many sessions) and text generation;
//! - [`chat`]: chat templates, end-of-turn tokens, structured output and tool calls;
//! - [`perplexity`]: llama.cpp's perplexity convention over a text;
//! - `wasm` (wasm32 only): the thin JavaScript API over the native types;
//! - [`Error`]: the one error type.

// The docs are written for contributors too: they link crate-internal items, which
// `cargo doc --document-private-items` renders.
#![allow(rustdoc::private_intra_doc_links)]

pub mod blocks;
pub mod cache;
pub mod chat;
pub mod cpu;
pub mod engine;
pub mod error;
pub mod gpu;
mod gpu_kit;
pub mod gpu_model;
pub mod kernels;
pub mod load;
pub mod model;
pub mod perplexity;
mod platform;
pub mod sampling;
pub mod session;
pub mod store;
pub mod tokenizer;
#[cfg(target_arch = "wasm32")]
pub mod wasm;

pub use cache::{CacheConfig, Retention};
pub use cpu::CpuModel;
pub use engine::Engine;
pub use error::{Error, Result};
pub use gpu::GpuContext;
pub use gpu_model::{ConversionStats, GpuMemory, GpuModel, GpuModelOptions, KvFormat, Matmul, WeightFormat};
pub use load::{Phase, Progress, Reporter};
pub use model::{Arch, Checkpoint, Config, Logits, Matrix, ModelWeights, State};
pub use session::{GREEDY_BATCH, GenerateOptions, Outcome, Runtime, SessionId, SessionStats};
pub use tokenizer::Tokenizer;
