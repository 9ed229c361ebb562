//! llama.cpp's architectures, mapped back to the Hugging Face config and tensor names webmamba
//! reads: `general.architecture` picks the mapping, the `<arch>.*` metadata becomes the
//! `config.json` HF would have (the converter's `set_gguf_parameters` read backwards), and each
//! GGUF tensor name (`blk.N.ssm_in.weight`) the HF name it was converted from
//! (`conversion/mamba.py`, gguf-py's `tensor_mapping.py`), with what undoes its transform.
//!
//! The converter's own choices, undone here:
//! - `A_log` is stored as A = −exp(A_log) (Mamba-1 and Mamba-2): loaded as ln(−A);
//! - conv1d kernels are squeezed to (channels, K), Mamba-2's A and D get a unit dimension and its
//!   gated norm is regrouped as (G, E·D/G): the same bytes, shapes matched loosely
//!   (`Layout`'s `fits`);
//! - an LM head equal to the embedding is dropped: the model is tied;
//! - the vocabulary is padded with `[PAD…]` tokens to a multiple of 8 (Mamba) or 16 (Mamba-2)
//!   in the tokenizer only: V is the embedding's rows.
//!
//! The hybrids are mapped in [`super::arch_hybrid`]. Architectures webmamba has block kinds for
//! but no mapping yet, and every other one, are an `UnsupportedModel` naming the architecture.

use serde_json::{Value as Json, json};

use crate::error::{Error, Result};
use crate::load::gguf::arch_common::{MAX_DIM, Renamed, Shape};
use crate::load::gguf::arch_hybrid::{self, HYBRIDS};
use crate::load::gguf::header::TensorInfo;
use crate::load::gguf::value::Metadata;
use crate::model::Stored;

/// A GGUF file's model, as HF would have it.
pub(crate) struct Mapped {
    /// The `config.json` the converter read.
    pub config_json: Vec<u8>,
    /// For each tensor (same order), its HF name, or `None` when unused.
    pub names: Vec<Option<Renamed>>,
}

/// The architectures mapped here (`general.architecture`; the hybrids: [`HYBRIDS`]).
const READ: &[&str] = &["mamba", "mamba2"];

/// Maps the model of `m` (the first file's metadata) whose tensors are `tensors` (every file's,
/// in file order).
pub(crate) fn map(m: &Metadata, tensors: &[&TensorInfo]) -> Result<Mapped> {
    let arch = m.str("general.architecture")?;
    if !READ.contains(&arch) && !HYBRIDS.contains(&arch) {
        return Err(Error::UnsupportedModel(format!(
            "{}: GGUF architecture {arch:?} is not one webmamba reads ({})",
            m.file,
            [READ, HYBRIDS].concat().join(", ")
        )));
    }
    let key = |k: &str| format!("{arch}.{k}");
    let has = |name: &str| tensors.iter().any(|t| t.name == name);
    let embedding = tensors
        .iter()
        .find(|t| t.name == "token_embd.weight")
        .ok_or_else(|| Error::MissingTensor { tensor: "token_embd.weight".into(), file: m.file.clone() })?;
    let vocab = embedding.dims.get(1).copied().unwrap_or(1);
    let layers = m.uint(&key("block_count"), 4096)?;
    let d_model = m.uint(&key("embedding_length"), MAX_DIM)?;
    let eps = m.opt_f64(&key("attention.layer_norm_rms_epsilon"))?.unwrap_or(1e-5);
    let tied = !has("output.weight");
    if HYBRIDS.contains(&arch) {
        let names: Vec<&str> = tensors.iter().map(|t| t.name.as_str()).collect();
        let shape = Shape { vocab, layers, d_model, tied, names: &names };
        let config = arch_hybrid::config(arch, m, &shape)?;
        let mut names: Vec<_> = tensors.iter().map(|t| arch_hybrid::hf_name(arch, &t.name)).collect();
        arch_hybrid::rope_rows(arch, m, tensors, d_model, &mut names)?;
        return Ok(Mapped { config_json: serde_json::to_vec(&add_eos(config, m)).expect("JSON"), names });
    }
    let config = match arch {
        "mamba" => {
            let falcon = matches!(m.get(&key("ssm.dt_b_c_rms")), Some(super::Value::Bool(true)));
            json!({
                "architectures": [if falcon { "FalconMambaForCausalLM" } else { "MambaForCausalLM" }],
                "model_type": if falcon { "falcon_mamba" } else { "mamba" },
                "vocab_size": vocab,
                "hidden_size": d_model,
                "num_hidden_layers": layers,
                "intermediate_size": m.uint(&key("ssm.inner_size"), MAX_DIM)?,
                "state_size": m.uint(&key("ssm.state_size"), MAX_DIM)?,
                "conv_kernel": m.uint(&key("ssm.conv_kernel"), MAX_DIM)?,
                "time_step_rank": m.uint(&key("ssm.time_step_rank"), MAX_DIM)?,
                "layer_norm_epsilon": eps,
                // llama.cpp normalises Δ, B and C with the model's ε (HF's mixer_rms_eps).
                "mixer_rms_eps": eps,
                "use_bias": has("blk.0.ssm_in.bias"),
                "use_conv_bias": has("blk.0.ssm_conv1d.bias"),
                "tie_word_embeddings": tied,
            })
        }
        "mamba2" => {
            let d_inner = m.uint(&key("ssm.inner_size"), MAX_DIM)?;
            // The converter writes d_inner / head_dim as the time-step rank: the head count.
            let heads = m.uint(&key("ssm.time_step_rank"), MAX_DIM)?.max(1);
            json!({
                "architectures": ["Mamba2ForCausalLM"],
                "model_type": "mamba2",
                "vocab_size": vocab,
                "hidden_size": d_model,
                "num_hidden_layers": layers,
                "expand": d_inner as f64 / d_model.max(1) as f64,
                "num_heads": heads,
                "head_dim": d_inner / heads,
                "n_groups": m.uint(&key("ssm.group_count"), MAX_DIM)?,
                "state_size": m.uint(&key("ssm.state_size"), MAX_DIM)?,
                "conv_kernel": m.uint(&key("ssm.conv_kernel"), MAX_DIM)?,
                "layer_norm_epsilon": eps,
                "use_bias": has("blk.0.ssm_in.bias"),
                "use_conv_bias": has("blk.0.ssm_conv1d.bias"),
                "tie_word_embeddings": tied,
            })
        }
        _ => unreachable!("READ lists the architectures mapped here"),
    };
    let names = tensors.iter().map(|t| hf_name(arch, &t.name)).collect();
    Ok(Mapped { config_json: serde_json::to_vec(&add_eos(config, m)).expect("JSON"), names })
}

/// The tokenizer's end-of-text id as config.json's `eos_token_id` (chat and generation stop on
/// it).
fn add_eos(mut config: Json, m: &Metadata) -> Json {
    for (gguf, hf) in
        [("tokenizer.ggml.eos_token_id", "eos_token_id"), ("tokenizer.ggml.bos_token_id", "bos_token_id")]
    {
        if let Some(id) = m.get(gguf).and_then(super::Value::as_i64) {
            config[hf] = json!(id);
        }
    }
    config
}

/// The HF name of GGUF tensor `name` of architecture `arch`.
fn hf_name(arch: &str, name: &str) -> Option<Renamed> {
    let plain = |n: String| Some(Renamed { name: n, ln_neg: false, head_rows: 0 });
    match name {
        "token_embd.weight" => return plain("backbone.embeddings.weight".into()),
        "output_norm.weight" => return plain("backbone.norm_f.weight".into()),
        "output.weight" => return plain("lm_head.weight".into()),
        _ => {}
    }
    let rest = name.strip_prefix("blk.")?;
    let (layer, leaf) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    let p = format!("backbone.layers.{layer}");
    let mixer = |leaf: &str| plain(format!("{p}.mixer.{leaf}"));
    match (arch, leaf) {
        (_, "attn_norm.weight") => plain(format!("{p}.norm.weight")),
        (_, "ssm_in.weight") => mixer("in_proj.weight"),
        (_, "ssm_in.bias") => mixer("in_proj.bias"),
        (_, "ssm_conv1d.weight") => mixer("conv1d.weight"),
        (_, "ssm_conv1d.bias") => mixer("conv1d.bias"),
        (_, "ssm_out.weight") => mixer("out_proj.weight"),
        (_, "ssm_out.bias") => mixer("out_proj.bias"),
        (_, "ssm_d") => mixer("D"),
        (_, "ssm_a") => Some(Renamed { name: format!("{p}.mixer.A_log"), ln_neg: true, head_rows: 0 }),
        ("mamba", "ssm_x.weight") => mixer("x_proj.weight"),
        ("mamba", "ssm_dt.weight") => mixer("dt_proj.weight"),
        ("mamba", "ssm_dt.bias") => mixer("dt_proj.bias"),
        ("mamba2", "ssm_dt.bias") => mixer("dt_bias"),
        ("mamba2", "ssm_norm.weight") => mixer("norm.weight"),
        _ => None,
    }
}

/// How a tensor of ggml type `ty` streams when renamed as `r`.
pub(crate) fn stored(ty: super::GgmlType, r: &Renamed) -> Option<Stored> {
    use super::GgmlType::{Bf16, F16, F32};
    match ty {
        F32 | F16 | Bf16 if !r.ln_neg && r.head_rows == 0 => None,
        ty => Some(Stored { ty, ln_neg: r.ln_neg, head_rows: r.head_rows }),
    }
}
