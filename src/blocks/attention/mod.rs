//! [`Attention`]: causal self-attention over a key/value cache — grouped-query (several query
//! heads share one key/value head), rotary position embeddings or none, the model's softmax
//! scale and multipliers. Its state is the cache: every past token's keys and values.

pub(crate) mod cpu;
pub(crate) mod gpu;
mod params;

pub use params::{Attention, Rope};

use crate::blocks::kind::{HostKind, HostLayer};
use crate::blocks::{TakeTensor, Tensor};
use crate::error::Result;
use crate::model::{Extent, Matrix, Part};

/// An attention block's weights in memory (the CPU backend's; shapes from [`Attention`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Weights {
    /// q_proj (Hq·hd, D), k_proj, v_proj (Hkv·hd, D), o_proj (D, Hq·hd).
    pub q: Matrix,
    pub k: Matrix,
    pub v: Matrix,
    pub o: Matrix,
    /// Their biases, when the config has them.
    pub q_bias: Option<Vec<f32>>,
    pub k_bias: Option<Vec<f32>>,
    pub v_bias: Option<Vec<f32>>,
    pub o_bias: Option<Vec<f32>>,
}

impl Weights {
    /// Takes its tensors from `t`.
    pub fn take(p: &Attention, t: &mut dyn TakeTensor) -> Result<Self> {
        let mut bias = |part, present: bool| if present { t.vector(part).map(Some) } else { Ok(None) };
        let (q_bias, k_bias, v_bias) =
            (bias(Part::QBias, p.qkv_bias)?, bias(Part::KBias, p.qkv_bias)?, bias(Part::VBias, p.qkv_bias)?);
        let o_bias = bias(Part::OBias, p.o_bias)?;
        Ok(Self {
            q: t.matrix(Part::Q)?,
            k: t.matrix(Part::K)?,
            v: t.matrix(Part::V)?,
            o: t.matrix(Part::O)?,
            q_bias,
            k_bias,
            v_bias,
            o_bias,
        })
    }

    /// The weight matrices.
    pub fn matrices(&self) -> Vec<&Matrix> {
        vec![&self.q, &self.k, &self.v, &self.o]
    }

    /// Elements of the biases.
    pub fn vector_len(&self) -> usize {
        [&self.q_bias, &self.k_bias, &self.v_bias, &self.o_bias]
            .iter()
            .map(|b| b.as_ref().map_or(0, Vec::len))
            .sum()
    }
}

impl HostKind for Attention {
    type Weights = Weights;
    const NAME: &'static str = "attention";

    fn tensors(&self, d: usize) -> Vec<Tensor> {
        Attention::tensors(self, d)
    }

    fn state_regions(&self) -> Vec<(&'static str, Extent)> {
        Attention::state_regions(self)
    }

    fn validate(&self, d: usize) -> Result<()> {
        Attention::validate(self, d)
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

    fn matrices(w: &Weights) -> Vec<&Matrix> {
        w.matrices()
    }

    fn vector_len(w: &Weights) -> usize {
        w.vector_len()
    }
}
