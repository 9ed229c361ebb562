//! [`Zamba2Layer`]: a Zamba2 "hybrid" layer — a transformer block shared by several layers
//! (attention then an MLP over RMSNorm(hidden ‖ the original embeddings), no residuals inside,
//! per-use LoRA adapters), its output through the layer's own `linear`, added to the input of
//! the layer's Mamba-2 mixer (not to the residual stream).

pub(crate) mod cpu;
pub(crate) mod gpu;

use crate::blocks::attention::{self, Attention};
use crate::blocks::kind::{HostKind, HostLayer, HostParts, Input};
use crate::blocks::mamba2::{self, Mamba2};
use crate::blocks::mlp::{self, Mlp};
use crate::blocks::ssm::SsmWeights;
use crate::blocks::{TakeTensor, Tensor, checked_counts, positive, under};
use crate::cpu::conv::{Capture, Run};
use crate::cpu::ops::rms_norm;
use crate::error::{Error, Result};
use crate::model::{Extent, Matrix, Part};

/// The shared transformer block's hyper-parameters (the same for every use).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SharedBlock {
    /// Its attention, over inputs of width 2·D.
    pub(crate) attention: Attention,
    /// Its MLP (`gate_up_proj`, `down_proj`).
    pub(crate) mlp: Mlp,
    /// LoRA rank of the adapters (`adapter_rank`).
    pub(crate) rank: usize,
    /// Whether q, k and v have adapters (`use_shared_attention_adapter`; the MLP always has).
    pub(crate) attention_adapters: bool,
}

/// One hybrid layer.
#[derive(Clone, Debug, PartialEq)]
pub struct Zamba2Layer {
    /// The shared block it uses.
    pub(crate) shared: SharedBlock,
    /// The model layer whose tensors hold that block (`hybrid_layer_ids[j % num_mem_blocks]`).
    pub(crate) owner_layer: usize,
    /// The block (index in the model's list) that owns those weights.
    pub(crate) owner_block: usize,
    /// j: which use of the shared blocks this is (its adapters' index).
    pub(crate) use_index: usize,
    /// This layer (its tensors are `model.layers.{layer}.…`) and this block's index in the
    /// model's list.
    pub(crate) layer: usize,
    pub(crate) block: usize,
    /// Its Mamba-2 mixer (`mamba_decoder.mamba.`).
    pub mamba: Mamba2,
}

/// Index of the shared attention's key/value cache among the layer's state regions.
pub(crate) const KV: usize = 2;

impl Zamba2Layer {
    /// Whether this block holds the shared block's weights.
    pub(crate) fn owns(&self) -> bool {
        self.owner_block == self.block
    }
}

/// One adapter: down to the rank (r, in), back up (out, r).
pub(crate) type Adapter = (Matrix, Matrix);

/// The shared block's weights (held by its owner).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SharedWeights {
    /// RMSNorm gain over hidden ‖ embeddings (2·D).
    pub(crate) norm: Vec<f32>,
    pub(crate) attention: attention::Weights,
    /// RMSNorm gain before the MLP (D).
    pub(crate) ff_norm: Vec<f32>,
    pub(crate) mlp: mlp::Weights,
}

/// A hybrid layer's weights in memory.
#[derive(Clone, Debug, PartialEq)]
pub struct Weights {
    /// The shared block's, on its owner only.
    pub(crate) shared: Option<SharedWeights>,
    /// This use's adapters of q, k, v (if any) and of the MLP's gate ‖ up.
    pub(crate) adapters: [Option<Adapter>; 4],
    /// `linear` (D, D).
    pub(crate) linear: Matrix,
    pub(crate) mamba: mamba2::Weights,
}

impl Weights {
    /// Takes the tensors of `p` from `t`.
    pub(crate) fn take(p: &Zamba2Layer, t: &mut dyn TakeTensor) -> Result<Self> {
        let shared = if p.owns() {
            Some(SharedWeights {
                norm: t.vector(Part::SharedNorm)?,
                attention: attention::Weights::take(&p.shared.attention, t)?,
                ff_norm: t.vector(Part::SharedFfNorm)?,
                mlp: mlp::Weights::take(&p.shared.mlp, t)?,
            })
        } else {
            None
        };
        let mut adapter = |which: u8| -> Result<Option<Adapter>> {
            if which < 3 && !p.shared.attention_adapters {
                return Ok(None);
            }
            Ok(Some((
                t.matrix(Part::Adapter { which, stage: 0 })?,
                t.matrix(Part::Adapter { which, stage: 1 })?,
            )))
        };
        let adapters = [adapter(0)?, adapter(1)?, adapter(2)?, adapter(3)?];
        Ok(Self {
            shared,
            adapters,
            linear: t.matrix(Part::Linear)?,
            mamba: mamba2::Weights::take(&p.mamba, t)?,
        })
    }
}

impl HostParts for Weights {
    /// The weight matrices.
    fn matrices(&self) -> Vec<&Matrix> {
        let mut out = vec![&self.linear];
        out.extend(self.mamba.matrices());
        if let Some(s) = &self.shared {
            out.extend(s.attention.matrices());
            out.extend(s.mlp.matrices());
        }
        out.extend(self.adapters.iter().flatten().flat_map(|(a, b)| [a, b]));
        out
    }

    /// Elements of the small vectors.
    fn vector_len(&self) -> usize {
        self.mamba.vector_len()
            + self.shared.as_ref().map_or(0, |s| s.norm.len() + s.ff_norm.len() + s.attention.vector_len())
    }

    fn ssm(&self) -> Option<&SsmWeights> {
        Some(&self.mamba.ssm)
    }
}

impl HostKind for Zamba2Layer {
    type Weights = Weights;
    const NAME: &'static str = "zamba2";
    /// Its shared block reads the original embeddings at every use.
    const READS: &'static [Input] = &[Input::Embeddings];

    /// Its tensors for residual width `d` (D): full names.
    fn tensors(&self, d: usize) -> Vec<Tensor> {
        let here = format!("model.layers.{}.", self.layer);
        let shared = format!("model.layers.{}.shared_transformer.", self.owner_layer);
        let s = &self.shared;
        let (d2, r, j) = (d.saturating_mul(2), s.rank, self.use_index);
        let mut out = vec![Tensor::new(Part::Linear, &format!("{here}linear.weight"), vec![d, d], true)];
        out.extend(under(&format!("{here}mamba_decoder.mamba."), self.mamba.tensors(d)));
        if self.owns() {
            out.push(Tensor::new(
                Part::SharedNorm,
                &format!("{shared}input_layernorm.weight"),
                vec![d2],
                true,
            ));
            out.extend(under(&format!("{shared}self_attn."), s.attention.tensors_io(d2, d)));
            out.push(Tensor::new(
                Part::SharedFfNorm,
                &format!("{shared}pre_ff_layernorm.weight"),
                vec![d],
                true,
            ));
            out.extend(under(&format!("{shared}feed_forward."), s.mlp.tensors(d)));
        }
        let adapter = |which: u8, list: &str, (inp, outp): (usize, usize)| {
            let name = |stage| format!("{shared}{list}.{j}.{stage}.weight");
            let present = which == 3 || s.attention_adapters;
            vec![
                Tensor::new(Part::Adapter { which, stage: 0 }, &name(0), vec![r, inp], present),
                Tensor::new(Part::Adapter { which, stage: 1 }, &name(1), vec![outp, r], present),
            ]
        };
        let (q, kv) = (s.attention.q_dim(), s.attention.kv_dim());
        out.extend(adapter(0, "self_attn.linear_q_adapter_list", (d2, q)));
        out.extend(adapter(1, "self_attn.linear_k_adapter_list", (d2, kv)));
        out.extend(adapter(2, "self_attn.linear_v_adapter_list", (d2, kv)));
        out.extend(adapter(3, "feed_forward.gate_up_proj_adapter_list", (d, s.mlp.inner.saturating_mul(2))));
        out
    }

    /// Its state: the Mamba mixer's conv window and SSM state, then the shared attention's
    /// cache for this use.
    fn state_regions(&self) -> Vec<(&'static str, Extent)> {
        [self.mamba.state_regions(), self.shared.attention.state_regions()].concat()
    }

    /// Fails unless the sizes are usable.
    fn validate(&self, d: usize) -> Result<()> {
        self.mamba.validate(d)?;
        self.shared.attention.validate(d)?;
        self.shared.mlp.validate(d)?;
        positive(&[("adapter_rank", self.shared.rank)])?;
        if self.shared.attention_adapters && self.shared.attention.kv_dim() != self.shared.attention.q_dim() {
            return Err(Error::Config(
                "use_shared_attention_adapter needs num_key_value_heads = num_attention_heads".into(),
            ));
        }
        checked_counts(&self.tensors(d), &self.state_regions())
    }

    fn attention(&self) -> Option<&Attention> {
        Some(&self.shared.attention)
    }

    fn mamba_dims(&self) -> Option<(usize, usize)> {
        Some((self.mamba.d_inner, self.mamba.d_state))
    }

    fn take(&self, t: &mut dyn TakeTensor) -> Result<Weights> {
        Weights::take(self, t)
    }

    /// The shared block's output joins the Mamba input before its norm: this layer norms
    /// `h + linear(shared(h ‖ e))` itself.
    fn forward(&self, w: &Weights, layer: HostLayer<'_>) -> Result<Vec<f32>> {
        let shared = layer
            .layers
            .get(self.owner_block)
            .and_then(|owner| owner.downcast_ref::<Weights>())
            .and_then(|owner| owner.shared.as_ref())
            .ok_or_else(|| Error::Internal(format!("block {}'s shared block has no weights", self.block)))?;
        let e = layer.inputs.embeddings.as_deref().ok_or_else(|| {
            Error::Internal(format!("block {} reads the embeddings, and none were kept", self.block))
        })?;
        let HostLayer { h, norm, eps, a, st, cap, .. } = layer;
        let Capture { positions, states, layer } = cap;
        let run = Run { a, x: &[], st: &mut *st, cap: Capture { positions, states: &mut *states, layer } };
        let input = cpu::input(self, w, shared, (h, e), run, eps);
        let x = rms_norm(&input, norm, eps);
        let run = Run { a, x: &x, st, cap: Capture { positions, states, layer } };
        Ok(mamba2::cpu::forward(&self.mamba, &w.mamba, run))
    }
}
