//! What the state store (`src/store/`) needs of an engine: how it computes, so a record is only
//! used where it gives the same numbers, and a checkpoint's fixed regions read back.

use crate::engine::{Engine, no_slot};
use crate::error::Result;
use crate::model::State;

impl Engine {
    /// How this engine computes: `"cpu <arch>"` (the reference; its sums differ between SIMD
    /// instruction sets), or the GPU's adapter, weight and cache formats and matmul kernels.
    pub(crate) fn numerics(&self) -> String {
        match self {
            Engine::Cpu { .. } => format!("cpu {}", std::env::consts::ARCH),
            Engine::Gpu(m) => m.numerics().to_owned(),
        }
    }

    /// The fixed regions (conv windows, SSM states) of checkpoint `slot`, in
    /// [`State::to_flat`]'s order: a stored checkpoint's key/value rows come from the pages
    /// and the live caches instead.
    pub(crate) async fn read_fixed(&self, slot: usize) -> Result<Vec<f32>> {
        match self {
            Engine::Cpu { model, slots, .. } => {
                let saved = slots.get(slot).and_then(Option::as_ref).ok_or_else(|| no_slot(slot))?;
                Ok(saved.state.to_flat()[..State::floats(model.config())].to_vec())
            }
            Engine::Gpu(m) => m.read_slot_fixed(slot).await,
        }
    }
}
