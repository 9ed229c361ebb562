//! The GPU toolkit: what the block kinds (`src/blocks/`) and the GPU forward pass
//! (`src/gpu_model/`) build with — a floor below both, naming neither
//! (`tests/import_cycles.rs`): kernel calls and their dispatch sizes (`call`), matrices split
//! to fit a binding (`split`), weight formats (`format`; a GGUF file's blocks: `ggml`), the compiled pipelines (`pipelines`),
//! the scratch and state buffers (`activations`), the key/value caches (`kv`) and the load's
//! options (`options`).

pub(crate) mod activations;
pub(crate) mod call;
pub(crate) mod format;
pub(crate) mod ggml;
pub(crate) mod kv;
pub(crate) mod options;
pub(crate) mod pipelines;
pub(crate) mod split;

pub use format::{ConversionStats, WeightFormat};
pub use kv::{KvFormat, PAGE as KV_PAGE};
pub use options::{GpuMemory, GpuModelOptions, Matmul};
