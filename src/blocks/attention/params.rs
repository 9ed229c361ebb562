//! [`Attention`]'s hyper-parameters and their derived sizes — apart from its plug-in
//! implementation (`mod.rs`: tensors, state, checks), since what any block may be asked for
//! ([`crate::blocks::HostKind::attention`]) is this type.

use crate::blocks::Tensor;
use crate::model::Part;

/// Rotary position embedding (HF's default rope type, `rotate_half` style): the first `dims`
/// channels of every query and key head are rotated by position · θ^(−2i/dims).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rope {
    /// θ (`rope_theta`).
    pub(crate) theta: f32,
    /// Channels rotated per head (head_dim × `partial_rotary_factor`; even).
    pub(crate) dims: usize,
}

/// Per-head RMSNorms on the queries and keys, before RoPE (LFM2's `q_layernorm` /
/// `k_layernorm`; Qwen3.5's `q_norm` / `k_norm`): each head's hd channels by their own RMS,
/// times a gain (hd) shared by the heads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QkNorm {
    /// ε of both norms.
    pub(crate) eps: f32,
    /// The gains' names under the block's prefix (`q_layernorm`, `k_layernorm`).
    pub(crate) names: (&'static str, &'static str),
    /// Whether the norms are zero-centred (Qwen3.5's: the gains are stored as w, used as 1 + w).
    pub(crate) plus_one: bool,
}

/// A causal grouped-query attention block (`q_proj`, `k_proj`, `v_proj`, `o_proj`).
#[derive(Clone, Debug, PartialEq)]
pub struct Attention {
    /// Hq: query heads (`num_attention_heads`).
    pub n_heads: usize,
    /// Hkv: key/value heads (`num_key_value_heads`); divides Hq.
    pub n_kv_heads: usize,
    /// hd: channels per head (`head_dim`, else hidden_size / Hq).
    pub(crate) head_dim: usize,
    /// Whether q/k/v_proj have biases.
    pub(crate) qkv_bias: bool,
    /// Whether o_proj has a bias.
    pub(crate) o_bias: bool,
    /// Rotary embedding, or none (NoPE: Granite-H's "nope", Jamba, Nemotron-H).
    pub(crate) rope: Option<Rope>,
    /// The softmax's scale on q·k (1/√hd, or Granite's `attention_multiplier`).
    pub(crate) scale: f32,
    /// Multiplies the keys (Falcon-H1's `key_multiplier`; 1 elsewhere).
    pub(crate) key_scale: f32,
    /// Per-head norms of q and k, where the model has them.
    pub(crate) qk_norm: Option<QkNorm>,
    /// o_proj's name (`o_proj`; LFM2's `out_proj`).
    pub(crate) o_name: &'static str,
    /// Whether q_proj also writes an output gate (Qwen3.5): per head hd query channels then hd
    /// gate channels, and the attention's output is × σ(gate) before o_proj.
    pub(crate) output_gate: bool,
}

impl Attention {
    /// Width of the queries (Hq · hd).
    pub(crate) fn q_dim(&self) -> usize {
        self.n_heads.saturating_mul(self.head_dim)
    }

    /// Width of the keys and of the values (Hkv · hd).
    pub(crate) fn kv_dim(&self) -> usize {
        self.n_kv_heads.saturating_mul(self.head_dim)
    }

    /// Its tensors for inputs of width `d` and outputs of width `out` (Zamba2's shared block
    /// reads hidden ‖ embeddings, 2·D, and writes D).
    pub(crate) fn tensors_io(&self, d: usize, out: usize) -> Vec<Tensor> {
        let (q, kv) = (self.q_dim(), self.kv_dim());
        let q_rows = if self.output_gate { q.saturating_mul(2) } else { q };
        let t = Tensor::new;
        let norm = |part, name: Option<&str>| {
            let present = self.qk_norm.is_some();
            let plus_one = self.qk_norm.is_some_and(|n| n.plus_one);
            t(part, &format!("{}.weight", name.unwrap_or("")), vec![self.head_dim], present)
                .plus_one(plus_one)
        };
        vec![
            t(Part::Q, "q_proj.weight", vec![q_rows, d], true),
            t(Part::QBias, "q_proj.bias", vec![q_rows], self.qkv_bias),
            t(Part::K, "k_proj.weight", vec![kv, d], true),
            t(Part::KBias, "k_proj.bias", vec![kv], self.qkv_bias),
            t(Part::V, "v_proj.weight", vec![kv, d], true),
            t(Part::VBias, "v_proj.bias", vec![kv], self.qkv_bias),
            t(Part::O, &format!("{}.weight", self.o_name), vec![out, q], true),
            t(Part::OBias, &format!("{}.bias", self.o_name), vec![out], self.o_bias),
            norm(Part::QNorm, self.qk_norm.map(|n| n.names.0)),
            norm(Part::KNorm, self.qk_norm.map(|n| n.names.1)),
        ]
    }
}
