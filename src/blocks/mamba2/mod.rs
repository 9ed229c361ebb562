//! [`Mamba2`]: the hyper-parameters of a Mamba-2 (SSD) block (Dao & Gu 2024) — its tensors,
//! its state regions and its checks. Symbols: see the glossary in [`crate::model`].

pub(crate) mod cpu;
pub(crate) mod gpu;

use crate::blocks::kind::{HostKind, HostLayer, HostParts};
use crate::blocks::ssm::{self, SsmWeights};
use crate::blocks::{TakeTensor, Tensor, checked_counts, positive};
use crate::error::{Error, Result};
use crate::model::{Extent, Matrix, Part};

/// A Mamba-2 block: one in_proj to z ‖ x ‖ B ‖ C ‖ δ, a conv over x ‖ B ‖ C, a scalar A and Δ
/// per head, B and C per group, and a gated RMSNorm before out_proj.
#[derive(Clone, Debug, PartialEq)]
pub struct Mamba2 {
    /// E·D: width inside the block (int(`expand` × D)).
    pub d_inner: usize,
    /// N: SSM state size (`state_size`).
    pub d_state: usize,
    /// K: conv1d kernel width (`conv_kernel`).
    pub d_conv: usize,
    /// H: heads (`num_heads`), each with one A, D, Δ bias and Δ per token; H · P = E·D.
    pub n_heads: usize,
    /// P: channels per head (`head_dim`).
    pub head_dim: usize,
    /// G: groups of heads sharing one B and C per token (`n_groups`); also the groups of the
    /// gated RMSNorm.
    pub n_groups: usize,
    /// HF's SSD chunk (`chunk_size`): it does not change the result, so webmamba's kernels
    /// choose their own; kept for the HF config.
    pub chunk_size: usize,
    /// Δ is clamped to [min, max] after the softplus (`time_step_limit`; (0, ∞): no clamp).
    pub time_step_limit: (f32, f32),
    /// Whether `in_proj` has a bias (`use_bias`).
    pub use_bias: bool,
    /// Whether `out_proj` has a bias (`use_bias`; Falcon-H1's `projectors_bias`).
    pub(crate) out_bias: bool,
    /// Whether the conv1d has a bias (`use_conv_bias`).
    pub use_conv_bias: bool,
    /// ε of the gated RMSNorm (the model's `layer_norm_epsilon`).
    pub(crate) norm_eps: f32,
    /// Where the gate and the grouped RMSNorm go.
    pub gated_norm: GatedNorm,
    /// Multiplies in_proj's output, bias included, per segment z, x, B, C, δ (Falcon-H1's
    /// `ssm_multipliers`; all 1 elsewhere).
    pub in_scales: [f32; 5],
    /// `time_step_rank` and `mixer_rms_eps` as config.json gives them: unused by the math, but
    /// part of the model's identity (the fingerprint of states exported by earlier builds).
    pub(crate) unused: (usize, f32),
}

/// How a Mamba-2 block's output meets its gate and its grouped RMSNorm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GatedNorm {
    /// y · silu(z), then the grouped RMSNorm with its gain (HF's `norm_before_gate=False`).
    GateThenNorm,
    /// The grouped RMSNorm with its gain, then · silu(z) (Falcon-H1's `mamba_norm_before_gate`).
    NormThenGate,
    /// y · silu(z) alone: no norm, no `norm.weight` (Falcon-H1 without `mamba_rms_norm`).
    GateOnly,
}

impl Mamba2 {
    /// Channels of the conv1d and of its carried window: x ‖ B ‖ C (E·D + 2·G·N).
    pub fn conv_dim(&self) -> usize {
        self.d_inner.saturating_add(2usize.saturating_mul(self.n_groups).saturating_mul(self.d_state))
    }

    /// Width of `in_proj`'s output: z ‖ x ‖ B ‖ C ‖ δ (E·D + conv_dim + H).
    pub fn in_proj_dim(&self) -> usize {
        self.d_inner.saturating_add(self.conv_dim()).saturating_add(self.n_heads)
    }
}

/// A Mamba-2 block's mixer weights in memory (the CPU backend's; shapes from [`Mamba2`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Weights {
    /// in_proj, the conv, Δ's bias (`dt_bias`, (H)), A_log (H), D (H), out_proj.
    pub ssm: SsmWeights,
    /// `norm.weight`: the gated RMSNorm's gain (E·D); empty without the norm.
    pub gated_norm: Vec<f32>,
}

impl Weights {
    /// Takes its tensors from `t`.
    pub(crate) fn take(p: &Mamba2, t: &mut dyn TakeTensor) -> Result<Self> {
        let ssm = SsmWeights::take(t, Part::DtBias)?;
        let gated_norm =
            if p.gated_norm == GatedNorm::GateOnly { Vec::new() } else { t.vector(Part::GatedNorm)? };
        Ok(Self { ssm, gated_norm })
    }
}

impl HostParts for Weights {
    /// The weight matrices.
    fn matrices(&self) -> Vec<&Matrix> {
        vec![&self.ssm.in_proj, &self.ssm.out_proj]
    }

    /// Elements of the small f32 tensors.
    fn vector_len(&self) -> usize {
        self.ssm.vector_len() + self.gated_norm.len()
    }

    fn ssm(&self) -> Option<&SsmWeights> {
        Some(&self.ssm)
    }
}

impl HostKind for Mamba2 {
    type Weights = Weights;
    const NAME: &'static str = "mamba2";
    const MAMBA_MIXER: bool = true;

    /// Its tensors (names under the mixer), for residual width `d` (D).
    fn tensors(&self, d: usize) -> Vec<Tensor> {
        let (di, h) = (self.d_inner, self.n_heads);
        let t = |part, leaf, shape| Tensor::new(part, leaf, shape, true);
        let sizes = ssm::Sizes {
            d,
            in_proj: self.in_proj_dim(),
            channels: self.conv_dim(),
            k: self.d_conv,
            inner: di,
            biases: (self.use_bias, self.use_conv_bias),
            out_bias: self.out_bias,
        };
        let own = vec![
            t(Part::DtBias, "dt_bias", vec![h]),
            t(Part::ALog, "A_log", vec![h]),
            t(Part::D, "D", vec![h]),
            Tensor::new(Part::GatedNorm, "norm.weight", vec![di], self.gated_norm != GatedNorm::GateOnly),
        ];
        ssm::tensors(sizes, own)
    }

    /// Its state: the conv window (K−1, conv_dim), then the SSM state (H, P, N).
    fn state_regions(&self) -> Vec<(&'static str, Extent)> {
        ssm::state_regions(self.d_conv, self.conv_dim(), self.d_inner, self.d_state)
    }

    /// Fails unless the sizes are usable and consistent (H · P = E·D, G divides H, a usable Δ
    /// range), and every tensor and state region countable in u32 (for residual width `d`).
    fn validate(&self, d: usize) -> Result<()> {
        positive(&[
            ("d_inner", self.d_inner),
            ("d_state", self.d_state),
            ("d_conv", self.d_conv),
            ("num_heads", self.n_heads),
            ("head_dim", self.head_dim),
            ("n_groups", self.n_groups),
            ("time_step_rank", self.unused.0),
        ])?;
        if self.n_heads.checked_mul(self.head_dim) != Some(self.d_inner) {
            return Err(Error::Config(format!(
                "num_heads {} × head_dim {} must be the inner width {}",
                self.n_heads, self.head_dim, self.d_inner
            )));
        }
        if !self.n_heads.is_multiple_of(self.n_groups) {
            return Err(Error::Config(format!(
                "num_heads {} is not a multiple of n_groups {}",
                self.n_heads, self.n_groups
            )));
        }
        if self.in_scales.iter().any(|s| !s.is_finite()) {
            return Err(Error::Config(format!("ssm_multipliers {:?} are not usable", self.in_scales)));
        }
        let (lo, hi) = self.time_step_limit;
        if !(lo >= 0.0 && lo <= hi && !hi.is_nan()) {
            return Err(Error::Config(format!("time_step_limit ({lo}, {hi}) is not a usable range")));
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
