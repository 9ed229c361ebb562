//! [`Attention`]'s hyper-parameters, its tensors, its state and its checks — apart from its
//! plug-in implementation (`mod.rs`), since what a block kind may ask of a kind
//! ([`crate::blocks::HostKind::attention`]) is this type.

use crate::blocks::{Tensor, checked_counts, positive};
use crate::error::{Error, Result};
use crate::model::{Extent, Part};

/// Rotary position embedding (HF's default rope type, `rotate_half` style): the first `dims`
/// channels of every query and key head are rotated by position · θ^(−2i/dims).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rope {
    /// θ (`rope_theta`).
    pub theta: f32,
    /// Channels rotated per head (head_dim × `partial_rotary_factor`; even).
    pub dims: usize,
}

/// A causal grouped-query attention block (`q_proj`, `k_proj`, `v_proj`, `o_proj`).
#[derive(Clone, Debug, PartialEq)]
pub struct Attention {
    /// Hq: query heads (`num_attention_heads`).
    pub n_heads: usize,
    /// Hkv: key/value heads (`num_key_value_heads`); divides Hq.
    pub n_kv_heads: usize,
    /// hd: channels per head (`head_dim`, else hidden_size / Hq).
    pub head_dim: usize,
    /// Whether q/k/v_proj have biases.
    pub qkv_bias: bool,
    /// Whether o_proj has a bias.
    pub o_bias: bool,
    /// Rotary embedding, or none (NoPE: Granite-H's "nope", Jamba, Nemotron-H).
    pub rope: Option<Rope>,
    /// The softmax's scale on q·k (1/√hd, or Granite's `attention_multiplier`).
    pub scale: f32,
    /// Multiplies the keys (Falcon-H1's `key_multiplier`; 1 elsewhere).
    pub key_scale: f32,
}

impl Attention {
    /// Width of the queries (Hq · hd).
    pub fn q_dim(&self) -> usize {
        self.n_heads.saturating_mul(self.head_dim)
    }

    /// Width of the keys and of the values (Hkv · hd).
    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads.saturating_mul(self.head_dim)
    }

    /// Its tensors (names under its prefix), for residual width `d` (D).
    pub fn tensors(&self, d: usize) -> Vec<Tensor> {
        self.tensors_io(d, d)
    }

    /// Its tensors for inputs of width `d` and outputs of width `out` (Zamba2's shared block
    /// reads hidden ‖ embeddings, 2·D, and writes D).
    pub fn tensors_io(&self, d: usize, out: usize) -> Vec<Tensor> {
        let (q, kv) = (self.q_dim(), self.kv_dim());
        let t = Tensor::new;
        vec![
            t(Part::Q, "q_proj.weight", vec![q, d], true),
            t(Part::QBias, "q_proj.bias", vec![q], self.qkv_bias),
            t(Part::K, "k_proj.weight", vec![kv, d], true),
            t(Part::KBias, "k_proj.bias", vec![kv], self.qkv_bias),
            t(Part::V, "v_proj.weight", vec![kv, d], true),
            t(Part::VBias, "v_proj.bias", vec![kv], self.qkv_bias),
            t(Part::O, "o_proj.weight", vec![out, q], true),
            t(Part::OBias, "o_proj.bias", vec![out], self.o_bias),
        ]
    }

    /// Its state: every past token's keys then values (2 · Hkv · hd per token).
    pub fn state_regions(&self) -> Vec<(&'static str, Extent)> {
        vec![("kv", Extent::PerToken(2usize.saturating_mul(self.kv_dim())))]
    }

    /// Fails unless the sizes are usable: positive, Hkv dividing Hq, a rotary width that is
    /// even and within the head, usable scales.
    pub fn validate(&self, d: usize) -> Result<()> {
        positive(&[
            ("num_attention_heads", self.n_heads),
            ("num_key_value_heads", self.n_kv_heads),
            ("head_dim", self.head_dim),
        ])?;
        if !self.n_heads.is_multiple_of(self.n_kv_heads) {
            return Err(Error::Config(format!(
                "num_key_value_heads {} does not divide num_attention_heads {}",
                self.n_kv_heads, self.n_heads
            )));
        }
        if let Some(rope) = self.rope {
            if rope.dims == 0 || !rope.dims.is_multiple_of(2) || rope.dims > self.head_dim {
                return Err(Error::Config(format!(
                    "rotary width {} (head_dim × partial_rotary_factor) must be even and within head_dim {}",
                    rope.dims, self.head_dim
                )));
            }
            if !(rope.theta.is_finite() && rope.theta > 0.0) {
                return Err(Error::Config(format!("rope_theta {} is not usable", rope.theta)));
            }
        }
        for (name, v) in [("the attention scale", self.scale), ("key_multiplier", self.key_scale)] {
            if !v.is_finite() {
                return Err(Error::Config(format!("{name} {v} is not usable")));
            }
        }
        checked_counts(&self.tensors(d), &self.state_regions())
    }
}
