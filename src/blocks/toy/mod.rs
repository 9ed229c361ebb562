//! [`Toy`]: the tests' block kind, `h ← h + W · rms_norm(h)` with one (D, D) matrix and no
//! state — the smallest plug-in there is, added as ARCHITECTURE.md's "Adding a block kind" says
//! (this folder, one line in the registry, one `mod` line in `blocks/mod.rs`) to show that
//! nothing else has to know it: the orchestrators run it on the CPU and the GPU (`tests.rs`).

mod gpu;
// Natively: it opens a GPU context and blocks on it (pollster).
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;

use crate::blocks::kind::{HostKind, HostLayer, HostParts};
use crate::blocks::{TakeTensor, Tensor, checked_counts};
use crate::cpu::matmul::linear;
use crate::error::Result;
use crate::model::{Extent, Matrix, Part};

/// The toy kind (no hyper-parameters of its own: its matrix is D × D).
#[derive(Clone, Debug, PartialEq)]
pub struct Toy;

/// Its weights: W (D, D).
#[derive(Clone, Debug, PartialEq)]
pub struct Weights {
    pub(crate) w: Matrix,
}

impl HostKind for Toy {
    type Weights = Weights;
    const NAME: &'static str = "toy";

    fn tensors(&self, d: usize) -> Vec<Tensor> {
        vec![Tensor::new(Part::Linear, "weight", vec![d, d], true)]
    }

    fn state_regions(&self) -> Vec<(&'static str, Extent)> {
        Vec::new()
    }

    fn validate(&self, d: usize) -> Result<()> {
        checked_counts(&self.tensors(d), &[])
    }

    fn take(&self, t: &mut dyn TakeTensor) -> Result<Weights> {
        Ok(Weights { w: t.matrix(Part::Linear)? })
    }

    fn forward(&self, w: &Weights, layer: HostLayer<'_>) -> Result<Vec<f32>> {
        Ok(linear(&layer.normed(), &w.w, None))
    }
}

impl HostParts for Weights {
    fn matrices(&self) -> Vec<&Matrix> {
        vec![&self.w]
    }

    fn vector_len(&self) -> usize {
        0
    }
}
