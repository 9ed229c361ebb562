//! llama.cpp's hybrid architectures mapped back to HF's config and tensor names (see
//! [`super::arch`] for the plain Mamba ones and what is shared): `lfm2` and `falcon-h1` here,
//! the hybrids with mixtures of experts (`granitehybrid`, `nemotron_h`, `nemotron_h_moe`,
//! `jamba`) in [`super::arch_moe`]. Qwen3.5's `qwen35` is not mapped (its value heads are
//! stored regrouped, and its norms as 1 + w).
//!
//! What the converter did, undone here:
//! - per-layer `attention.head_count_kv` arrays where 0 marks a layer without attention (and
//!   Nemotron-H's `feed_forward_length` array where 0 marks one without an MLP): HF's layer
//!   pattern (`layer_types`, `hybrid_override_pattern`);
//! - widths the HF config derives (LFM2's auto-adjusted MLP width) written as the real ones;
//! - conv kernels squeezed, Mamba-2's A/D/norm reshaped: matched loosely (`Layout`'s `fits`);
//! - A = −exp(A_log): loaded as ln(−A);
//! - Falcon-H1's µP multipliers, baked into the weights by the converter: the config keeps
//!   HF's defaults of 1, so nothing is divided back out;
//! - tied heads: no `output.weight`;
//! - a gated MLP's gate and up stored apart where HF fuses them, and each mixture's experts
//!   stacked one tensor per projection: loaded as stored, the model told so by
//!   `LLAMA_CPP_TENSORS` (`arch_common.rs`) in the config ([`llama_cpp_tensors`]).

use serde_json::{Value as Json, json};

use crate::blocks::{BlockKind, Mlp, MlpNames};
use crate::error::{Error, Result};
use crate::load::gguf::arch_common::{Common, MAX_DIM, Renamed, Shape, attention, mlp, ssm2};
use crate::load::gguf::arch_moe;
pub(crate) use crate::load::gguf::arch_moe::rope_rows;
use crate::load::gguf::value::Metadata;
use crate::model::Config;

/// A model parsed from a config [`config`] wrote, with its tensors named as llama.cpp's files
/// hold them: a gated MLP's gate and up as two matrices (`gate_proj`, `up_proj`) where HF
/// fuses them, and every mixture's routed experts stacked one tensor per projection.
pub(crate) fn llama_cpp_tensors(c: &mut Config) {
    let split = |m: &mut Mlp| {
        if matches!(m.names, MlpNames::InputOutput | MlpNames::GateUp) {
            m.names = MlpNames::Separate;
        }
    };
    for block in &mut c.blocks {
        match &mut block.kind {
            BlockKind::Mlp(m) => split(m),
            BlockKind::Moe(moe) => {
                moe.stacked = true;
                split(&mut moe.expert);
                moe.shared.iter_mut().for_each(split);
            }
            _ => {}
        }
    }
}

/// The hybrid architectures mapped here (`general.architecture`).
pub(crate) const HYBRIDS: &[&str] =
    &["lfm2", "falcon-h1", "nemotron_h", "nemotron_h_moe", "granitehybrid", "jamba"];

/// The `config.json` of hybrid `arch` whose metadata is `m`.
pub(crate) fn config(arch: &str, m: &Metadata, s: &Shape<'_>) -> Result<Json> {
    let key = |k: &str| format!("{arch}.{k}");
    let n = usize::try_from(s.layers).map_err(|_| Error::Config("too many layers".into()))?;
    // Per layer: the key/value heads, 0 where the layer has no attention.
    let kv = m.per_layer(&key("attention.head_count_kv"), n, MAX_DIM)?.unwrap_or_else(|| vec![0; n]);
    let kv_heads = kv.iter().copied().max().unwrap_or(0);
    let eps = m.opt_f64(&key("attention.layer_norm_rms_epsilon"))?.unwrap_or(1e-5);
    let theta = m.opt_f64(&key("rope.freq_base"))?.unwrap_or(10000.0);
    let heads = m.uint(&key("attention.head_count"), MAX_DIM)?;
    Ok(match arch {
        "lfm2" => {
            let types: Vec<&str> =
                kv.iter().map(|&k| if k == 0 { "conv" } else { "full_attention" }).collect();
            json!({
                "architectures": ["Lfm2ForCausalLM"],
                "model_type": "lfm2",
                "vocab_size": s.vocab,
                "hidden_size": s.d_model,
                "num_hidden_layers": s.layers,
                "layer_types": types,
                "num_attention_heads": heads,
                "num_key_value_heads": kv_heads.max(1),
                // The MLP's real width: HF's auto-adjustment already applied by the converter.
                "intermediate_size": m.uint(&key("feed_forward_length"), MAX_DIM)?,
                "block_auto_adjust_ff_dim": false,
                "conv_L_cache": m.uint(&key("shortconv.l_cache"), MAX_DIM)?,
                "conv_bias": s.any("shortconv.in_proj.bias"),
                "norm_eps": eps,
                "rope_theta": theta,
                "max_position_embeddings": m.opt_uint(&key("context_length"), u64::MAX)?.unwrap_or(128_000),
                "tie_word_embeddings": s.tied,
            })
        }
        "falcon-h1" => {
            let inner = m.uint(&key("ssm.inner_size"), MAX_DIM)?;
            let ssm_heads = m.uint(&key("ssm.time_step_rank"), MAX_DIM)?.max(1);
            // Every µP multiplier is left at HF's default of 1: the converter multiplied each
            // into its weights (the embedding, LM head, q/k/v/o, in_proj's five row blocks,
            // out_proj, the MLP's gate and down).
            json!({
                "architectures": ["FalconH1ForCausalLM"],
                "model_type": "falcon_h1",
                "vocab_size": s.vocab,
                "hidden_size": s.d_model,
                "num_hidden_layers": s.layers,
                "num_attention_heads": heads,
                "num_key_value_heads": kv_heads.max(1),
                "head_dim": m.opt_uint(&key("attention.key_length"), MAX_DIM)?.unwrap_or(s.d_model / heads.max(1)),
                "intermediate_size": m.uint(&key("feed_forward_length"), MAX_DIM)?,
                "mamba_d_ssm": inner,
                "mamba_n_heads": ssm_heads,
                "mamba_d_head": inner / ssm_heads,
                "mamba_n_groups": m.uint(&key("ssm.group_count"), MAX_DIM)?,
                "mamba_d_state": m.uint(&key("ssm.state_size"), MAX_DIM)?,
                "mamba_d_conv": m.uint(&key("ssm.conv_kernel"), MAX_DIM)?,
                // llama.cpp's only gated norm: norm(y · silu(z)), there when the file has it.
                "mamba_rms_norm": s.any("ssm_norm.weight"),
                "mamba_norm_before_gate": false,
                "mamba_conv_bias": s.any("ssm_conv1d.bias"),
                "mamba_proj_bias": s.any("ssm_in.bias"),
                "projectors_bias": s.any("ssm_out.bias"),
                "attention_bias": s.any("attn_q.bias"),
                "mlp_bias": s.any("ffn_up.bias"),
                "rms_norm_eps": eps,
                "rope_theta": theta,
                "max_position_embeddings": m.opt_uint(&key("context_length"), u64::MAX)?.unwrap_or(8192),
                "tie_word_embeddings": s.tied,
            })
        }
        _ => {
            let common = Common { n, kv, kv_heads, eps, theta, heads };
            return arch_moe::config(arch, m, s, &common);
        }
    })
}

/// The HF name of GGUF tensor `name` of hybrid `arch`.
pub(crate) fn hf_name(arch: &str, name: &str) -> Option<Renamed> {
    let plain = |n: String| Some(Renamed { name: n, ln_neg: false, head_rows: 0 });
    let arch = if arch == "nemotron_h_moe" { "nemotron_h" } else { arch };
    match (arch, name) {
        ("nemotron_h", "token_embd.weight") => return plain("backbone.embeddings.weight".into()),
        ("nemotron_h", "output_norm.weight") => return plain("backbone.norm_f.weight".into()),
        (_, "token_embd.weight") => return plain("model.embed_tokens.weight".into()),
        ("lfm2", "token_embd_norm.weight") => return plain("model.embedding_norm.weight".into()),
        ("falcon-h1" | "jamba", "output_norm.weight") => {
            return plain("model.final_layernorm.weight".into());
        }
        ("granitehybrid", "output_norm.weight") => return plain("model.norm.weight".into()),
        (_, "output.weight") => return plain("lm_head.weight".into()),
        _ => {}
    }
    let rest = name.strip_prefix("blk.")?;
    let (layer, leaf) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    let p = match arch {
        "nemotron_h" => format!("backbone.layers.{layer}"),
        _ => format!("model.layers.{layer}"),
    };
    let at = |sub: &str, leaf: &str| plain(format!("{p}.{sub}{leaf}"));
    match arch {
        "lfm2" => match leaf {
            "attn_norm.weight" => at("", "operator_norm.weight"),
            "ffn_norm.weight" => at("", "ffn_norm.weight"),
            "attn_q_norm.weight" => at("self_attn.", "q_layernorm.weight"),
            "attn_k_norm.weight" => at("self_attn.", "k_layernorm.weight"),
            "attn_output.weight" => at("self_attn.", "out_proj.weight"),
            "ffn_gate.weight" => at("feed_forward.", "w1.weight"),
            "ffn_up.weight" => at("feed_forward.", "w3.weight"),
            "ffn_down.weight" => at("feed_forward.", "w2.weight"),
            _ => {
                if let Some(conv) = leaf.strip_prefix("shortconv.") {
                    return at("conv.", conv);
                }
                attention(leaf).and_then(|l| at("self_attn.", l))
            }
        },
        "falcon-h1" => match leaf {
            "attn_norm.weight" => at("", "input_layernorm.weight"),
            // llama.cpp names it without ".weight".
            "ffn_norm" | "ffn_norm.weight" => at("", "pre_ff_layernorm.weight"),
            "attn_output.weight" => at("self_attn.", "o_proj.weight"),
            "attn_output.bias" => at("self_attn.", "o_proj.bias"),
            _ => {
                if let Some(r) = ssm2(leaf) {
                    return Some(Renamed { name: format!("{p}.mamba.{}", r.0), ln_neg: r.1, head_rows: 0 });
                }
                if let Some(l) = mlp(leaf) {
                    return at("feed_forward.", l);
                }
                attention(leaf).and_then(|l| at("self_attn.", l))
            }
        },
        _ => arch_moe::leaf_name(arch, &p, leaf),
    }
}
