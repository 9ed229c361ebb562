//! [`ModelWeights`]: every tensor of a Mamba checkpoint in memory, for the CPU backend. Weight
//! matrices stay in the dtype their file stores ([`Matrix`]: f32, f16 or bf16, converted row by
//! row as they are used); the small vectors (norms, biases, A_log, D, the conv kernel) are f32.
//! Built by streaming a checkpoint ([`crate::Checkpoint::weights`]); names and shapes are
//! checked by [`crate::model::Layout`] before any byte is read.
//!
//! Shapes use the glossary of [`crate::model`]: D = d_model, E·D = d_inner, N = d_state,
//! K = d_conv, R = dt_rank, V = vocab.

use crate::model::config::Config;
use crate::model::matrix::Matrix;

/// The weights of one Mamba block (`backbone.layers.N`). Shapes are Mamba-1's; Mamba-2's
/// (H heads, conv_dim = E·D + 2·G·N) are given where they differ.
#[derive(Clone, Debug)]
pub struct LayerWeights {
    /// RMSNorm gain before the mixer. (D)
    pub norm: Vec<f32>,
    /// `in_proj.weight`: rows 0..E·D give x, rows E·D..2·E·D give the gate z. (2·E·D, D)
    /// Mamba-2: z (E·D) ‖ x (E·D) ‖ B (G·N) ‖ C (G·N) ‖ Δ (H). (E·D + conv_dim + H, D)
    pub in_proj: Matrix,
    /// `in_proj.bias` when `use_bias`. (2·E·D); Mamba-2 (E·D + conv_dim + H)
    pub in_proj_bias: Option<Vec<f32>>,
    /// `conv1d.weight`, depthwise, stored (E·D, 1, K) in checkpoints. (E·D, K); Mamba-2
    /// (conv_dim, K)
    pub conv: Vec<f32>,
    /// `conv1d.bias` when `use_conv_bias`. (E·D); Mamba-2 (conv_dim)
    pub conv_bias: Option<Vec<f32>>,
    /// `x_proj.weight`: rows give Δ (R), then B (N), then C (N). (R + 2N, E·D); not in Mamba-2
    pub x_proj: Option<Matrix>,
    /// `dt_proj.weight`. (E·D, R); not in Mamba-2
    pub dt_proj: Option<Matrix>,
    /// Δ's bias: `dt_proj.bias` (E·D); Mamba-2 `dt_bias` (H).
    pub dt_bias: Vec<f32>,
    /// `A_log`; the SSM uses A = −exp(A_log). (E·D, N); Mamba-2 (H)
    pub a_log: Vec<f32>,
    /// `D`, the skip connection. (E·D); Mamba-2 (H)
    pub d: Vec<f32>,
    /// Mamba-2: `norm.weight`, the gain of the gated RMSNorm before out_proj. (E·D)
    pub gated_norm: Option<Vec<f32>>,
    /// `out_proj.weight`. (D, E·D)
    pub out_proj: Matrix,
    /// `out_proj.bias` when `use_bias`. (D)
    pub out_proj_bias: Option<Vec<f32>>,
}

/// All weights of a `MambaForCausalLM` (or `FalconMambaForCausalLM`, `Mamba2ForCausalLM`).
#[derive(Clone, Debug)]
pub struct ModelWeights {
    /// The hyper-parameters the shapes were checked against.
    pub config: Config,
    /// Token embeddings. (V, D)
    pub embedding: Matrix,
    /// The blocks, in order.
    pub layers: Vec<LayerWeights>,
    /// Final RMSNorm gain. (D)
    pub norm_f: Vec<f32>,
    /// Untied LM head, when the checkpoint has `lm_head.weight`; else the embedding is used.
    /// (V, D)
    pub lm_head: Option<Matrix>,
    /// Identifies the model for exported states: blake3 over the config, every tensor's name,
    /// dtype and shape, and the first bytes of its data (so two fine-tunes of one architecture
    /// differ).
    pub fingerprint: [u8; 32],
}

impl LayerWeights {
    /// The weight matrices: in_proj, x_proj, dt_proj (Mamba-1), out_proj.
    pub fn matrices(&self) -> impl Iterator<Item = &Matrix> {
        [Some(&self.in_proj), self.x_proj.as_ref(), self.dt_proj.as_ref(), Some(&self.out_proj)]
            .into_iter()
            .flatten()
    }

    /// Elements of the small f32 tensors (norm, biases, conv, A_log, D).
    pub fn vector_len(&self) -> usize {
        let opt = |v: &Option<Vec<f32>>| v.as_ref().map_or(0, Vec::len);
        self.norm.len()
            + opt(&self.in_proj_bias)
            + self.conv.len()
            + opt(&self.conv_bias)
            + self.dt_bias.len()
            + self.a_log.len()
            + self.d.len()
            + opt(&self.gated_norm)
            + opt(&self.out_proj_bias)
    }
}

impl ModelWeights {
    /// The LM head matrix: `lm_head.weight` if present, else the tied embedding. (V, D)
    pub fn lm_head(&self) -> &Matrix {
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
