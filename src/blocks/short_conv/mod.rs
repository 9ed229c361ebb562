//! [`ShortConv`]: LFM2's gated short convolution (HF `Lfm2ShortConv`). From the normed input
//! x (T, D): in_proj → B ‖ C ‖ x̃ (T, 3·D); the causal depthwise conv of K taps over B ⊙ x̃ (no
//! activation); C ⊙ that; out_proj. Its state is the conv's window: the last K−1 values of
//! B ⊙ x̃ per channel.

pub(crate) mod cpu;
pub(crate) mod gpu;

use crate::blocks::kind::{HostKind, HostLayer, HostParts};
use crate::blocks::{TakeTensor, Tensor, checked_counts, positive};
use crate::error::{Error, Result};
use crate::model::{Extent, Matrix, Part};

/// The most conv taps a short-conv block may have (LFM2 has 3; the GPU kernel keeps a
/// channel's window in registers).
pub(crate) const MAX_TAPS: usize = 16;

/// A short-convolution block's hyper-parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct ShortConv {
    /// D: its channels (the residual width).
    pub(crate) channels: usize,
    /// K: the conv's taps (`conv_L_cache`).
    pub(crate) taps: usize,
    /// Whether in_proj, the conv and out_proj have biases (`conv_bias`).
    pub(crate) bias: bool,
}

/// A short-convolution block's weights in memory (the CPU backend's).
#[derive(Clone, Debug, PartialEq)]
pub struct Weights {
    /// in_proj (3·D, D): B, C and x̃ rows, in that order.
    pub(crate) in_proj: Matrix,
    /// Its bias (3·D), when the config has biases.
    pub(crate) in_bias: Option<Vec<f32>>,
    /// The conv's kernel (D, K), tap K−1 on the newest value.
    pub(crate) conv: Vec<f32>,
    /// Its bias (D).
    pub(crate) conv_bias: Option<Vec<f32>>,
    /// out_proj (D, D).
    pub(crate) out_proj: Matrix,
    /// Its bias (D).
    pub(crate) out_bias: Option<Vec<f32>>,
}

impl HostParts for Weights {
    /// The weight matrices.
    fn matrices(&self) -> Vec<&Matrix> {
        vec![&self.in_proj, &self.out_proj]
    }

    /// Elements of the conv kernel and the biases.
    fn vector_len(&self) -> usize {
        self.conv.len()
            + [&self.in_bias, &self.conv_bias, &self.out_bias]
                .iter()
                .map(|b| b.as_ref().map_or(0, Vec::len))
                .sum::<usize>()
    }
}

impl HostKind for ShortConv {
    type Weights = Weights;
    const NAME: &'static str = "short_conv";

    /// `in_proj`, `conv`, `out_proj` (HF's names under `conv.`), for residual width `d`.
    fn tensors(&self, d: usize) -> Vec<Tensor> {
        let (d3, b) = (d.saturating_mul(3), self.bias);
        let t = Tensor::new;
        vec![
            t(Part::InProj, "in_proj.weight", vec![d3, d], true),
            t(Part::InProjBias, "in_proj.bias", vec![d3], b),
            t(Part::Conv, "conv.weight", vec![d, 1, self.taps], true),
            t(Part::ConvBias, "conv.bias", vec![d], b),
            t(Part::OutProj, "out_proj.weight", vec![d, d], true),
            t(Part::OutProjBias, "out_proj.bias", vec![d], b),
        ]
    }

    /// The conv window: K−1 rows of D values, oldest first.
    fn state_regions(&self) -> Vec<(&'static str, Extent)> {
        vec![("conv", Extent::Fixed(self.taps.saturating_sub(1).saturating_mul(self.channels)))]
    }

    /// Fails unless the taps are usable (1 to [`MAX_TAPS`]) and its channels are the residual
    /// width `d`.
    fn validate(&self, d: usize) -> Result<()> {
        positive(&[("conv_L_cache", self.taps), ("hidden_size", self.channels)])?;
        if self.channels != d {
            return Err(Error::Config(format!(
                "a short conv of {} channels in a model of width {d}",
                self.channels
            )));
        }
        if self.taps > MAX_TAPS {
            return Err(Error::Config(format!("conv_L_cache {} is above {MAX_TAPS}", self.taps)));
        }
        checked_counts(&self.tensors(d), &self.state_regions())
    }

    fn take(&self, t: &mut dyn TakeTensor) -> Result<Weights> {
        let mut bias = |part| if self.bias { t.vector(part).map(Some) } else { Ok(None) };
        let (in_bias, conv_bias, out_bias) =
            (bias(Part::InProjBias)?, bias(Part::ConvBias)?, bias(Part::OutProjBias)?);
        Ok(Weights {
            in_proj: t.matrix(Part::InProj)?,
            in_bias,
            conv: t.vector(Part::Conv)?,
            conv_bias,
            out_proj: t.matrix(Part::OutProj)?,
            out_bias,
        })
    }

    fn forward(&self, w: &Weights, layer: HostLayer<'_>) -> Result<Vec<f32>> {
        let x = layer.normed();
        Ok(cpu::forward(self, w, layer.run(&x)))
    }
}
