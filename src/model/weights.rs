//! [`ModelWeights`]: every tensor of a Mamba checkpoint in memory, for the CPU backend. Weight
//! matrices stay in the dtype their file stores ([`Matrix`]: f32, f16 or bf16, converted row by
//! row as they are used); the small vectors (norms, biases, A_log, D, the conv kernel) are f32.
//! Built by streaming a checkpoint ([`crate::Checkpoint::weights`]); names and shapes are
//! checked by [`crate::model::Layout`] before any byte is read.
//!
//! Shapes use the glossary of [`crate::model`]: D = d_model, E·D = d_inner, N = d_state,
//! K = d_conv, R = dt_rank, V = vocab.

use crate::blocks::BlockWeights;
use crate::model::config::Config;
use crate::model::matrix::Matrix;

/// The weights of one block (`backbone.layers.N`): the RMSNorm before it, and its mixer's by
/// kind.
#[derive(Clone, Debug)]
pub struct LayerWeights {
    /// RMSNorm gain before the mixer. (D)
    pub norm: Vec<f32>,
    /// The mixer's weights.
    pub mixer: BlockWeights,
}

/// All weights of a `MambaForCausalLM` (or `FalconMambaForCausalLM`, `Mamba2ForCausalLM`).
#[derive(Clone, Debug)]
pub struct ModelWeights {
    /// The hyper-parameters the shapes were checked against.
    pub(crate) config: Config,
    /// Token embeddings. (V, D)
    pub embedding: Matrix,
    /// The blocks, in order.
    pub layers: Vec<LayerWeights>,
    /// Final RMSNorm gain. (D)
    pub(crate) norm_f: Vec<f32>,
    /// Untied LM head, when the checkpoint has `lm_head.weight`; else the embedding is used.
    /// (V, D)
    pub lm_head: Option<Matrix>,
    /// Identifies the model for exported states: blake3 over the config, every tensor's name,
    /// dtype and shape, and the first bytes of its data (so two fine-tunes of one architecture
    /// differ).
    pub fingerprint: [u8; 32],
}

impl LayerWeights {
    /// The weight matrices.
    pub(crate) fn matrices(&self) -> impl Iterator<Item = &Matrix> {
        self.mixer.matrices().into_iter()
    }

    /// Elements of the small f32 tensors (the norm, the mixer's biases, conv, A_log, D...).
    pub(crate) fn vector_len(&self) -> usize {
        self.norm.len() + self.mixer.vector_len()
    }
}

impl ModelWeights {
    /// The LM head matrix: `lm_head.weight` if present, else the tied embedding. (V, D)
    pub(crate) fn lm_head(&self) -> &Matrix {
        self.lm_head.as_ref().unwrap_or(&self.embedding)
    }

    /// Every weight matrix (the tied head once).
    fn matrices(&self) -> impl Iterator<Item = &Matrix> {
        std::iter::once(&self.embedding)
            .chain(self.lm_head.as_ref())
            .chain(self.layers.iter().flat_map(LayerWeights::matrices))
    }

    /// Elements of the small f32 tensors.
    fn vector_len(&self) -> usize {
        self.norm_f.len() + self.layers.iter().map(LayerWeights::vector_len).sum::<usize>()
    }

    /// Bytes the weights take in memory (matrices as stored, vectors as f32).
    pub fn bytes(&self) -> usize {
        self.matrices().map(Matrix::bytes).sum::<usize>() + 4 * self.vector_len()
    }

    /// Parameters in all (the tied head counted once).
    pub fn parameters(&self) -> usize {
        self.matrices().map(Matrix::len).sum::<usize>() + self.vector_len()
    }
}
