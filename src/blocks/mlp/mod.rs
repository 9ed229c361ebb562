//! [`Mlp`]: a feed-forward network — gated (`act(x·Wgᵀ) ⊙ x·Wuᵀ`, SwiGLU and kin) or plain
//! (`act(x·Wuᵀ)`), then the down projection. Also a mixture's shared and routed experts.

pub(crate) mod cpu;
pub(crate) mod gpu;

use crate::blocks::kind::{HostKind, HostLayer, HostParts};
use crate::blocks::{TakeTensor, Tensor, checked_counts, positive};
use crate::error::{Error, Result};
use crate::model::Extent;
use crate::model::{Matrix, MlpPart, Part};

/// The activation (`hidden_act` / `mlp_hidden_act`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Activation {
    /// x · sigmoid(x) (`silu`, `swish`).
    Silu,
    /// The exact GELU, x · Φ(x) (`gelu`).
    Gelu,
    /// GELU's tanh approximation (`gelu_pytorch_tanh`, `gelu_new`).
    GeluTanh,
    /// max(x, 0)² (`relu2`).
    Relu2,
}

impl Activation {
    /// The activation config.json names `name`; anything else is [`Error::UnsupportedModel`]
    /// naming `field`.
    pub(crate) fn parse(field: &str, name: &str) -> Result<Self> {
        Ok(match name {
            "silu" | "swish" => Activation::Silu,
            "gelu" => Activation::Gelu,
            "gelu_pytorch_tanh" | "gelu_new" => Activation::GeluTanh,
            "relu2" => Activation::Relu2,
            other => return Err(Error::UnsupportedModel(format!("{field} {other:?}"))),
        })
    }
}

/// How a checkpoint names (and splits) an MLP's matrices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MlpNames {
    /// `gate_proj`, `up_proj`, `down_proj` (Bamba, Falcon-H1, Jamba).
    Separate,
    /// `input_linear` (gate ‖ up), `output_linear` (Granite).
    InputOutput,
    /// `gate_up_proj` (gate ‖ up), `down_proj` (Zamba2).
    GateUp,
    /// `up_proj`, `down_proj`, no gate (Nemotron-H).
    Plain,
    /// `w1` (gate), `w3` (up), `w2` (down) (LFM2).
    W123,
}

/// A feed-forward network of width I.
#[derive(Clone, Debug, PartialEq)]
pub struct Mlp {
    /// I: the inner width (`intermediate_size`, `shared_intermediate_size`...).
    pub(crate) inner: usize,
    /// The activation.
    pub(crate) act: Activation,
    /// Its matrices' names (and whether it is gated).
    pub(crate) names: MlpNames,
    /// Whether its matrices have biases (`mlp_bias`).
    pub(crate) bias: bool,
    /// Multiplies the gate's pre-activation and the output (Falcon-H1's `mlp_multipliers`;
    /// (1, 1) elsewhere).
    pub(crate) scales: (f32, f32),
}

impl Mlp {
    /// Whether it is gated.
    pub(crate) fn gated(&self) -> bool {
        self.names != MlpNames::Plain
    }

    /// Its tensors (names under its prefix), for residual width `d` (D), as `part` plays them
    /// (`Part::Mlp` for a dense MLP, `|m| Part::Expert(e, m)` for a routed expert).
    pub(crate) fn tensors_as(&self, d: usize, part: impl Fn(MlpPart) -> Part) -> Vec<Tensor> {
        let i = self.inner;
        let i2 = i.saturating_mul(2);
        let mut out = Vec::new();
        let mut add = |m: MlpPart, bias: MlpPart, name: &str, shape: Vec<usize>| {
            let rows = shape[0];
            out.push(Tensor::new(part(m), &format!("{name}.weight"), shape, true));
            out.push(Tensor::new(part(bias), &format!("{name}.bias"), vec![rows], self.bias));
        };
        match self.names {
            MlpNames::Separate => {
                add(MlpPart::Gate, MlpPart::GateBias, "gate_proj", vec![i, d]);
                add(MlpPart::Up, MlpPart::UpBias, "up_proj", vec![i, d]);
                add(MlpPart::Down, MlpPart::DownBias, "down_proj", vec![d, i]);
            }
            MlpNames::W123 => {
                add(MlpPart::Gate, MlpPart::GateBias, "w1", vec![i, d]);
                add(MlpPart::Up, MlpPart::UpBias, "w3", vec![i, d]);
                add(MlpPart::Down, MlpPart::DownBias, "w2", vec![d, i]);
            }
            MlpNames::InputOutput => {
                add(MlpPart::GateUp, MlpPart::GateUpBias, "input_linear", vec![i2, d]);
                add(MlpPart::Down, MlpPart::DownBias, "output_linear", vec![d, i]);
            }
            MlpNames::GateUp => {
                add(MlpPart::GateUp, MlpPart::GateUpBias, "gate_up_proj", vec![i2, d]);
                add(MlpPart::Down, MlpPart::DownBias, "down_proj", vec![d, i]);
            }
            MlpNames::Plain => {
                add(MlpPart::Up, MlpPart::UpBias, "up_proj", vec![i, d]);
                add(MlpPart::Down, MlpPart::DownBias, "down_proj", vec![d, i]);
            }
        }
        out
    }
}

/// An MLP's weights in memory (the CPU backend's).
#[derive(Clone, Debug, PartialEq)]
pub struct Weights {
    /// The gate projection (I, D) when it is a matrix of its own (`gate_proj`).
    pub(crate) gate: Option<Matrix>,
    /// The up projection (I, D); gate ‖ up (2·I, D) where one matrix holds both.
    pub(crate) up: Matrix,
    /// The down projection (D, I).
    pub(crate) down: Matrix,
    /// Biases of gate, up (or gate ‖ up) and down, when the config has them.
    pub(crate) biases: [Option<Vec<f32>>; 3],
}

impl Weights {
    /// Takes the tensors of `p` from `t`, each as `part` plays it.
    pub(crate) fn take_as(p: &Mlp, t: &mut dyn TakeTensor, part: impl Fn(MlpPart) -> Part) -> Result<Self> {
        let mut bias = |m| if p.bias { t.vector(part(m)).map(Some) } else { Ok(None) };
        let biases = match p.names {
            MlpNames::Separate | MlpNames::W123 => {
                [bias(MlpPart::GateBias)?, bias(MlpPart::UpBias)?, bias(MlpPart::DownBias)?]
            }
            MlpNames::InputOutput | MlpNames::GateUp => {
                [None, bias(MlpPart::GateUpBias)?, bias(MlpPart::DownBias)?]
            }
            MlpNames::Plain => [None, bias(MlpPart::UpBias)?, bias(MlpPart::DownBias)?],
        };
        let (gate, up) = match p.names {
            MlpNames::Separate | MlpNames::W123 => {
                (Some(t.matrix(part(MlpPart::Gate))?), t.matrix(part(MlpPart::Up))?)
            }
            MlpNames::InputOutput | MlpNames::GateUp => (None, t.matrix(part(MlpPart::GateUp))?),
            MlpNames::Plain => (None, t.matrix(part(MlpPart::Up))?),
        };
        Ok(Self { gate, up, down: t.matrix(part(MlpPart::Down))?, biases })
    }

    /// Takes a dense MLP's tensors.
    pub(crate) fn take(p: &Mlp, t: &mut dyn TakeTensor) -> Result<Self> {
        Self::take_as(p, t, Part::Mlp)
    }
}

impl HostParts for Weights {
    /// The weight matrices.
    fn matrices(&self) -> Vec<&Matrix> {
        self.gate.iter().chain([&self.up, &self.down]).collect()
    }

    /// Elements of the biases.
    fn vector_len(&self) -> usize {
        self.biases.iter().flatten().map(Vec::len).sum()
    }
}

impl HostKind for Mlp {
    type Weights = Weights;
    const NAME: &'static str = "mlp";

    /// Its tensors as a dense MLP.
    fn tensors(&self, d: usize) -> Vec<Tensor> {
        self.tensors_as(d, Part::Mlp)
    }

    /// None: an MLP keeps nothing between tokens.
    fn state_regions(&self) -> Vec<(&'static str, Extent)> {
        Vec::new()
    }

    /// Fails unless its sizes are usable.
    fn validate(&self, d: usize) -> Result<()> {
        positive(&[("intermediate_size", self.inner)])?;
        if !(self.scales.0.is_finite() && self.scales.1.is_finite()) {
            return Err(Error::Config(format!("mlp_multipliers {:?} are not usable", self.scales)));
        }
        checked_counts(&self.tensors(d), &[])
    }

    fn take(&self, t: &mut dyn TakeTensor) -> Result<Weights> {
        Weights::take(self, t)
    }

    fn forward(&self, w: &Weights, layer: HostLayer<'_>) -> Result<Vec<f32>> {
        Ok(cpu::forward(self, w, &layer.normed()))
    }
}
