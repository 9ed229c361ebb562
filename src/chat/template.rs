//! [`ChatTemplate`]: a model's Jinja chat template rendered as Hugging Face transformers renders
//! it (`apply_chat_template`, `transformers/utils/chat_template_utils.py`): a sandboxed Jinja
//! environment with `trim_blocks` and `lstrip_blocks`, loop controls, `raise_exception`,
//! `strftime_now`, `tojson` as Python's `json.dumps` ([`super::pyjson`]), Python's str/dict/list
//! methods (minijinja-contrib's `pycompat`), and the context HF passes: `messages`, `tools`,
//! `documents`, `add_generation_prompt`, the tokenizer's special tokens, and any other key.

use minijinja::value::{Kwargs, Value};
use minijinja::{Environment, ErrorKind};

use super::pyjson::{Style, dumps};
use super::template_memory::{TemplateUsage, guard_method, limit_for};
use crate::error::{Error, Result};

/// The VM instructions one rendering may run (minijinja's fuel).
const FUEL: u64 = 10_000_000;

/// The most of a template's own error message (`raise_exception`) an error keeps.
const MESSAGE_CHARS: usize = 500;

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    /// The special tokens HF passes (`bos_token`, `eos_token`, `unk_token`, `pad_token`).
    special: Vec<(String, String)>,
    /// The source it was compiled from.
    source: String,
}

const NAME: &str = "chat_template";

/// A minijinja error as the crate's typed one, with the template line it points at.
fn template_error(e: minijinja::Error) -> Error {
    let mut message = match e.detail() {
        Some(detail) if e.kind() == ErrorKind::InvalidOperation => detail.to_string(),
        _ => e.to_string(),
    };
    let mut source = std::error::Error::source(&e);
    while let Some(inner) = source {
        message.push_str(&format!(": {inner}"));
        source = inner.source();
    }
    if message.starts_with("template memory limit") {
        message.push_str(" (a template may make 4 MiB plus twice its conversation's size)");
    }
    // A template's message can be as long as its memory limit: keep its start.
    if let Some((cut, _)) = message.char_indices().nth(MESSAGE_CHARS) {
        message.truncate(cut);
        message.push('…');
    }
    Error::Template { line: e.line(), message }
}

impl ChatTemplate {
    /// Compiles `source`; `special` are the tokenizer's special tokens as (name, text), e.g.
    /// `("eos_token", "<|end_of_text|>")`. A syntax error is [`Error::Template`] with its line.
    pub fn new(source: &str, special: Vec<(String, String)>) -> Result<Self> {
        Self::with_clock(source, special, None)
    }

    /// Like [`ChatTemplate::new`], with `strftime_now` reading `now` instead of the local clock
    /// (reproducible renderings: tests, fixtures).
    pub fn with_clock(
        source: &str,
        special: Vec<(String, String)>,
        now: Option<chrono::NaiveDateTime>,
    ) -> Result<Self> {
        let mut env = Environment::new();
        // A template comes with the model folder: one that would loop for ever (or for hours)
        // runs out of fuel instead, a Template error. HF's templates use well under a thousand
        // units on the reference conversations.
        env.set_fuel(Some(FUEL));
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        // Python's str/dict/list methods, `join` and `replace` sized first (minijinja-contrib
        // builds them unchecked; the rest make at most a few times what they are given).
        env.set_unknown_method_callback(|state, value, method, args| {
            guard_method(value, method, args)?;
            minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
        });
        env.add_function("raise_exception", |message: String| -> Result<Value, minijinja::Error> {
            Err(minijinja::Error::new(ErrorKind::InvalidOperation, message))
        });
        env.add_function("strftime_now", move |format: String| -> Result<String, minijinja::Error> {
            let now = now.unwrap_or_else(|| chrono::Local::now().naive_local());
            let mut out = String::new();
            use std::fmt::Write;
            write!(out, "{}", now.format(&format)).map_err(|_| {
                minijinja::Error::new(
                    ErrorKind::InvalidOperation,
                    format!("strftime_now: bad format {format:?}"),
                )
            })?;
            Ok(out)
        });
        env.add_filter("tojson", |v: Value, kwargs: Kwargs| -> Result<String, minijinja::Error> {
            let indent: Option<Value> = kwargs.get("indent")?;
            let separators: Option<Vec<String>> = kwargs.get("separators")?;
            let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
            let _: Option<bool> = kwargs.get("ensure_ascii")?; // always False in HF's templates
            kwargs.assert_all_used()?;
            let indent = match indent {
                None => None,
                Some(v) if v.is_none() => None,
                Some(v) => match v.as_str() {
                    Some(s) => Some(s.to_string()),
                    None => {
                        let n = usize::try_from(v)?;
                        minijinja::memory::check_result_len(n)?;
                        Some(" ".repeat(n))
                    }
                },
            };
            let separators = match separators.as_deref() {
                Some([item, key]) => Some((item.clone(), key.clone())),
                Some(_) => {
                    return Err(minijinja::Error::new(
                        ErrorKind::InvalidOperation,
                        "tojson: separators is a pair",
                    ));
                }
                None => None,
            };
            dumps(&v, &Style::new(indent, separators, sort_keys.unwrap_or(false)))
        });
        // Compiling folds constant expressions (`'x' * 10**9`): under the limit too.
        let (compiled, _) = minijinja::memory::with_limit(limit_for(source.len()), || {
            env.add_template_owned(NAME, source.to_string())
        });
        compiled.map_err(template_error)?;
        Ok(Self { env, special, source: source.to_string() })
    }

    /// Renders the conversation in `context`, a JSON object: `messages` (a list of `{role,
    /// content, …}`), optionally `tools`, `documents`, `add_generation_prompt` and any key the
    /// template reads (HF's `**kwargs`, e.g. `enable_thinking`). The special tokens are there
    /// unless the context sets them.
    pub fn render(&self, context: &str) -> Result<String> {
        self.render_defaulting(context, false)
    }

    /// The template's source text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Like [`ChatTemplate::render`], with `add_generation_prompt` true unless the context says
    /// otherwise: the prompt of a chat turn.
    pub fn render_prompt(&self, context: &str) -> Result<String> {
        self.render_defaulting(context, true)
    }

    /// Like [`ChatTemplate::render`] (`generation_prompt`: [`ChatTemplate::render_prompt`]),
    /// with what the rendering used of its memory budget (see [`super::template_memory`]).
    pub fn render_measured(&self, context: &str, generation_prompt: bool) -> (Result<String>, TemplateUsage) {
        let (rendered, usage) = minijinja::memory::with_limit(limit_for(context.len()), || {
            self.render_unlimited(context, generation_prompt)
        });
        (rendered, TemplateUsage::from(usage))
    }

    /// Every rendering runs under the memory limit: a template cannot make more than
    /// [`super::template_memory::TEMPLATE_MEMORY`] bytes plus twice its conversation's size.
    fn render_defaulting(&self, context: &str, generation_prompt: bool) -> Result<String> {
        self.render_measured(context, generation_prompt).0
    }

    fn render_unlimited(&self, context: &str, generation_prompt: bool) -> Result<String> {
        let ctx: Value = serde_json::from_str(context)
            .map_err(|e| Error::InvalidInput(format!("the chat context is not a JSON object: {e}")))?;
        if ctx.kind() != minijinja::value::ValueKind::Map {
            return Err(Error::InvalidInput("the chat context is not a JSON object".into()));
        }
        let mut map: Vec<(Value, Value)> = Vec::new();
        for (name, text) in &self.special {
            map.push((Value::from(name.as_str()), Value::from(text.as_str())));
        }
        for (key, default) in [
            ("tools", Value::from(())),
            ("documents", Value::from(())),
            ("add_generation_prompt", Value::from(generation_prompt)),
        ] {
            map.push((Value::from(key), default));
        }
        for key in ctx.try_iter().map_err(template_error)? {
            let value = ctx.get_item(&key).map_err(template_error)?;
            map.retain(|(k, _)| k != &key);
            map.push((key, value));
        }
        if map.iter().all(|(k, _)| k.as_str() != Some("messages")) {
            return Err(Error::InvalidInput("the chat context has no messages".into()));
        }
        let context = Value::from_iter(map);
        let template = self.env.get_template(NAME).map_err(template_error)?;
        template.render(context).map_err(template_error)
    }
}
