//! [`DeltaNet`]: Qwen3.5's Gated DeltaNet (HF `Qwen3_5GatedDeltaNet`), a linear-attention
//! recurrence with a (d_k × d_v) state per value head, updated by the gated delta rule. From
//! the normed input x (T, D): q ‖ k ‖ v = in_proj_qkv(x) through a causal depthwise conv + SiLU;
//! z = in_proj_z(x), b = in_proj_b(x), a = in_proj_a(x); per value head h (its key head
//! h / (H_v / H_k): consecutive value heads share one), with q, k L2-normalised and q · d_k^−½:
//!
//!   g = −exp(A_log) · softplus(a + dt_bias),  β = σ(b)
//!   S ← exp(g) · S;  S ← S + k ⊗ β · (v − Sᵀk);  o = Sᵀq
//!
//! then the gated RMSNorm per head, rms_norm(o) · w ⊙ silu(z), and out_proj. Its state: the
//! conv window (K−1, conv_dim) and S, stored per head transposed, (H_v, d_v, d_k): value
//! channel j's d_k entries S[:, j] together, as a Mamba state's channels hold their N.

pub(crate) mod cpu;
pub(crate) mod gpu;

use crate::blocks::kind::{HostKind, HostLayer, HostParts};
use crate::blocks::{TakeTensor, Tensor, checked_counts, positive, usable_eps};
use crate::error::{Error, Result};
use crate::model::{Extent, Matrix, Part};

/// A Gated DeltaNet block's hyper-parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct DeltaNet {
    /// H_k: key (and query) heads (`linear_num_key_heads`).
    pub(crate) k_heads: usize,
    /// H_v: value heads (`linear_num_value_heads`); a multiple of H_k.
    pub(crate) v_heads: usize,
    /// d_k: channels per key head (`linear_key_head_dim`).
    pub(crate) k_dim: usize,
    /// d_v: channels per value head (`linear_value_head_dim`).
    pub(crate) v_dim: usize,
    /// K: the conv's taps (`linear_conv_kernel_dim`).
    pub(crate) conv: usize,
    /// ε of the gated RMSNorm (`rms_norm_eps`).
    pub(crate) eps: f32,
}

impl DeltaNet {
    /// Width of q, of k: H_k · d_k.
    pub(crate) fn key_width(&self) -> usize {
        self.k_heads.saturating_mul(self.k_dim)
    }

    /// Width of v and of the output: H_v · d_v.
    pub(crate) fn value_width(&self) -> usize {
        self.v_heads.saturating_mul(self.v_dim)
    }

    /// The conv's channels: q ‖ k ‖ v, 2 · H_k · d_k + H_v · d_v.
    pub(crate) fn conv_dim(&self) -> usize {
        self.key_width().saturating_mul(2).saturating_add(self.value_width())
    }
}

/// A Gated DeltaNet block's weights in memory (the CPU backend's).
#[derive(Clone, Debug, PartialEq)]
pub struct Weights {
    /// in_proj_qkv (conv_dim, D): q ‖ k ‖ v rows.
    pub(crate) qkv: Matrix,
    /// in_proj_z (H_v · d_v, D).
    pub(crate) z: Matrix,
    /// in_proj_b (H_v, D).
    pub(crate) b: Matrix,
    /// in_proj_a (H_v, D).
    pub(crate) a: Matrix,
    /// The conv's kernel (conv_dim, K), no bias.
    pub(crate) conv: Vec<f32>,
    /// dt_bias (H_v).
    pub(crate) dt_bias: Vec<f32>,
    /// A_log (H_v).
    pub(crate) a_log: Vec<f32>,
    /// The gated RMSNorm's gain (d_v), shared by the heads.
    pub(crate) norm: Vec<f32>,
    /// out_proj (D, H_v · d_v).
    pub(crate) out_proj: Matrix,
}

impl HostParts for Weights {
    /// The weight matrices.
    fn matrices(&self) -> Vec<&Matrix> {
        vec![&self.qkv, &self.z, &self.b, &self.a, &self.out_proj]
    }

    /// Elements of the conv kernel, dt_bias, A_log and the norm's gain.
    fn vector_len(&self) -> usize {
        self.conv.len() + self.dt_bias.len() + self.a_log.len() + self.norm.len()
    }
}

impl HostKind for DeltaNet {
    type Weights = Weights;
    const NAME: &'static str = "gated_deltanet";

    /// HF's names under `linear_attn.`, for residual width `d`.
    fn tensors(&self, d: usize) -> Vec<Tensor> {
        let (c, vw, hv) = (self.conv_dim(), self.value_width(), self.v_heads);
        let t = Tensor::new;
        vec![
            t(Part::InProj, "in_proj_qkv.weight", vec![c, d], true),
            t(Part::Gate, "in_proj_z.weight", vec![vw, d], true),
            t(Part::Beta, "in_proj_b.weight", vec![hv, d], true),
            t(Part::DtIn, "in_proj_a.weight", vec![hv, d], true),
            t(Part::Conv, "conv1d.weight", vec![c, 1, self.conv], true),
            t(Part::DtBias, "dt_bias", vec![hv], true),
            t(Part::ALog, "A_log", vec![hv], true),
            t(Part::GatedNorm, "norm.weight", vec![self.v_dim], true),
            t(Part::OutProj, "out_proj.weight", vec![d, vw], true),
        ]
    }

    /// The conv window (K−1, conv_dim), then S (H_v, d_v, d_k).
    fn state_regions(&self) -> Vec<(&'static str, Extent)> {
        vec![
            ("conv", Extent::Fixed(self.conv.saturating_sub(1).saturating_mul(self.conv_dim()))),
            ("ssm", Extent::Fixed(self.value_width().saturating_mul(self.k_dim))),
        ]
    }

    /// Fails unless the sizes are usable: positive, H_k dividing H_v, a usable ε.
    fn validate(&self, d: usize) -> Result<()> {
        positive(&[
            ("linear_num_key_heads", self.k_heads),
            ("linear_num_value_heads", self.v_heads),
            ("linear_key_head_dim", self.k_dim),
            ("linear_value_head_dim", self.v_dim),
            ("linear_conv_kernel_dim", self.conv),
        ])?;
        if !self.v_heads.is_multiple_of(self.k_heads) {
            return Err(Error::Config(format!(
                "linear_num_key_heads {} does not divide linear_num_value_heads {}",
                self.k_heads, self.v_heads
            )));
        }
        usable_eps("rms_norm_eps", self.eps)?;
        checked_counts(&self.tensors(d), &self.state_regions())
    }

    fn take(&self, t: &mut dyn TakeTensor) -> Result<Weights> {
        Ok(Weights {
            qkv: t.matrix(Part::InProj)?,
            z: t.matrix(Part::Gate)?,
            b: t.matrix(Part::Beta)?,
            a: t.matrix(Part::DtIn)?,
            conv: t.vector(Part::Conv)?,
            dt_bias: t.vector(Part::DtBias)?,
            a_log: t.vector(Part::ALog)?,
            norm: t.vector(Part::GatedNorm)?,
            out_proj: t.matrix(Part::OutProj)?,
        })
    }

    fn forward(&self, w: &Weights, layer: HostLayer<'_>) -> Result<Vec<f32>> {
        let x = layer.normed();
        Ok(cpu::forward(self, w, layer.run(&x)))
    }
}
