//! [`ModelWeights`]: every tensor of a Mamba checkpoint as f32, read by name with checked
//! shapes. Both tensor layouts are accepted:
//! - Hugging Face: `backbone.embeddings.weight`, `backbone.layers.N.{norm,mixer.*}`,
//!   `backbone.norm_f.weight`, optional `lm_head.weight`;
//! - original state-spaces: the same but `backbone.embedding.weight`.
//!
//! Shapes use the glossary of [`crate::model`]: D = d_model, E·D = d_inner, N = d_state,
//! K = d_conv, R = dt_rank, V = vocab.

use crate::error::{Error, Result};
use crate::model::config::Config;
use crate::model::tensors::{Scope, TensorStore};

/// The weights of one Mamba block (`backbone.layers.N`).
#[derive(Clone, Debug)]
pub struct LayerWeights {
    /// RMSNorm gain before the mixer. (D)
    pub norm: Vec<f32>,
    /// `in_proj.weight`: rows 0..E·D give x, rows E·D..2·E·D give the gate z. (2·E·D, D)
    pub in_proj: Vec<f32>,
    /// `in_proj.bias` when `use_bias`. (2·E·D)
    pub in_proj_bias: Option<Vec<f32>>,
    /// `conv1d.weight`, depthwise, stored (E·D, 1, K) in checkpoints. (E·D, K)
    pub conv: Vec<f32>,
    /// `conv1d.bias` when `use_conv_bias`. (E·D)
    pub conv_bias: Option<Vec<f32>>,
    /// `x_proj.weight`: rows give Δ (R), then B (N), then C (N). (R + 2N, E·D)
    pub x_proj: Vec<f32>,
    /// `dt_proj.weight`. (E·D, R)
    pub dt_proj: Vec<f32>,
    /// `dt_proj.bias` (always present). (E·D)
    pub dt_proj_bias: Vec<f32>,
    /// `A_log`; the SSM uses A = −exp(A_log). (E·D, N)
    pub a_log: Vec<f32>,
    /// `D`, the skip connection. (E·D)
    pub d: Vec<f32>,
    /// `out_proj.weight`. (D, E·D)
    pub out_proj: Vec<f32>,
    /// `out_proj.bias` when `use_bias`. (D)
    pub out_proj_bias: Option<Vec<f32>>,
}

/// All weights of a `MambaForCausalLM`, in f32.
#[derive(Clone, Debug)]
pub struct ModelWeights {
    /// The hyper-parameters the shapes were checked against.
    pub config: Config,
    /// Token embeddings. (V, D)
    pub embedding: Vec<f32>,
    /// The blocks, in order.
    pub layers: Vec<LayerWeights>,
    /// Final RMSNorm gain. (D)
    pub norm_f: Vec<f32>,
    /// Untied LM head, when the checkpoint has `lm_head.weight`; else the embedding is used.
    /// (V, D)
    pub lm_head: Option<Vec<f32>>,
    /// Identifies the model for exported states: blake3 over the config, every tensor's name,
    /// dtype and shape, and the first bytes of its data (so two fine-tunes of one architecture
    /// differ).
    pub fingerprint: [u8; 32],
}

impl ModelWeights {
    /// Reads every tensor `config` implies from `store`, checking names and shapes.
    pub fn load(config: &Config, store: &TensorStore) -> Result<Self> {
        let (d, di, n, k, r, v) = (
            config.d_model,
            config.d_inner,
            config.d_state,
            config.d_conv,
            config.dt_rank,
            config.vocab_size,
        );
        let backbone = store.scope("backbone");
        let embedding_name = if store.contains("backbone.embedding.weight") {
            "embedding" // original state-spaces layout
        } else {
            "embeddings" // Hugging Face layout
        };
        let embedding = backbone.pp(embedding_name).get("weight", &[v, d])?;
        let layers = (0..config.n_layer)
            .map(|i| load_layer(config, &backbone.pp("layers").pp(i), (d, di, n, k, r)))
            .collect::<Result<Vec<_>>>()?;
        let norm_f = backbone.pp("norm_f").get("weight", &[d])?;
        let lm_head = if store.contains("lm_head.weight") {
            Some(store.get_f32("lm_head.weight", &[v, d])?)
        } else if config.tie_embeddings {
            None
        } else {
            return Err(Error::MissingTensor {
                tensor: "lm_head.weight".into(),
                file: "the checkpoint (config says tie_word_embeddings = false)".into(),
            });
        };
        let fingerprint = store.fingerprint(&format!("{config:?}"));
        Ok(Self { config: config.clone(), embedding, layers, norm_f, lm_head, fingerprint })
    }

    /// The LM head matrix: `lm_head.weight` if present, else the tied embedding. (V, D)
    pub fn lm_head(&self) -> &[f32] {
        self.lm_head.as_deref().unwrap_or(&self.embedding)
    }
}

fn load_layer(
    c: &Config,
    layer: &Scope<'_>,
    (d, di, n, k, r): (usize, usize, usize, usize, usize),
) -> Result<LayerWeights> {
    let mixer = layer.pp("mixer");
    Ok(LayerWeights {
        norm: layer.pp("norm").get("weight", &[d])?,
        in_proj: mixer.pp("in_proj").get("weight", &[2 * di, d])?,
        in_proj_bias: mixer.pp("in_proj").get_if(c.use_bias, "bias", &[2 * di])?,
        conv: mixer.pp("conv1d").get("weight", &[di, 1, k])?,
        conv_bias: mixer.pp("conv1d").get_if(c.use_conv_bias, "bias", &[di])?,
        x_proj: mixer.pp("x_proj").get("weight", &[r + 2 * n, di])?,
        dt_proj: mixer.pp("dt_proj").get("weight", &[di, r])?,
        dt_proj_bias: mixer.pp("dt_proj").get("bias", &[di])?,
        a_log: mixer.get("A_log", &[di, n])?,
        d: mixer.get("D", &[di])?,
        out_proj: mixer.pp("out_proj").get("weight", &[d, di])?,
        out_proj_bias: mixer.pp("out_proj").get_if(c.use_bias, "bias", &[d])?,
    })
}
