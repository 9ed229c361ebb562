//! A GGUF file's chat metadata as the HF files a model folder has for it: the chat templates
//! (`tokenizer.chat_template`, and the named `tokenizer.chat_template.NAME` that
//! `tokenizer.chat_templates` lists) and the special tokens' texts as `tokenizer_config.json`;
//! the ids that end generation and the sampling defaults (`general.sampling.*`) as
//! `generation_config.json` — what [`crate::chat::ChatConfig::from_files`] reads.

use std::collections::HashSet;

use serde_json::{Map, Value as Json, json};

use crate::error::Result;
use crate::load::gguf::value::Metadata;

/// What the chat files say of a vocabulary's special tokens (the tokenizer's, `tokenizer.rs`).
pub(super) struct Specials {
    /// Tokens in the vocabulary.
    pub(super) n_tokens: usize,
    /// The end-of-text id.
    pub(super) eos: Option<u32>,
    /// The texts of BOS, EOS, UNK and PAD, where the file names them.
    pub(super) texts: [(&'static str, Option<String>); 4],
    /// Whether BOS / EOS are added to an encoded text.
    pub(super) add_bos: bool,
    pub(super) add_eos: bool,
}

/// `tokenizer_config.json`: the chat templates and the special tokens' texts.
pub(super) fn tokenizer_config(m: &Metadata, vocab: Option<&Specials>) -> Result<Vec<u8>> {
    let mut out = Map::new();
    let default = m.opt_str("tokenizer.chat_template")?;
    let mut named = Vec::new();
    let mut seen = HashSet::new();
    for (i, v) in m.opt_array("tokenizer.chat_templates")?.unwrap_or(&[]).iter().enumerate() {
        let name =
            v.as_str().ok_or_else(|| m.fail(format!("tokenizer.chat_templates[{i}] is not a string")))?;
        if name != "default" && seen.insert(name) {
            let key = format!("tokenizer.chat_template.{name}");
            named.push(json!({"name": name, "template": m.str(&key)?}));
        }
    }
    match (default, named.is_empty()) {
        (Some(t), true) => _ = out.insert("chat_template".into(), json!(t)),
        (d, false) => {
            let mut list: Vec<Json> =
                d.map(|t| json!({"name": "default", "template": t})).into_iter().collect();
            list.extend(named);
            out.insert("chat_template".into(), Json::Array(list));
        }
        (None, true) => {}
    }
    if let Some(v) = vocab {
        for (key, text) in &v.texts {
            if let Some(t) = text {
                out.insert((*key).into(), json!(t));
            }
        }
        out.insert("add_bos_token".into(), json!(v.add_bos));
        out.insert("add_eos_token".into(), json!(v.add_eos));
    }
    Ok(serde_json::to_vec(&Json::Object(out)).expect("JSON"))
}

/// `generation_config.json`: the ids that end generation (llama.cpp's eos, eot, eom) and the
/// sampling defaults the file carries, if any.
pub(super) fn generation_config(m: &Metadata, vocab: Option<&Specials>) -> Result<Option<Vec<u8>>> {
    let mut out = Map::new();
    if let Some(v) = vocab {
        let max = v.n_tokens as u64 - 1;
        let mut ends: Vec<u64> = v.eos.map(u64::from).into_iter().collect();
        for key in ["tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"] {
            if let Some(id) = m.opt_uint(key, max)?
                && !ends.contains(&id)
            {
                ends.push(id);
            }
        }
        if !ends.is_empty() {
            out.insert("eos_token_id".into(), json!(ends));
        }
    }
    for (key, name) in [
        ("general.sampling.temp", "temperature"),
        ("general.sampling.top_p", "top_p"),
        ("general.sampling.top_k", "top_k"),
        ("general.sampling.penalty_repeat", "repetition_penalty"),
    ] {
        if let Some(x) = m.opt_f64(key)? {
            out.insert(name.into(), if name == "top_k" { json!(x as i64) } else { json!(x) });
        }
    }
    Ok((!out.is_empty()).then(|| serde_json::to_vec(&Json::Object(out)).expect("JSON")))
}
