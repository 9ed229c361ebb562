//! A GGUF file's tokenizer (`tokenizer.ggml.*`) as the HF `tokenizer.json` the `tokenizers`
//! crate loads, and its chat template and special tokens as a `tokenizer_config.json` (plus a
//! `generation_config.json` for the end-of-generation ids and sampling defaults), so a GGUF
//! model tokenizes and chats as its HF folder does.
//!
//! - `gpt2` (byte-level BPE): the tokens and merges as stored, the pre-tokenizer from
//!   `tokenizer.ggml.pre` ([`super::pretok`]);
//! - `llama` (SentencePiece): BPE over the pieces with byte fallback, its merges every split of
//!   a token into two tokens, ranked by the merged token's score — llama.cpp's SPM tokenizer
//!   merges the adjacent pair whose merge scores highest, as SentencePiece's BPE does — and a
//!   `▁` prepended to each piece of text (after the start and after each special token, as
//!   llama.cpp does) when `add_space_prefix` (default) says so.
//!
//! Control, unknown and user-defined tokens become added tokens (llama.cpp matches all three
//! in the text first, longest first; only user-defined ones are not special). Every count,
//! id and merge is checked: a file that disagrees with itself is an [`Error::Gguf`] naming the
//! key, never a panic or a tokenizer that splits text differently from the model's.

use std::collections::HashMap;

use serde_json::{Map, Value as Json, json};

use crate::error::Result;
use crate::load::gguf::chat_meta::{Specials, generation_config, tokenizer_config};
use crate::load::gguf::pretok;
use crate::load::gguf::value::{Metadata, Value};
use crate::load::json_shape::{MAX_ADDED_TOKENS, MAX_MERGES, MAX_VOCAB};

/// What a GGUF file gives for tokenizing and chat.
#[derive(Clone, Debug)]
pub struct GgufTokenizer {
    /// `tokenizer.json` bytes; `None` when the file has no `tokenizer.ggml.model` (or `none`).
    pub tokenizer_json: Option<Vec<u8>>,
    /// `tokenizer_config.json` bytes: `chat_template` (from `tokenizer.chat_template` and the
    /// named `tokenizer.chat_template.NAME`), `bos_token`, `eos_token`, `unk_token`,
    /// `pad_token` as their texts, `add_bos_token`, `add_eos_token`.
    pub tokenizer_config_json: Vec<u8>,
    /// `generation_config.json` bytes when the file names end-of-generation ids (eos, eot,
    /// eom) or sampling defaults (`general.sampling.temp`, `top_k`, `top_p`,
    /// `penalty_repeat`).
    pub generation_config_json: Option<Vec<u8>>,
}

/// llama.cpp's token types.
const NORMAL: u64 = 1;
const UNKNOWN: u64 = 2;
const CONTROL: u64 = 3;
const USER_DEFINED: u64 = 4;

/// Longest token (bytes) whose splits are tried as merges of a SentencePiece vocabulary (its
/// pieces are at most a few dozen bytes).
const MAX_SPM_MERGE_TOKEN: usize = 256;

/// Bytes looked up while deriving a SentencePiece vocabulary's merges (each split of a token
/// looks up both halves: a token of n bytes costs about n² of them). Published vocabularies
/// take a few tens of millions (Gemma's 256k pieces ~50M); a hostile file is refused here.
const MAX_SPM_MERGE_WORK: u64 = 1 << 29;

/// A bool key, `default` when absent.
fn opt_bool(m: &Metadata, key: &str, default: bool) -> Result<bool> {
    match m.get(key) {
        None => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(m.fail(format!("metadata {key} is not a bool"))),
    }
}

/// Builds the tokenizer files from a GGUF file's metadata.
pub fn from_metadata(m: &Metadata) -> Result<GgufTokenizer> {
    let vocab = match m.opt_str("tokenizer.ggml.model")? {
        None | Some("none") => None,
        Some(kind @ ("gpt2" | "llama")) => Some(Vocab::read(m, kind == "llama")?),
        Some(other) => {
            return Err(m.fail(format!(
                "tokenizer.ggml.model \"{other}\" is a tokenizer webmamba does not build (gpt2 \
                     and llama are)"
            )));
        }
    };
    let tokenizer_json = match (m.opt_str("tokenizer.huggingface.json")?, &vocab) {
        // The converter's copy of the folder's own tokenizer.json, when it kept one.
        (Some(json), _) => Some(json.as_bytes().to_vec()),
        (None, Some(v)) => Some(serde_json::to_vec(&v.tokenizer_json(m)?).expect("JSON")),
        (None, None) => None,
    };
    let specials = vocab.as_ref().map(|v| Specials {
        n_tokens: v.tokens.len(),
        eos: v.eos,
        texts: [("bos_token", v.bos), ("eos_token", v.eos), ("unk_token", v.unk), ("pad_token", v.pad)]
            .map(|(key, id)| (key, v.text(id).map(str::to_string))),
        add_bos: v.add_bos,
        add_eos: v.add_eos,
    });
    Ok(GgufTokenizer {
        tokenizer_json,
        tokenizer_config_json: tokenizer_config(m, specials.as_ref())?,
        generation_config_json: generation_config(m, specials.as_ref())?,
    })
}

/// The vocabulary as stored, checked.
pub(super) struct Vocab {
    spm: bool,
    pub(super) tokens: Vec<String>,
    types: Vec<u64>,
    scores: Vec<f32>,
    pub(super) bos: Option<u32>,
    pub(super) eos: Option<u32>,
    pub(super) unk: Option<u32>,
    pub(super) pad: Option<u32>,
    pub(super) add_bos: bool,
    pub(super) add_eos: bool,
}

impl Vocab {
    fn read(m: &Metadata, spm: bool) -> Result<Self> {
        let list = m.opt_array("tokenizer.ggml.tokens")?.unwrap_or(&[]);
        if list.is_empty() || list.len() as u64 > MAX_VOCAB {
            return Err(m.fail(format!(
                "tokenizer.ggml.tokens has {} tokens (1..={MAX_VOCAB} are accepted)",
                list.len()
            )));
        }
        let n = list.len();
        let tokens = list
            .iter()
            .enumerate()
            .map(|(i, v)| match v.as_str() {
                // llama.cpp's name for an empty token.
                Some("") => Ok(format!("[EMPTY_{i}]")),
                Some(s) => Ok(s.to_string()),
                None => Err(m.fail(format!("tokenizer.ggml.tokens[{i}] is not a string"))),
            })
            .collect::<Result<Vec<_>>>()?;
        let same_length = |key: &str| -> Result<Option<&[Value]>> {
            match m.opt_array(key)? {
                Some(a) if a.len() != n => {
                    Err(m.fail(format!("{key} has {} values for {n} tokens", a.len())))
                }
                a => Ok(a),
            }
        };
        let types = match same_length("tokenizer.ggml.token_type")? {
            None => vec![NORMAL; n],
            Some(a) => a
                .iter()
                .enumerate()
                .map(|(i, v)| match v.as_i64() {
                    Some(0) => Ok(NORMAL),
                    Some(t @ 1..=6) => Ok(t as u64),
                    _ => Err(m.fail(format!("tokenizer.ggml.token_type[{i}] is not a type 0..=6"))),
                })
                .collect::<Result<_>>()?,
        };
        let scores = match same_length("tokenizer.ggml.scores")? {
            None => vec![0.0; n],
            Some(a) => a
                .iter()
                .enumerate()
                .map(|(i, v)| match v.as_f64() {
                    Some(f) if f.is_finite() => Ok(f as f32),
                    _ => Err(m.fail(format!("tokenizer.ggml.scores[{i}] is not a finite number"))),
                })
                .collect::<Result<_>>()?,
        };
        let max = n as u64 - 1;
        let id = |key: &str| -> Result<Option<u32>> { Ok(m.opt_uint(key, max)?.map(|i| i as u32)) };
        // llama.cpp's defaults: SentencePiece's <unk>, <s>, </s> are 0, 1, 2 and BOS is added.
        let (bos, eos, unk) = (
            id("tokenizer.ggml.bos_token_id")?,
            id("tokenizer.ggml.eos_token_id")?,
            id("tokenizer.ggml.unknown_token_id")?,
        );
        let spm_default = |d: u32| (spm && (d as usize) < n).then_some(d);
        let pre = m.opt_str("tokenizer.ggml.pre")?;
        let default_bos = spm || pre.and_then(pretok::for_name).is_some_and(|p| p.add_bos);
        let vocab = Self {
            spm,
            bos: bos.or_else(|| spm_default(1)),
            eos: eos.or_else(|| spm_default(2)),
            unk: unk.or_else(|| spm_default(0)),
            pad: id("tokenizer.ggml.padding_token_id")?,
            add_bos: opt_bool(m, "tokenizer.ggml.add_bos_token", default_bos)?,
            add_eos: opt_bool(m, "tokenizer.ggml.add_eos_token", false)?,
            tokens,
            types,
            scores,
        };
        for (what, add, id) in [("BOS", vocab.add_bos, vocab.bos), ("EOS", vocab.add_eos, vocab.eos)] {
            if add
                && id.is_none()
                && m.get(&format!("tokenizer.ggml.add_{}_token", what.to_lowercase())).is_some()
            {
                return Err(m.fail(format!("the file adds a {what} token but names no {what} id")));
            }
        }
        Ok(vocab)
    }

    /// Token text → id; a text stored twice maps to its last id, as in llama.cpp.
    fn ids(&self) -> HashMap<&str, u32> {
        self.tokens.iter().enumerate().map(|(i, t)| (t.as_str(), i as u32)).collect()
    }

    fn tokenizer_json(&self, m: &Metadata) -> Result<Json> {
        let ids = self.ids();
        let mut vocab = Map::with_capacity(ids.len());
        for (i, t) in self.tokens.iter().enumerate() {
            if ids[t.as_str()] == i as u32 {
                vocab.insert(t.clone(), json!(i));
            }
        }
        let added: Vec<Json> = (self.types.iter().enumerate())
            .filter(|&(_, &t)| matches!(t, UNKNOWN | CONTROL | USER_DEFINED))
            .filter(|&(i, _)| ids[self.tokens[i].as_str()] == i as u32)
            .map(|(i, &t)| {
                json!({"id": i, "content": self.tokens[i], "single_word": false, "lstrip": false,
                       "rstrip": false, "normalized": false, "special": t != USER_DEFINED})
            })
            .collect();
        if added.len() as u64 > MAX_ADDED_TOKENS {
            return Err(m.fail(format!(
                "{} control and user-defined tokens (at most {MAX_ADDED_TOKENS})",
                added.len()
            )));
        }
        let (normalizer, pre_tokenizer, decoder, model) =
            if self.spm { self.spm_parts(m, &ids, vocab)? } else { self.bpe_parts(m, &ids, vocab)? };
        Ok(json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": added,
            "normalizer": normalizer,
            "pre_tokenizer": pre_tokenizer,
            "post_processor": self.post_processor(),
            "decoder": decoder,
            "model": model,
        }))
    }

    /// Byte-level BPE: tokens and merges as stored.
    fn bpe_parts(
        &self,
        m: &Metadata,
        ids: &HashMap<&str, u32>,
        vocab: Map<String, Json>,
    ) -> Result<(Json, Json, Json, Json)> {
        let name = m.opt_str("tokenizer.ggml.pre")?.unwrap_or("");
        let pre = pretok::for_name(name).ok_or_else(|| {
            m.fail(format!(
                "tokenizer.ggml.pre \"{name}\" is a pre-tokenizer webmamba does not know, so it \
                     cannot split text as the model was trained to (known: {})",
                pretok::KNOWN.join(", ")
            ))
        })?;
        let stored = m
            .opt_array("tokenizer.ggml.merges")?
            .ok_or_else(|| m.fail("tokenizer.ggml.merges is missing".into()))?;
        if stored.len() as u64 > MAX_MERGES {
            return Err(
                m.fail(format!("tokenizer.ggml.merges has {} merges (at most {MAX_MERGES})", stored.len()))
            );
        }
        let mut merges = Vec::with_capacity(stored.len());
        for (i, v) in stored.iter().enumerate() {
            let bad = |why: &str| m.fail(format!("tokenizer.ggml.merges[{i}] {why}"));
            let s = v.as_str().ok_or_else(|| bad("is not a string"))?;
            // As llama.cpp splits it: at the first space after the first byte.
            let at = (s.as_bytes().iter().skip(1).position(|&b| b == b' ').map(|p| p + 1))
                .ok_or_else(|| bad("is not \"LEFT RIGHT\""))?;
            let (a, b) = (&s[..at], &s[at + 1..]);
            if b.is_empty()
                || !ids.contains_key(a)
                || !ids.contains_key(b)
                || !ids.contains_key(format!("{a}{b}").as_str())
            {
                return Err(bad(&format!("({s:?}) joins tokens that are not in the vocabulary")));
            }
            merges.push(json!([a, b]));
        }
        // No unknown token: llama.cpp drops a byte its byte-level vocabulary lacks, as HF does.
        let model = json!({
            "type": "BPE", "dropout": null, "unk_token": null,
            "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": false,
            "byte_fallback": false, "ignore_merges": pre.ignore_merges, "vocab": vocab, "merges": merges,
        });
        let decoder =
            json!({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true});
        Ok((pre.normalizer, pre.pre_tokenizer, decoder, model))
    }

    /// SentencePiece: BPE over the pieces, merges ranked by the merged piece's score.
    fn spm_parts(
        &self,
        m: &Metadata,
        ids: &HashMap<&str, u32>,
        vocab: Map<String, Json>,
    ) -> Result<(Json, Json, Json, Json)> {
        let space_prefix = opt_bool(m, "tokenizer.ggml.add_space_prefix", true)?;
        // (score, id, left length) → left, right: the highest score first, then as HF's
        // SentencePiece extractor orders them (by id, then the shorter left piece).
        let mut merges: Vec<(f32, u32, usize)> = Vec::new();
        let mut work = 0u64;
        for (id, t) in self.tokens.iter().enumerate() {
            if t.len() > MAX_SPM_MERGE_TOKEN || ids[t.as_str()] != id as u32 {
                continue;
            }
            work += (t.len() * t.len()) as u64;
            if work > MAX_SPM_MERGE_WORK {
                return Err(
                    m.fail("the vocabulary's tokens are too many and too long to derive merges".into())
                );
            }
            for (at, _) in t.char_indices().skip(1) {
                if ids.contains_key(&t[..at]) && ids.contains_key(&t[at..]) {
                    merges.push((self.scores[id], id as u32, at));
                    if merges.len() as u64 > MAX_MERGES {
                        return Err(m.fail(format!("the vocabulary makes more than {MAX_MERGES} merges")));
                    }
                }
            }
        }
        merges.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        let merges: Vec<Json> = merges
            .iter()
            .map(|&(_, id, at)| {
                let t = &self.tokens[id as usize];
                json!([&t[..at], &t[at..]])
            })
            .collect();
        let replace = json!({"type": "Replace", "pattern": {"String": " "}, "content": "\u{2581}"});
        let normalizer = match space_prefix {
            true => {
                json!({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u{2581}"}, replace]})
            }
            false => replace,
        };
        let mut decoders = vec![
            json!({"type": "Replace", "pattern": {"String": "\u{2581}"}, "content": " "}),
            json!({"type": "ByteFallback"}),
            json!({"type": "Fuse"}),
        ];
        if space_prefix {
            decoders.push(json!({"type": "Strip", "content": " ", "start": 1, "stop": 0}));
        }
        let model = json!({
            "type": "BPE", "dropout": null, "unk_token": self.unk.map(|u| &self.tokens[u as usize]),
            "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": true,
            "byte_fallback": true, "ignore_merges": false, "vocab": vocab, "merges": merges,
        });
        Ok((normalizer, Json::Null, json!({"type": "Sequence", "decoders": decoders}), model))
    }

    /// BOS/EOS around each sequence, as `add_bos_token` / `add_eos_token` say.
    fn post_processor(&self) -> Json {
        let bos = self.bos.filter(|_| self.add_bos);
        let eos = self.eos.filter(|_| self.add_eos);
        if bos.is_none() && eos.is_none() {
            return Json::Null;
        }
        let mut specials = Map::new();
        let piece = |seq: &str, type_id: u32| {
            let mut out = Vec::new();
            let special = |id: Option<u32>, out: &mut Vec<Json>| {
                if let Some(id) = id {
                    let t = &self.tokens[id as usize];
                    out.push(json!({"SpecialToken": {"id": t, "type_id": type_id}}));
                }
            };
            special(bos, &mut out);
            out.push(json!({"Sequence": {"id": seq, "type_id": type_id}}));
            special(eos, &mut out);
            out
        };
        for id in [bos, eos].into_iter().flatten() {
            let t = &self.tokens[id as usize];
            specials.insert(t.clone(), json!({"id": t, "ids": [id], "tokens": [t]}));
        }
        let single = piece("A", 0);
        let mut pair = single.clone();
        pair.extend(piece("B", 1));
        json!({"type": "TemplateProcessing", "single": single, "pair": pair, "special_tokens": specials})
    }

    pub(super) fn text(&self, id: Option<u32>) -> Option<&str> {
        id.map(|i| self.tokens[i as usize].as_str())
    }
}
