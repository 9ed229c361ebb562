//! What both Mamba kinds' mixers hold alike ([`SsmWeights`]): in_proj and out_proj with their
//! optional biases, the depthwise conv1d with its optional bias, A_log, D and Δ's bias. Shapes
//! are Mamba-1's; Mamba-2's (conv_dim = E·D + 2·G·N, H heads) where they differ.

use crate::blocks::{TakeTensor, Tensor};
use crate::error::Result;
use crate::model::{Extent, Matrix, Part};

/// The tensors every Mamba mixer has (the host's copy).
#[derive(Clone, Debug, PartialEq)]
pub struct SsmWeights {
    /// `in_proj.weight`: x ‖ z (2·E·D, D); Mamba-2 z ‖ x ‖ B ‖ C ‖ δ (E·D + conv_dim + H, D).
    pub in_proj: Matrix,
    /// `in_proj.bias` when `use_bias`: (in_proj's rows).
    pub in_proj_bias: Option<Vec<f32>>,
    /// `conv1d.weight`, depthwise, stored (channels, 1, K): (E·D, K); Mamba-2 (conv_dim, K).
    pub(crate) conv: Vec<f32>,
    /// `conv1d.bias` when `use_conv_bias`: (E·D); Mamba-2 (conv_dim).
    pub conv_bias: Option<Vec<f32>>,
    /// Δ's bias: `dt_proj.bias` (E·D); Mamba-2 `dt_bias` (H).
    pub(crate) dt_bias: Vec<f32>,
    /// `A_log`; A = −exp(A_log): (E·D, N); Mamba-2 (H).
    pub(crate) a_log: Vec<f32>,
    /// `D`, the skip connection: (E·D); Mamba-2 (H).
    pub(crate) d: Vec<f32>,
    /// `out_proj.weight`. (D, E·D)
    pub(crate) out_proj: Matrix,
    /// `out_proj.bias` when `use_bias`. (D)
    pub(crate) out_proj_bias: Option<Vec<f32>>,
}

impl SsmWeights {
    /// Takes them from `t`, Δ's bias as `dt_bias` (its part differs by kind).
    pub(crate) fn take(t: &mut dyn TakeTensor, dt_bias: Part) -> Result<Self> {
        Ok(Self {
            in_proj: t.matrix(Part::InProj)?,
            in_proj_bias: t.optional(Part::InProjBias),
            conv: t.vector(Part::Conv)?,
            conv_bias: t.optional(Part::ConvBias),
            dt_bias: t.vector(dt_bias)?,
            a_log: t.vector(Part::ALog)?,
            d: t.vector(Part::D)?,
            out_proj: t.matrix(Part::OutProj)?,
            out_proj_bias: t.optional(Part::OutProjBias),
        })
    }

    /// Elements of its small f32 tensors.
    pub(crate) fn vector_len(&self) -> usize {
        let opt = |v: &Option<Vec<f32>>| v.as_ref().map_or(0, Vec::len);
        opt(&self.in_proj_bias)
            + self.conv.len()
            + opt(&self.conv_bias)
            + self.dt_bias.len()
            + self.a_log.len()
            + self.d.len()
            + opt(&self.out_proj_bias)
    }
}

/// A Mamba mixer's state: the conv window (K−1, channels), then the SSM state (E·D, N)
/// (saturating: `validate` refuses what saturates).
pub(crate) fn state_regions(
    k: usize,
    channels: usize,
    inner: usize,
    n: usize,
) -> Vec<(&'static str, Extent)> {
    vec![
        ("conv", Extent::Fixed(k.saturating_sub(1).saturating_mul(channels))),
        ("ssm", Extent::Fixed(inner.saturating_mul(n))),
    ]
}

/// The sizes of a Mamba mixer's tensors that both kinds have: D, in_proj's rows, the conv's
/// channels and width K, E·D, and whether in/out_proj and the conv have biases.
pub(crate) struct Sizes {
    pub(crate) d: usize,
    pub(crate) in_proj: usize,
    pub(crate) channels: usize,
    pub(crate) k: usize,
    pub(crate) inner: usize,
    pub(crate) biases: (bool, bool),
    /// Whether out_proj has a bias.
    pub(crate) out_bias: bool,
}

/// A Mamba mixer's tensors (names under the mixer), in checkpoint order: in_proj, the conv,
/// then the kind's own `middle` ones, then out_proj.
pub(crate) fn tensors(s: Sizes, middle: Vec<Tensor>) -> Vec<Tensor> {
    let t = Tensor::new;
    let (bias, conv_bias) = s.biases;
    let mut out = vec![
        t(Part::InProj, "in_proj.weight", vec![s.in_proj, s.d], true),
        t(Part::InProjBias, "in_proj.bias", vec![s.in_proj], bias),
        t(Part::Conv, "conv1d.weight", vec![s.channels, 1, s.k], true),
        t(Part::ConvBias, "conv1d.bias", vec![s.channels], conv_bias),
    ];
    out.extend(middle);
    out.push(t(Part::OutProj, "out_proj.weight", vec![s.d, s.inner], true));
    out.push(t(Part::OutProjBias, "out_proj.bias", vec![s.d], s.out_bias));
    out
}
