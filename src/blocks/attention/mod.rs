//! [`Attention`]: causal self-attention over a key/value cache — grouped-query (several query
//! heads share one key/value head), rotary position embeddings or none, the model's softmax
//! scale and multipliers. Its state is the cache: every past token's keys and values.

pub(crate) mod cpu;
pub(crate) mod gpu;
mod params;

pub use params::{Attention, QkNorm, Rope};

use crate::blocks::kind::{HostKind, HostLayer, HostParts};
use crate::blocks::{TakeTensor, Tensor, checked_counts, positive};
use crate::error::{Error, Result};
use crate::model::{Extent, Matrix, Part};

/// An attention block's weights in memory (the CPU backend's; shapes from [`Attention`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Weights {
    /// q_proj (Hq·hd, D), k_proj, v_proj (Hkv·hd, D), o_proj (D, Hq·hd).
    pub(crate) q: Matrix,
    pub(crate) k: Matrix,
    pub(crate) v: Matrix,
    pub(crate) o: Matrix,
    /// Their biases, when the config has them.
    pub(crate) q_bias: Option<Vec<f32>>,
    pub(crate) k_bias: Option<Vec<f32>>,
    pub(crate) v_bias: Option<Vec<f32>>,
    pub(crate) o_bias: Option<Vec<f32>>,
    /// The per-head norms' gains on q and k (hd each), where it has them.
    pub(crate) qk_norm: Option<(Vec<f32>, Vec<f32>)>,
}

impl Weights {
    /// Takes its tensors from `t`.
    pub(crate) fn take(p: &Attention, t: &mut dyn TakeTensor) -> Result<Self> {
        let mut bias = |part, present: bool| if present { t.vector(part).map(Some) } else { Ok(None) };
        let (q_bias, k_bias, v_bias) =
            (bias(Part::QBias, p.qkv_bias)?, bias(Part::KBias, p.qkv_bias)?, bias(Part::VBias, p.qkv_bias)?);
        let o_bias = bias(Part::OBias, p.o_bias)?;
        let qk_norm = match p.qk_norm {
            Some(_) => Some((t.vector(Part::QNorm)?, t.vector(Part::KNorm)?)),
            None => None,
        };
        Ok(Self {
            q: t.matrix(Part::Q)?,
            k: t.matrix(Part::K)?,
            v: t.matrix(Part::V)?,
            o: t.matrix(Part::O)?,
            q_bias,
            k_bias,
            v_bias,
            o_bias,
            qk_norm,
        })
    }
}

impl HostParts for Weights {
    /// The weight matrices.
    fn matrices(&self) -> Vec<&Matrix> {
        vec![&self.q, &self.k, &self.v, &self.o]
    }

    /// Elements of the biases.
    fn vector_len(&self) -> usize {
        [&self.q_bias, &self.k_bias, &self.v_bias, &self.o_bias]
            .iter()
            .map(|b| b.as_ref().map_or(0, Vec::len))
            .sum::<usize>()
            + self.qk_norm.as_ref().map_or(0, |(q, k)| q.len() + k.len())
    }
}

impl HostKind for Attention {
    type Weights = Weights;
    const NAME: &'static str = "attention";

    /// Its tensors (names under its prefix), for residual width `d` (D).
    fn tensors(&self, d: usize) -> Vec<Tensor> {
        self.tensors_io(d, d)
    }

    /// Its state: every past token's keys then values (2 · Hkv · hd per token).
    fn state_regions(&self) -> Vec<(&'static str, Extent)> {
        vec![("kv", Extent::PerToken(2usize.saturating_mul(self.kv_dim())))]
    }

    /// Fails unless the sizes are usable: positive, Hkv dividing Hq, a rotary width that is
    /// even and within the head, usable scales.
    fn validate(&self, d: usize) -> Result<()> {
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
        let eps = self.qk_norm.map_or(0.0, |n| n.eps);
        crate::blocks::usable_eps("norm_eps", eps)?;
        for (name, v) in [("the attention scale", self.scale), ("key_multiplier", self.key_scale)] {
            if !v.is_finite() {
                return Err(Error::Config(format!("{name} {v} is not usable")));
            }
        }
        checked_counts(&self.tensors(d), &self.state_regions())
    }

    fn attention(&self) -> Option<&Attention> {
        Some(self)
    }

    fn take(&self, t: &mut dyn TakeTensor) -> Result<Weights> {
        Weights::take(self, t)
    }

    fn forward(&self, w: &Weights, layer: HostLayer<'_>) -> Result<Vec<f32>> {
        let x = layer.normed();
        Ok(cpu::forward(self, w, layer.run(&x)))
    }
}
