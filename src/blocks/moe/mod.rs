//! [`Moe`]: a mixture of experts — a router scores the experts for each token, the top k run
//! (each an [`Mlp`]) and their outputs are summed by the routing weights; a shared expert, where
//! the model has one, runs for every token and is added.

pub(crate) mod cpu;
pub(crate) mod gpu;

use crate::blocks::kind::{HostKind, HostLayer, HostParts};
use crate::blocks::mlp::{self, Mlp, MlpNames};
use crate::blocks::{TakeTensor, Tensor, checked_counts, positive, under};
use crate::error::{Error, Result};
use crate::model::Extent;
use crate::model::{Matrix, MlpPart, Part};

/// How the router's scores become the chosen experts and their weights.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Routing {
    /// The k largest logits, weighted by a softmax over those k (Granite).
    SoftmaxTopK,
    /// A softmax over every expert, the k most probable weighted by their probability,
    /// renormalised over the k or not (Jamba: not).
    Softmax { renormalize: bool },
    /// Sigmoid scores; the choice by score + a per-expert correction (`RouterBias`) among the
    /// `topk_group` best of `n_group` groups (a group's score: its two best); weights the
    /// chosen scores, normalised if `normalize`, times `scale` (Nemotron-H).
    Sigmoid { n_group: usize, topk_group: usize, normalize: bool, scale: f32 },
}

/// How a checkpoint names a mixture's tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ExpertLayout {
    /// Granite: `block_sparse_moe.router.layer`, the experts stacked in
    /// `block_sparse_moe.input_linear` (E, 2·I, D) and `output_linear` (E, D, I), the shared
    /// MLP beside them as `shared_mlp.`.
    Granite,
    /// Jamba: `router`, `experts.{e}.{gate,up,down}_proj`.
    Jamba,
    /// Nemotron-H: `gate` (and its `e_score_correction_bias`), `experts.{e}.{up,down}_proj`,
    /// `shared_experts.`.
    NemotronH,
}

/// A mixture of experts.
#[derive(Clone, Debug, PartialEq)]
pub struct Moe {
    /// E: routed experts.
    pub(crate) n_experts: usize,
    /// k: experts per token (`num_experts_per_tok`).
    pub top_k: usize,
    /// Each routed expert.
    pub(crate) expert: Mlp,
    /// How experts are chosen and weighted.
    pub(crate) routing: Routing,
    /// Its tensors' names.
    pub(crate) layout: ExpertLayout,
    /// The shared expert, run for every token, if any.
    pub(crate) shared: Option<Mlp>,
    /// The routed experts as llama.cpp's GGUF files stack them: one tensor of every expert's
    /// gate (E, I, D), up (E, I, D) and down (E, D, I) each, `experts.{gate,up,down}_proj`
    /// (under `block_sparse_moe.` for Granite); the router and shared expert named as `layout`
    /// names them.
    pub(crate) stacked: bool,
}

impl Moe {}

/// A mixture's weights in memory (the CPU backend's).
#[derive(Clone, Debug, PartialEq)]
pub struct Weights {
    /// The router (E, D).
    pub(crate) router: Matrix,
    /// Nemotron-H's score correction (E).
    pub(crate) router_bias: Option<Vec<f32>>,
    /// Each routed expert (a checkpoint's stacked experts split apart).
    pub(crate) experts: Vec<mlp::Weights>,
    /// The shared expert.
    pub(crate) shared: Option<mlp::Weights>,
}

impl Weights {
    /// Takes the tensors of `p` from `t`.
    pub(crate) fn take(p: &Moe, t: &mut dyn TakeTensor) -> Result<Self> {
        let router = t.matrix(Part::Router)?;
        let router_bias = if matches!(p.routing, Routing::Sigmoid { .. }) {
            Some(t.vector(Part::RouterBias)?)
        } else {
            None
        };
        let experts = match p.layout {
            _ if p.stacked => {
                let mut stack = |m| t.matrix(Part::Experts(m)).map(|x| x.split_rows(p.n_experts));
                let gate = match p.expert.names {
                    MlpNames::Plain => None,
                    _ => Some(stack(MlpPart::Gate)?),
                };
                let (up, down) = (stack(MlpPart::Up)?, stack(MlpPart::Down)?);
                let mut gate = gate.map(Vec::into_iter);
                up.into_iter()
                    .zip(down)
                    .map(|(up, down)| {
                        let gate = gate.as_mut().and_then(Iterator::next);
                        mlp::Weights { gate, up, down, biases: [None, None, None] }
                    })
                    .collect()
            }
            ExpertLayout::Granite => {
                let gate_up = t.matrix(Part::Experts(MlpPart::GateUp))?.split_rows(p.n_experts);
                let down = t.matrix(Part::Experts(MlpPart::Down))?.split_rows(p.n_experts);
                gate_up
                    .into_iter()
                    .zip(down)
                    .map(|(up, down)| mlp::Weights { gate: None, up, down, biases: [None, None, None] })
                    .collect()
            }
            _ => (0..p.n_experts)
                .map(|e| mlp::Weights::take_as(&p.expert, t, |m| Part::Expert(e as u16, m)))
                .collect::<Result<_>>()?,
        };
        let shared = p.shared.as_ref().map(|s| mlp::Weights::take(s, t)).transpose()?;
        Ok(Self { router, router_bias, experts, shared })
    }
}

impl HostParts for Weights {
    /// The weight matrices.
    fn matrices(&self) -> Vec<&Matrix> {
        let mut out = vec![&self.router];
        out.extend(self.experts.iter().flat_map(mlp::Weights::matrices));
        out.extend(self.shared.iter().flat_map(mlp::Weights::matrices));
        out
    }

    /// Elements of the small vectors.
    fn vector_len(&self) -> usize {
        let mlps = self.experts.iter().chain(&self.shared).map(mlp::Weights::vector_len).sum::<usize>();
        self.router_bias.as_ref().map_or(0, Vec::len) + mlps
    }
}

impl HostKind for Moe {
    type Weights = Weights;
    const NAME: &'static str = "moe";

    /// Its tensors (names under its prefix), for residual width `d` (D).
    fn tensors(&self, d: usize) -> Vec<Tensor> {
        let (e, i) = (self.n_experts, self.expert.inner);
        let t = |part, leaf: &str, shape| Tensor::new(part, leaf, shape, true);
        let mut out = Vec::new();
        match self.layout {
            _ if self.stacked => {
                let (router, at) = match self.layout {
                    ExpertLayout::Granite => ("block_sparse_moe.router.layer", "block_sparse_moe."),
                    ExpertLayout::Jamba => ("router", ""),
                    ExpertLayout::NemotronH => ("gate", ""),
                };
                out.push(t(Part::Router, &format!("{router}.weight"), vec![e, d]));
                if matches!(self.routing, Routing::Sigmoid { .. }) {
                    out.push(t(Part::RouterBias, &format!("{router}.e_score_correction_bias"), vec![e]));
                }
                if self.expert.names != MlpNames::Plain {
                    out.push(t(
                        Part::Experts(MlpPart::Gate),
                        &format!("{at}experts.gate_proj.weight"),
                        vec![e, i, d],
                    ));
                }
                out.push(t(
                    Part::Experts(MlpPart::Up),
                    &format!("{at}experts.up_proj.weight"),
                    vec![e, i, d],
                ));
                out.push(t(
                    Part::Experts(MlpPart::Down),
                    &format!("{at}experts.down_proj.weight"),
                    vec![e, d, i],
                ));
            }
            ExpertLayout::Granite => {
                out.push(t(Part::Router, "block_sparse_moe.router.layer.weight", vec![e, d]));
                let gate_up = vec![e, i.saturating_mul(2), d];
                out.push(t(Part::Experts(MlpPart::GateUp), "block_sparse_moe.input_linear.weight", gate_up));
                out.push(t(
                    Part::Experts(MlpPart::Down),
                    "block_sparse_moe.output_linear.weight",
                    vec![e, d, i],
                ));
            }
            ExpertLayout::Jamba | ExpertLayout::NemotronH => {
                let router = if self.layout == ExpertLayout::Jamba { "router" } else { "gate" };
                out.push(t(Part::Router, &format!("{router}.weight"), vec![e, d]));
                if matches!(self.routing, Routing::Sigmoid { .. }) {
                    out.push(t(Part::RouterBias, &format!("{router}.e_score_correction_bias"), vec![e]));
                }
                for x in 0..e.min(u16::MAX as usize) {
                    let own = self.expert.tensors_as(d, |m| Part::Expert(x as u16, m));
                    out.extend(under(&format!("experts.{x}."), own));
                }
            }
        }
        if let Some(shared) = &self.shared {
            let at = if self.layout == ExpertLayout::Granite { "shared_mlp." } else { "shared_experts." };
            out.extend(under(at, shared.tensors(d)));
        }
        out
    }

    /// None: a mixture keeps nothing between tokens.
    fn state_regions(&self) -> Vec<(&'static str, Extent)> {
        Vec::new()
    }

    /// Fails unless the sizes are usable: k of at most E experts, at most 65535 experts.
    fn validate(&self, d: usize) -> Result<()> {
        positive(&[("num_experts", self.n_experts), ("num_experts_per_tok", self.top_k)])?;
        if self.top_k > self.n_experts {
            return Err(Error::Config(format!(
                "num_experts_per_tok {} is more than the {} experts",
                self.top_k, self.n_experts
            )));
        }
        if self.n_experts > u16::MAX as usize {
            return Err(Error::UnsupportedModel(format!("{} experts (at most 65535)", self.n_experts)));
        }
        if let Routing::Sigmoid { n_group, topk_group, scale, .. } = self.routing {
            if n_group == 0
                || !self.n_experts.is_multiple_of(n_group)
                || topk_group == 0
                || topk_group > n_group
            {
                return Err(Error::Config(format!(
                    "n_group {n_group} / topk_group {topk_group} do not split {} experts",
                    self.n_experts
                )));
            }
            if self.n_experts / n_group < 2 && n_group > 1 {
                return Err(Error::UnsupportedModel("expert groups of one expert".into()));
            }
            if !scale.is_finite() {
                return Err(Error::Config(format!("routed_scaling_factor {scale} is not usable")));
            }
        }
        self.expert.validate(d)?;
        if let Some(shared) = &self.shared {
            shared.validate(d)?;
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
