//! [`ChatConfig`]: what a checkpoint says about chatting with it, from the files Hugging Face
//! keeps next to the weights — `tokenizer_config.json` (`chat_template`: one string, or a list
//! of named templates; the special tokens, each a string or an AddedToken object),
//! `chat_template.jinja` (newer checkpoints keep the template there; it wins), and
//! `generation_config.json` (`eos_token_id`, one id or a list; the sampling defaults).

use serde_json::Value as Json;

use crate::error::{Error, Result};
use crate::load::json_shape::{JsonShape, MAX_SMALL_JSON_VALUES};

/// The chat-related contents of a checkpoint's small files (all optional).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatConfig {
    /// Named templates: `("default", …)` for a single `chat_template`, and e.g. `"tool_use"`.
    pub(crate) templates: Vec<(String, String)>,
    /// Special tokens as (name, text): `bos_token`, `eos_token`, `unk_token`, `pad_token`.
    pub special_tokens: Vec<(String, String)>,
    /// Token ids that end a turn: generation_config's `eos_token_id` (one or a list), then
    /// config.json's, deduplicated. The `eos_token` text is added by the caller that has the
    /// tokenizer ([`ChatConfig::end_ids`]).
    pub eos_token_ids: Vec<u32>,
    /// generation_config's sampling defaults, as given (`temperature`, `top_p`, `top_k`,
    /// `repetition_penalty`, `do_sample`, `max_new_tokens`).
    pub generation: serde_json::Map<String, Json>,
}

/// The most ids a list of end-of-turn tokens may hold (published: a handful).
pub(crate) const MAX_END_IDS: usize = 1024;

/// A small JSON file's text, parsed — once its values are counted ([`JsonShape`]); `what` names
/// it in errors.
fn parse(what: &str, bytes: &[u8]) -> Result<Json> {
    JsonShape::of(what, bytes, MAX_SMALL_JSON_VALUES)?;
    serde_json::from_slice(bytes).map_err(|e| Error::Config(format!("{what}: {e}")))
}

/// A token id list from `v` (one id or a list of ids).
fn ids(what: &str, v: &Json) -> Result<Vec<u32>> {
    let one = |x: &Json| {
        x.as_u64()
            .and_then(|i| u32::try_from(i).ok())
            .ok_or_else(|| Error::Config(format!("{what}: a token id is a non-negative integer, not {x}")))
    };
    match v {
        Json::Null => Ok(Vec::new()),
        Json::Array(list) if list.len() > MAX_END_IDS => {
            Err(Error::Config(format!("{what}: {} ids; at most {MAX_END_IDS} are accepted", list.len())))
        }
        Json::Array(list) => list.iter().map(one).collect(),
        x => Ok(vec![one(x)?]),
    }
}

/// Whether to look for `chat_template.jinja`, given `tokenizer_config.json` (`None`: absent):
/// only when that file exists without a `chat_template` — where transformers' `save_pretrained`
/// puts the template in the separate file. Loaders ask for no file they need not: in the
/// browser every missing file is a failed request the console shows.
pub fn wants_template_file(tokenizer_config: Option<&[u8]>) -> bool {
    tokenizer_config.is_some_and(|bytes| {
        // A file too large to parse is refused when it is parsed; no template file is needed.
        if JsonShape::of("tokenizer_config.json", bytes, MAX_SMALL_JSON_VALUES).is_err() {
            return false;
        }
        serde_json::from_slice::<Json>(bytes)
            .map_or(true, |v| v.get("chat_template").is_none_or(Json::is_null))
    })
}

impl ChatConfig {
    /// From the files' bytes, each when the checkpoint has it: `tokenizer_config.json`,
    /// `chat_template.jinja`, `generation_config.json`, and `config.json` (its `eos_token_id`).
    pub fn from_files(
        tokenizer_config: Option<&[u8]>,
        chat_template_jinja: Option<&[u8]>,
        generation_config: Option<&[u8]>,
        config_json: Option<&[u8]>,
    ) -> Result<Self> {
        let mut out = ChatConfig::default();
        if let Some(bytes) = tokenizer_config {
            let v = parse("tokenizer_config.json", bytes)?;
            match v.get("chat_template") {
                None | Some(Json::Null) => {}
                Some(Json::String(t)) => out.templates.push(("default".into(), t.clone())),
                Some(Json::Array(list)) => {
                    for item in list {
                        match (
                            item.get("name").and_then(Json::as_str),
                            item.get("template").and_then(Json::as_str),
                        ) {
                            (Some(n), Some(t)) => out.templates.push((n.into(), t.into())),
                            _ => {
                                return Err(Error::Config(
                                    "tokenizer_config.json: chat_template list items are {name, template}"
                                        .into(),
                                ));
                            }
                        }
                    }
                }
                Some(other) => {
                    return Err(Error::Config(format!(
                        "tokenizer_config.json: chat_template is a string or a list, not {other}"
                    )));
                }
            }
            for name in ["bos_token", "eos_token", "unk_token", "pad_token"] {
                let text = match v.get(name) {
                    Some(Json::String(s)) => Some(s.clone()),
                    Some(Json::Object(o)) => o.get("content").and_then(Json::as_str).map(str::to_string),
                    _ => None,
                };
                if let Some(text) = text {
                    out.special_tokens.push((name.into(), text));
                }
            }
        }
        if let Some(bytes) = chat_template_jinja {
            let text = std::str::from_utf8(bytes)
                .map_err(|e| Error::Config(format!("chat_template.jinja is not UTF-8: {e}")))?;
            out.templates.retain(|(n, _)| n != "default");
            out.templates.insert(0, ("default".into(), text.to_string()));
        }
        if let Some(bytes) = generation_config {
            let v = parse("generation_config.json", bytes)?;
            if let Some(e) = v.get("eos_token_id") {
                out.eos_token_ids = ids("generation_config.json eos_token_id", e)?;
            }
            for key in ["temperature", "top_p", "top_k", "repetition_penalty", "do_sample", "max_new_tokens"]
            {
                if let Some(x) = v.get(key).filter(|x| !x.is_null()) {
                    out.generation.insert(key.into(), x.clone());
                }
            }
        }
        if let Some(bytes) = config_json {
            let v = parse("config.json", bytes)?;
            for id in ids("config.json eos_token_id", v.get("eos_token_id").unwrap_or(&Json::Null))? {
                if !out.eos_token_ids.contains(&id) {
                    out.eos_token_ids.push(id);
                }
            }
        }
        Ok(out)
    }

    /// The template to render with: `"tool_use"` when there are tools and the checkpoint has
    /// one by that name, else `"default"`, else the only one (as HF picks).
    pub fn template(&self, with_tools: bool) -> Option<&str> {
        let named = |n: &str| self.templates.iter().find(|(name, _)| name == n).map(|(_, t)| t.as_str());
        (if with_tools { named("tool_use") } else { None })
            .or_else(|| named("default"))
            .or_else(|| (self.templates.len() == 1).then(|| self.templates[0].1.as_str()))
    }

    /// The special token `name` (`"eos_token"`), if given.
    pub fn special(&self, name: &str) -> Option<&str> {
        self.special_tokens.iter().find(|(n, _)| n == name).map(|(_, t)| t.as_str())
    }

    /// The ids that end a turn: [`ChatConfig::eos_token_ids`] and the `eos_token` text's id
    /// (`token_id` looks a token text up in the tokenizer's vocabulary).
    pub fn end_ids(&self, token_id: impl Fn(&str) -> Option<u32>) -> Vec<u32> {
        let mut out = self.eos_token_ids.clone();
        if let Some(id) = self.special("eos_token").and_then(token_id)
            && !out.contains(&id)
        {
            out.push(id);
        }
        out
    }
}
