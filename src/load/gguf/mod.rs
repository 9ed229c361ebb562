//! GGUF, llama.cpp's model file: one file (or llama.cpp's splits, `-00001-of-0000N.gguf`)
//! holding the config as metadata, the tokenizer and chat template, and every tensor in ggml's
//! types — the quantized files the Hub already hosts.
//!
//! - [`header`]: the header read from a prefix of the file, every size bounded ([`Limits`]);
//! - [`value`]: the metadata's values and typed accessors;
//! - [`types`]: ggml's tensor types and their blocks;
//! - [`dequant`]: blocks decoded to f32 as ggml decodes them;
//! - `arch`: llama.cpp's architectures mapped back to HF's config and tensor names (the
//!   hybrids: `arch_hybrid`, those with experts `arch_moe`);
//! - `open`: a file's header as the [`crate::model::Layout`] of its model;
//! - [`tokenizer`]: the tokenizer, chat template and special tokens as HF's files (`pretok`:
//!   llama.cpp's pre-tokenizer names; `chat_meta`: the chat template and generation defaults).

pub(crate) mod arch;
pub(crate) mod arch_common;
pub(crate) mod arch_hybrid;
mod arch_moe;
mod chat_meta;
pub mod dequant;
pub mod header;
pub(crate) mod open;
pub(crate) mod pretok;
pub mod tokenizer;
pub mod types;
pub mod value;

#[cfg(test)]
mod tests;

pub use header::{GgufHeader, Limits, Parsed, TensorInfo, parse};
pub use types::GgmlType;
pub use value::{Metadata, Value};
