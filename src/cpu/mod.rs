//! The CPU reference implementation: [`CpuModel`] (forward pass), [`State`] (recurrent
//! state) and the f32 [`ops`] they use.

mod model;
pub mod ops;
mod state;

pub use model::{CHUNK_TOKENS, CpuModel, Logits};
pub use state::{LayerState, State};
