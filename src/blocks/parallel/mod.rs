//! [`Parallel`]: Falcon-H1's layer mixer — attention and a Mamba-2 mixer over the same normed
//! input, each with its input and output multipliers, their outputs summed.

pub(crate) mod cpu;
pub(crate) mod gpu;

use crate::blocks::attention::{self, Attention};
use crate::blocks::kind::{HostKind, HostLayer, HostParts};
use crate::blocks::mamba2::{self, Mamba2};
use crate::blocks::ssm::SsmWeights;
use crate::blocks::{TakeTensor, Tensor, under};
use crate::error::{Error, Result};
use crate::model::{Extent, Matrix};

/// Attention ∥ Mamba-2 (`self_attn.`, `mamba.`).
#[derive(Clone, Debug, PartialEq)]
pub struct Parallel {
    /// The attention branch.
    pub attention: Attention,
    /// The Mamba-2 branch.
    pub mamba: Mamba2,
    /// Multipliers of the attention branch's input and output (`attention_in_multiplier`,
    /// `attention_out_multiplier`).
    pub(crate) attention_scales: (f32, f32),
    /// Multipliers of the Mamba branch's input and output (`ssm_in_multiplier`,
    /// `ssm_out_multiplier`).
    pub(crate) mamba_scales: (f32, f32),
}

/// Index of the attention's key/value cache among its state regions (after Mamba's two).
pub(crate) const KV: usize = 2;

impl Parallel {}

/// A parallel block's weights in memory.
#[derive(Clone, Debug, PartialEq)]
pub struct Weights {
    pub(crate) attention: attention::Weights,
    pub(crate) mamba: mamba2::Weights,
}

impl Weights {
    /// Takes the tensors of `p` from `t`.
    pub(crate) fn take(p: &Parallel, t: &mut dyn TakeTensor) -> Result<Self> {
        Ok(Self {
            mamba: mamba2::Weights::take(&p.mamba, t)?,
            attention: attention::Weights::take(&p.attention, t)?,
        })
    }
}

impl HostParts for Weights {
    /// The weight matrices.
    fn matrices(&self) -> Vec<&Matrix> {
        [self.mamba.matrices().to_vec(), self.attention.matrices()].concat()
    }

    /// Elements of the small vectors.
    fn vector_len(&self) -> usize {
        self.mamba.vector_len() + self.attention.vector_len()
    }

    fn ssm(&self) -> Option<&SsmWeights> {
        Some(&self.mamba.ssm)
    }
}

impl HostKind for Parallel {
    type Weights = Weights;
    const NAME: &'static str = "parallel";

    /// Its tensors (names under its prefix), for residual width `d` (D).
    fn tensors(&self, d: usize) -> Vec<Tensor> {
        [under("mamba.", self.mamba.tensors(d)), under("self_attn.", self.attention.tensors(d))].concat()
    }

    /// Its state: the Mamba branch's conv window and SSM state, then the attention's cache.
    fn state_regions(&self) -> Vec<(&'static str, Extent)> {
        [self.mamba.state_regions(), self.attention.state_regions()].concat()
    }

    /// Fails unless both branches and the multipliers are usable.
    fn validate(&self, d: usize) -> Result<()> {
        self.mamba.validate(d)?;
        self.attention.validate(d)?;
        let (a, m) = (self.attention_scales, self.mamba_scales);
        if [a.0, a.1, m.0, m.1].iter().any(|v| !v.is_finite()) {
            return Err(Error::Config("attention/ssm in/out multipliers must be finite".into()));
        }
        Ok(())
    }

    fn attention(&self) -> Option<&Attention> {
        Some(&self.attention)
    }

    fn mamba_dims(&self) -> Option<(usize, usize)> {
        Some((self.mamba.d_inner, self.mamba.d_state))
    }

    fn take(&self, t: &mut dyn TakeTensor) -> Result<Weights> {
        Weights::take(self, t)
    }

    fn forward(&self, w: &Weights, layer: HostLayer<'_>) -> Result<Vec<f32>> {
        let x = layer.normed();
        Ok(cpu::forward(self, w, layer.run(&x)))
    }
}
