//! [`Mamba1`]: the hyper-parameters of a Mamba-1 block (Gu & Dao 2023), with or without
//! Falcon-Mamba's weightless norms on δ, B and C — its tensors, its state regions and its
//! checks. Symbols: see the glossary in [`crate::model`].

pub(crate) mod cpu;
pub(crate) mod decode;
pub(crate) mod gpu;

use crate::blocks::kind::{HostKind, HostLayer, HostParts};
use crate::blocks::ssm::{self, SsmWeights};
use crate::blocks::{TakeTensor, Tensor, checked_counts, positive, usable_eps};
use crate::error::Result;
use crate::model::{Extent, Matrix, Part};

/// A Mamba-1 block: in_proj → conv1d → x_proj → dt_proj → selective scan (gated) → out_proj.
#[derive(Clone, Debug, PartialEq)]
pub struct Mamba1 {
    /// E·D: width inside the block (`intermediate_size`, or `expand` × D).
    pub d_inner: usize,
    /// N: SSM state size per channel (`state_size` / `d_state`).
    pub d_state: usize,
    /// K: causal conv1d kernel width (`conv_kernel` / `d_conv`).
    pub d_conv: usize,
    /// R: rank of the Δ projection (`time_step_rank`; "auto" = ceil(D / 16)).
    pub dt_rank: usize,
    /// Whether `in_proj` and `out_proj` have biases (`use_bias`).
    pub use_bias: bool,
    /// Whether the conv1d has a bias (`use_conv_bias`).
    pub use_conv_bias: bool,
    /// Falcon-Mamba: ε of the weightless RMSNorms on x_proj's three outputs — Δ's input, B and
    /// C — before they are used (`mixer_rms_eps`); none in Mamba-1.
    pub dbc_norm_eps: Option<f32>,
    /// Jamba: those norms have gains (`dt_layernorm`, `b_layernorm`, `c_layernorm`).
    pub(crate) dbc_gains: bool,
}

impl Mamba1 {
    /// Channels of the conv1d and of its carried window: x (E·D).
    pub(crate) fn conv_dim(&self) -> usize {
        self.d_inner
    }

    /// Width of `in_proj`'s output: x ‖ z (2·E·D).
    pub(crate) fn in_proj_dim(&self) -> usize {
        2usize.saturating_mul(self.d_inner)
    }

    /// Width of `x_proj`'s output: δ (R) ‖ B (N) ‖ C (N).
    pub(crate) fn x_proj_dim(&self) -> usize {
        self.dt_rank.saturating_add(2usize.saturating_mul(self.d_state))
    }

    /// Jamba's gains of the norms on δ (R), B (N) and C (N), if it has them.
    fn gains(&self, r: usize, n: usize) -> Vec<Tensor> {
        let t = |part, leaf, len| Tensor::new(part, leaf, vec![len], self.dbc_gains);
        vec![
            t(Part::DtNorm, "dt_layernorm.weight", r),
            t(Part::BNorm, "b_layernorm.weight", n),
            t(Part::CNorm, "c_layernorm.weight", n),
        ]
    }
}

/// A Mamba-1 block's mixer weights in memory (the CPU backend's; shapes from [`Mamba1`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Weights {
    /// in_proj, the conv, Δ's bias (`dt_proj.bias`, (E·D)), A_log (E·D, N), D, out_proj.
    pub ssm: SsmWeights,
    /// `x_proj.weight`: rows give δ (R), then B (N), then C (N). (R + 2N, E·D)
    pub(crate) x_proj: Matrix,
    /// `dt_proj.weight`. (E·D, R)
    pub(crate) dt_proj: Matrix,
    /// Jamba: the gains of the norms on δ (R), B (N) and C (N).
    pub(crate) dbc_gains: Option<[Vec<f32>; 3]>,
}

impl Weights {
    /// Takes its tensors from `t`.
    pub(crate) fn take(p: &Mamba1, t: &mut dyn TakeTensor) -> Result<Self> {
        let ssm = SsmWeights::take(t, Part::DtProjBias)?;
        let (x_proj, dt_proj) = (t.matrix(Part::XProj)?, t.matrix(Part::DtProj)?);
        let dbc_gains = if p.dbc_gains {
            Some([t.vector(Part::DtNorm)?, t.vector(Part::BNorm)?, t.vector(Part::CNorm)?])
        } else {
            None
        };
        Ok(Self { ssm, x_proj, dt_proj, dbc_gains })
    }
}

impl HostParts for Weights {
    /// The weight matrices.
    fn matrices(&self) -> Vec<&Matrix> {
        vec![&self.ssm.in_proj, &self.x_proj, &self.dt_proj, &self.ssm.out_proj]
    }

    /// Elements of the small f32 tensors.
    fn vector_len(&self) -> usize {
        self.ssm.vector_len() + self.dbc_gains.as_ref().map_or(0, |g| g.iter().map(Vec::len).sum())
    }

    fn ssm(&self) -> Option<&SsmWeights> {
        Some(&self.ssm)
    }
}

impl HostKind for Mamba1 {
    type Weights = Weights;
    const NAME: &'static str = "mamba1";
    const MAMBA_MIXER: bool = true;

    /// Its tensors (names under the mixer), for residual width `d` (D).
    fn tensors(&self, d: usize) -> Vec<Tensor> {
        // Saturating sizes (here and in the regions): `validate` refuses what saturates.
        let (di, n, r) = (self.d_inner, self.d_state, self.dt_rank);
        let t = |part, leaf, shape| Tensor::new(part, leaf, shape, true);
        let sizes = ssm::Sizes {
            d,
            in_proj: self.in_proj_dim(),
            channels: di,
            k: self.d_conv,
            inner: di,
            biases: (self.use_bias, self.use_conv_bias),
            out_bias: self.use_bias,
        };
        let own = vec![
            t(Part::XProj, "x_proj.weight", vec![self.x_proj_dim(), di]),
            t(Part::DtProj, "dt_proj.weight", vec![di, r]),
            t(Part::DtProjBias, "dt_proj.bias", vec![di]),
            t(Part::ALog, "A_log", vec![di, n]),
            t(Part::D, "D", vec![di]),
        ];
        let own = [own, self.gains(r, n)].concat();
        ssm::tensors(sizes, own)
    }

    /// Its state: the conv window (K−1, E·D), then the SSM state (E·D, N).
    fn state_regions(&self) -> Vec<(&'static str, Extent)> {
        ssm::state_regions(self.d_conv, self.conv_dim(), self.d_inner, self.d_state)
    }

    /// Fails unless the sizes are usable: positive, and every tensor and state region
    /// countable in u32 (for residual width `d`).
    fn validate(&self, d: usize) -> Result<()> {
        positive(&[
            ("d_inner", self.d_inner),
            ("d_state", self.d_state),
            ("d_conv", self.d_conv),
            ("dt_rank", self.dt_rank),
        ])?;
        if let Some(eps) = self.dbc_norm_eps {
            usable_eps("mixer_rms_eps", eps)?;
        }
        checked_counts(&self.tensors(d), &self.state_regions())
    }

    fn mamba_dims(&self) -> Option<(usize, usize)> {
        Some((self.d_inner, self.d_state))
    }

    fn take(&self, t: &mut dyn TakeTensor) -> Result<Weights> {
        Weights::take(self, t)
    }

    fn forward(&self, w: &Weights, layer: HostLayer<'_>) -> Result<Vec<f32>> {
        let x = layer.normed();
        Ok(cpu::forward(self, w, layer.run(&x)))
    }
}
