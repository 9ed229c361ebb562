//! llama.cpp's hybrids with mixtures of experts — `granitehybrid` (Granite-4.0-H), `nemotron_h`
//! and `nemotron_h_moe`, `jamba` — mapped back to HF's config and tensor names (see
//! [`super::arch_hybrid`] for what they share with the others).
//!
//! Besides what every hybrid undoes: Granite's fused `input_linear` MLPs are stored as gate and
//! up apart and every mixture's experts stacked per projection (`ffn_{gate,up,down}_exps`),
//! loaded as they are ([`super::arch_hybrid::llama_cpp_tensors`]); the q/k rows llama.cpp
//! permutes for its interleaved RoPE are put back in HF's order where the model has RoPE
//! (Bamba, [`rope_rows`]) and left as stored where it has none (Granite-4.0-H's NoPE,
//! Nemotron-H: the same per-head permutation of q and k leaves every score q·k unchanged);
//! Jamba's per-layer lists become
//! HF's period and offset.

use serde_json::{Value as Json, json};

use crate::error::{Error, Result};
use crate::load::gguf::arch_common::{
    Common, LLAMA_CPP_TENSORS, MAX_DIM, Renamed, Shape, attention, mlp, ssm2,
};
use crate::load::gguf::header::TensorInfo;
use crate::load::gguf::value::Metadata;

/// The `config.json` of `arch` (one of this file's) whose metadata is `m`.
pub(super) fn config(arch: &str, m: &Metadata, s: &Shape<'_>, c: &Common) -> Result<Json> {
    let key = |k: &str| format!("{arch}.{k}");
    let (n, kv, kv_heads, eps, theta, heads) = (c.n, &c.kv, c.kv_heads, c.eps, c.theta, c.heads);
    Ok(match arch {
        "nemotron_h" | "nemotron_h_moe" => {
            let ff = m.per_layer(&key("feed_forward_length"), n, MAX_DIM)?.unwrap_or_else(|| vec![0; n]);
            // '*' attention, '-' MLP, 'E' experts, 'M' Mamba-2 (nemotron.py: 0 heads and 0
            // width for those).
            let moe = |i: usize| s.names.contains(&format!("blk.{i}.ffn_up_exps.weight").as_str());
            let pattern: String = (0..n)
                .map(|i| match (kv[i], ff[i]) {
                    (0, 0) => 'M',
                    (0, _) if moe(i) => 'E',
                    (0, _) => '-',
                    _ => '*',
                })
                .collect();
            let dense = (0..n).filter(|&i| kv[i] == 0 && ff[i] > 0 && !moe(i)).map(|i| ff[i]).max();
            let inner = m.uint(&key("ssm.inner_size"), MAX_DIM)?;
            let ssm_heads = m.uint(&key("ssm.time_step_rank"), MAX_DIM)?.max(1);
            let experts = |k: &str| m.opt_uint(&key(k), MAX_DIM);
            let mut config = json!({
                "architectures": ["NemotronHForCausalLM"],
                "model_type": "nemotron_h",
                "vocab_size": s.vocab,
                "hidden_size": s.d_model,
                "num_hidden_layers": s.layers,
                "hybrid_override_pattern": pattern,
                "num_attention_heads": heads,
                "num_key_value_heads": kv_heads.max(1),
                "head_dim": m.opt_uint(&key("attention.key_length"), MAX_DIM)?.unwrap_or(s.d_model / heads.max(1)),
                "intermediate_size": ff.iter().copied().max().unwrap_or(0),
                "mamba_num_heads": ssm_heads,
                "mamba_head_dim": inner / ssm_heads,
                "n_groups": m.uint(&key("ssm.group_count"), MAX_DIM)?,
                "ssm_state_size": m.uint(&key("ssm.state_size"), MAX_DIM)?,
                "conv_kernel": m.uint(&key("ssm.conv_kernel"), MAX_DIM)?,
                "use_bias": s.any("ssm_in.bias"),
                "use_conv_bias": s.any("ssm_conv1d.bias"),
                "mlp_bias": s.any("ffn_up.bias"),
                "attention_bias": s.any("attn_q.bias"),
                "layer_norm_epsilon": m.opt_f64(&key("attention.layer_norm_epsilon"))?.unwrap_or(1e-5),
                // llama.cpp's Mamba-2 has no floor on Δ (HF 5.24 clamped it at time_step_min).
                "time_step_min": 0.0,
                "max_position_embeddings": m.opt_uint(&key("context_length"), u64::MAX)?.unwrap_or(4096),
                "tie_word_embeddings": s.tied,
                LLAMA_CPP_TENSORS: "llama.cpp",
            });
            if let Some(width) = dense {
                config["intermediate_size"] = json!(width);
            }
            if pattern.contains('E') {
                let flag = |k: &str| matches!(m.get(&key(k)), Some(super::Value::Bool(true)));
                config["n_routed_experts"] = json!(experts("expert_count")?);
                config["num_experts_per_tok"] = json!(experts("expert_used_count")?);
                config["moe_intermediate_size"] = json!(experts("expert_feed_forward_length")?);
                config["moe_shared_expert_intermediate_size"] =
                    json!(experts("expert_shared_feed_forward_length")?);
                config["n_group"] = json!(experts("expert_group_count")?.unwrap_or(1));
                config["topk_group"] = json!(experts("expert_group_used_count")?.unwrap_or(1));
                config["norm_topk_prob"] = json!(flag("expert_weights_norm"));
                config["routed_scaling_factor"] =
                    json!(m.opt_f64(&key("expert_weights_scale"))?.unwrap_or(1.0));
            }
            config
        }
        "granitehybrid" => {
            // llama.cpp rotates Granite's q/k unless rope.scaling.finetuned is false (Granite-4.0-H
            // is NoPE, Bamba rotates `rope.dimension_count` of each head's channels).
            let head_dim = granite_head_dim(m, s.d_model)?;
            let rotary = match granite_rope(m) {
                true => m.uint(&key("rope.dimension_count"), MAX_DIM)? as f64 / head_dim.max(1) as f64,
                false => 1.0,
            };
            let inner = m.uint(&key("ssm.inner_size"), MAX_DIM)?;
            let ssm_heads = m.uint(&key("ssm.time_step_rank"), MAX_DIM)?.max(1);
            let experts = m.opt_uint(&key("expert_count"), MAX_DIM)?.unwrap_or(0);
            let ff = m.uint(&key("feed_forward_length"), MAX_DIM)?;
            let types: Vec<&str> = kv.iter().map(|&k| if k == 0 { "mamba" } else { "attention" }).collect();
            let number = |k: &str| Ok::<_, Error>(m.opt_f64(&key(k))?.unwrap_or(1.0));
            json!({
                "architectures": ["GraniteMoeHybridForCausalLM"],
                "model_type": "granitemoehybrid",
                "vocab_size": s.vocab,
                "hidden_size": s.d_model,
                "num_hidden_layers": s.layers,
                "layer_types": types,
                "num_attention_heads": heads,
                "num_key_value_heads": kv_heads.max(1),
                "head_dim": head_dim,
                "position_embedding_type": if granite_rope(m) { "rope" } else { "nope" },
                "partial_rotary_factor": rotary,
                // Absent (Bamba), llama.cpp scales scores by 1/√head_dim.
                "attention_multiplier":
                    m.opt_f64(&key("attention.scale"))?.unwrap_or(1.0 / (head_dim.max(1) as f64).sqrt()),
                "embedding_multiplier": number("embedding_scale")?,
                "residual_multiplier": number("residual_scale")?,
                "logits_scaling": number("logit_scale")?,
                "num_local_experts": experts,
                "num_experts_per_tok": m.opt_uint(&key("expert_used_count"), MAX_DIM)?.unwrap_or(0),
                "intermediate_size": ff,
                "shared_intermediate_size":
                    m.opt_uint(&key("expert_shared_feed_forward_length"), MAX_DIM)?.unwrap_or(ff),
                "mamba_n_heads": ssm_heads,
                "mamba_d_head": inner / ssm_heads,
                "mamba_expand": inner as f64 / s.d_model.max(1) as f64,
                "mamba_n_groups": m.uint(&key("ssm.group_count"), MAX_DIM)?,
                "mamba_d_state": m.uint(&key("ssm.state_size"), MAX_DIM)?,
                "mamba_d_conv": m.uint(&key("ssm.conv_kernel"), MAX_DIM)?,
                "mamba_conv_bias": s.any("ssm_conv1d.bias"),
                "mamba_proj_bias": s.any("ssm_in.bias"),
                "attention_bias": s.any("attn_q.bias"),
                "rms_norm_eps": eps,
                "rope_theta": theta,
                "tie_word_embeddings": s.tied,
                LLAMA_CPP_TENSORS: "llama.cpp",
            })
        }
        "jamba" => {
            let moe: Vec<bool> =
                (0..n).map(|i| s.names.contains(&format!("blk.{i}.ffn_gate_exps.weight").as_str())).collect();
            let attends: Vec<bool> = kv.iter().map(|&k| k > 0).collect();
            let (attn_period, attn_offset) = period_of(&attends, "attention")?;
            let (expert_period, expert_offset) = period_of(&moe, "experts")?;
            let inner = m.uint(&key("ssm.inner_size"), MAX_DIM)?;
            json!({
                "architectures": ["JambaForCausalLM"],
                "model_type": "jamba",
                "vocab_size": s.vocab,
                "hidden_size": s.d_model,
                "num_hidden_layers": s.layers,
                "attn_layer_period": attn_period,
                "attn_layer_offset": attn_offset,
                "expert_layer_period": expert_period,
                "expert_layer_offset": expert_offset,
                "num_experts": m.opt_uint(&key("expert_count"), MAX_DIM)?.unwrap_or(1),
                "num_experts_per_tok": m.opt_uint(&key("expert_used_count"), MAX_DIM)?.unwrap_or(1),
                "num_attention_heads": heads,
                "num_key_value_heads": kv_heads.max(1),
                "intermediate_size": m.uint(&key("feed_forward_length"), MAX_DIM)?,
                "mamba_expand": inner as f64 / s.d_model.max(1) as f64,
                "mamba_d_state": m.uint(&key("ssm.state_size"), MAX_DIM)?,
                "mamba_d_conv": m.uint(&key("ssm.conv_kernel"), MAX_DIM)?,
                "mamba_dt_rank": m.uint(&key("ssm.time_step_rank"), MAX_DIM)?,
                "mamba_conv_bias": s.any("ssm_conv1d.bias"),
                "mamba_proj_bias": s.any("ssm_in.bias"),
                "rms_norm_eps": eps,
                "tie_word_embeddings": s.tied,
                LLAMA_CPP_TENSORS: "llama.cpp",
            })
        }
        _ => unreachable!("HYBRIDS lists the architectures mapped"),
    })
}

/// The HF name of tensor `blk.N.<leaf>` of `arch` (one of this file's), its layer's HF prefix
/// `p`.
pub(super) fn leaf_name(arch: &str, p: &str, leaf: &str) -> Option<Renamed> {
    let plain = |n: String| Some(Renamed { name: n, ln_neg: false, head_rows: 0 });
    let at = |sub: &str, leaf: &str| plain(format!("{p}.{sub}{leaf}"));
    match arch {
        "nemotron_h" => match leaf {
            "attn_norm.weight" => at("", "norm.weight"),
            "attn_output.weight" => at("mixer.", "o_proj.weight"),
            "attn_output.bias" => at("mixer.", "o_proj.bias"),
            "ffn_gate_inp.weight" => at("mixer.", "gate.weight"),
            "exp_probs_b.bias" => at("mixer.", "gate.e_score_correction_bias"),
            "ffn_up_exps.weight" => at("mixer.", "experts.up_proj.weight"),
            "ffn_down_exps.weight" => at("mixer.", "experts.down_proj.weight"),
            "ffn_up_shexp.weight" => at("mixer.", "shared_experts.up_proj.weight"),
            "ffn_down_shexp.weight" => at("mixer.", "shared_experts.down_proj.weight"),
            _ => {
                if let Some(r) = ssm2(leaf) {
                    return Some(Renamed { name: format!("{p}.mixer.{}", r.0), ln_neg: r.1, head_rows: 0 });
                }
                mlp(leaf).or_else(|| attention(leaf)).and_then(|l| at("mixer.", l))
            }
        },
        "granitehybrid" => match leaf {
            "attn_norm.weight" => at("", "input_layernorm.weight"),
            "ffn_norm.weight" => at("", "post_attention_layernorm.weight"),
            "attn_output.weight" => at("self_attn.", "o_proj.weight"),
            "attn_output.bias" => at("self_attn.", "o_proj.bias"),
            "ffn_gate_inp.weight" => at("block_sparse_moe.", "router.layer.weight"),
            "ffn_gate_exps.weight" => at("block_sparse_moe.", "experts.gate_proj.weight"),
            "ffn_up_exps.weight" => at("block_sparse_moe.", "experts.up_proj.weight"),
            "ffn_down_exps.weight" => at("block_sparse_moe.", "experts.down_proj.weight"),
            // The shared MLP (or, with no experts, the only one), gate and up apart.
            "ffn_gate_shexp.weight" => at("shared_mlp.", "gate_proj.weight"),
            "ffn_up_shexp.weight" => at("shared_mlp.", "up_proj.weight"),
            "ffn_down_shexp.weight" => at("shared_mlp.", "down_proj.weight"),
            _ => {
                if let Some(r) = ssm2(leaf) {
                    return Some(Renamed { name: format!("{p}.mamba.{}", r.0), ln_neg: r.1, head_rows: 0 });
                }
                if let Some(l) = mlp(leaf) {
                    return at("shared_mlp.", l);
                }
                attention(leaf).and_then(|l| at("self_attn.", l))
            }
        },
        "jamba" => match leaf {
            "attn_norm.weight" => at("", "input_layernorm.weight"),
            "ffn_norm.weight" => at("", "pre_ff_layernorm.weight"),
            "attn_output.weight" => at("self_attn.", "o_proj.weight"),
            "ssm_a" => Some(Renamed { name: format!("{p}.mamba.A_log"), ln_neg: true, head_rows: 0 }),
            "ssm_x.weight" => at("mamba.", "x_proj.weight"),
            "ssm_dt.weight" => at("mamba.", "dt_proj.weight"),
            "ssm_dt.bias" => at("mamba.", "dt_proj.bias"),
            "ssm_dt_norm.weight" => at("mamba.", "dt_layernorm.weight"),
            "ssm_b_norm.weight" => at("mamba.", "b_layernorm.weight"),
            "ssm_c_norm.weight" => at("mamba.", "c_layernorm.weight"),
            "ffn_gate_inp.weight" => at("feed_forward.", "router.weight"),
            "ffn_gate_exps.weight" => at("feed_forward.", "experts.gate_proj.weight"),
            "ffn_up_exps.weight" => at("feed_forward.", "experts.up_proj.weight"),
            "ffn_down_exps.weight" => at("feed_forward.", "experts.down_proj.weight"),
            _ => {
                if let Some((l, _)) = ssm2(leaf) {
                    return at("mamba.", l);
                }
                if let Some(l) = mlp(leaf) {
                    return at("feed_forward.", l);
                }
                attention(leaf).and_then(|l| at("self_attn.", l))
            }
        },
        _ => None,
    }
}

/// Whether llama.cpp rotates a granitehybrid model's q/k (Bamba; Granite-4.0-H has
/// rope.scaling.finetuned false).
fn granite_rope(m: &Metadata) -> bool {
    !matches!(m.get("granitehybrid.rope.scaling.finetuned"), Some(super::Value::Bool(false)))
}

/// A granitehybrid model's attention head width.
fn granite_head_dim(m: &Metadata, d_model: u64) -> Result<u64> {
    let heads = m.uint("granitehybrid.attention.head_count", MAX_DIM)?.max(1);
    Ok(m.opt_uint("granitehybrid.attention.key_length", MAX_DIM)?.unwrap_or(d_model / heads))
}

/// Marks the q/k matrices of a granitehybrid model with RoPE (Bamba) as llama.cpp stores them
/// for its interleaved RoPE (`LlamaModel.permute`: each head's two halves interleaved), to be
/// loaded in HF's order. Without RoPE they stay as stored: the same per-head permutation of q
/// and k leaves every score q·k unchanged.
pub(crate) fn rope_rows(
    arch: &str,
    m: &Metadata,
    tensors: &[&TensorInfo],
    d_model: u64,
    names: &mut [Option<Renamed>],
) -> Result<()> {
    if arch != "granitehybrid" || !granite_rope(m) {
        return Ok(());
    }
    let head_dim = granite_head_dim(m, d_model)?;
    for (t, r) in tensors.iter().zip(names.iter_mut()) {
        let Some(r) = r else { continue };
        let leaf = t.name.splitn(3, '.').nth(2).unwrap_or("");
        match leaf {
            "attn_q.weight" | "attn_k.weight" => {
                let rows = t.dims.get(1).copied().unwrap_or(0);
                if head_dim == 0 || head_dim % 2 != 0 || rows % head_dim != 0 || head_dim > u32::MAX as u64 {
                    return Err(Error::Gguf {
                        file: m.file.clone(),
                        reason: format!("{}: {rows} rows are not whole heads of {head_dim}", t.name),
                    });
                }
                r.head_rows = head_dim as u32;
            }
            "attn_q.bias" | "attn_k.bias" => {
                return Err(Error::UnsupportedModel(format!(
                    "{}: {}: a permuted q/k bias (granitehybrid with RoPE)",
                    m.file, t.name
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Jamba's `*_layer_period` and `*_layer_offset` for the layers marked in `at` (every
/// `period`-th from `offset`); any other pattern is [`Error::UnsupportedModel`].
fn period_of(at: &[bool], what: &str) -> Result<(usize, usize)> {
    let n = at.len();
    let marked: Vec<usize> = (0..n).filter(|&i| at[i]).collect();
    let (period, offset) = match marked.as_slice() {
        [] => (n + 1, n),
        [one] => (n, *one),
        [a, b, ..] => (b - a, *a),
    };
    if (0..n).any(|i| (i % period == offset) != at[i]) {
        return Err(Error::UnsupportedModel(format!(
            "GGUF jamba: the {what} layers {marked:?} are not every k-th layer from one (HF's period and offset)"
        )));
    }
    Ok((period, offset))
}
