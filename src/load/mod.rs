//! Loading a checkpoint's weights by streaming: headers first (everything is checked and every
//! buffer reserved before a weight byte is read), then each file's data section in bounded
//! pieces, each converted and stored before the next is read. One path for every source (bytes
//! in memory, a folder, and in the browser `fetch` streams, the offline cache or picked files)
//! and every destination (GPU buffers in f32/f16/int8, or memory for the CPU backend).
//!
//! - [`spans`]: the bytes of each file a load reads (long runs of unused tensors are skipped);
//! - [`stream`]: bytes → pieces of whole rows of each tensor → a [`stream::Sink`];
//! - [`gguf`]: llama.cpp's GGUF files (header, metadata, ggml's block types);
//! - [`files`]: the synchronous sources (memory, a folder);
//! - [`host`]: the CPU backend's sink;
//! - [`integrity`]: digests of the files read (SRI, the Hub's), checked as the bytes stream;
//! - [`progress`]: progress events (download / upload / compile) and warnings;
//! - [`json_shape`]: a small JSON file's size in values, counted before it is built.
//!
//! The GPU's sink is `crate::gpu_model::upload`; the browser's sources are in `crate::wasm`.

pub(crate) mod files;
pub mod gguf;
pub(crate) mod host;
pub mod integrity;
pub mod json_shape;
pub(crate) mod progress;
pub(crate) mod spans;
pub(crate) mod stream;

pub use files::{MAX_JSON_BYTES, MAX_TOKENIZER_BYTES};
pub use progress::{Phase, Progress, Reporter};
