//! The CPU reference implementation: [`CpuModel`] (forward pass), [`State`] (recurrent
//! state), the f32 [`ops`] and the matrix products ([`matmul`]) they use.

pub mod matmul;
mod model;
pub mod ops;
mod state;

pub use model::{CHUNK_TOKENS, CpuModel, Logits};
pub use state::{LayerState, State};
