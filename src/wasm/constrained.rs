//! Structured output for JavaScript: `responseFormat` in `session.generate` and
//! `session.chat`, and a required tool call's grammar: the constraint a generation is held to
//! ([`Guided`]; it runs in the same loop as free text, `session::run_generate`). A constrained
//! generation that ends before its text is complete (a stop, a stop string, the signal,
//! maxTokens) is remembered ([`Unfinished`]: its format, where its text began, the
//! history it left); a `generate` with the same format on that same history continues it — the
//! constraint replays the tokens since the start ([`crate::chat::constraint::Constraint::replay`])
//! — so stop then continue ends valid, as one run would. Any other history starts afresh.

use std::cell::RefCell;

use wasm_bindgen::prelude::*;

use crate::chat::constraint::{Constraint, Format, Grammars};
use crate::error::{Error, Result};
use crate::session::Runtime;
use crate::wasm::lease::Shared;
use crate::wasm::options::field;

/// A constrained generation that stopped before its text was complete.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Unfinished {
    format: Format,
    /// The history's length where the constrained text began.
    start: usize,
    /// The history it left.
    history: Vec<u32>,
}

/// `options.responseFormat`: `{ type: "json_schema", json_schema: { schema, strict? } }`
/// (OpenAI's shape; `strict` as [`Format::JsonSchema`] reads it), `{ type: "json_object" }`,
/// `{ type: "regex", regex }`, or `{ type: "text" }` / none.
pub(crate) fn response_format(options: &JsValue) -> Result<Option<Format>> {
    let Some(v) = field(options, "responseFormat", "the options")? else { return Ok(None) };
    let text = js_sys::JSON::stringify(&v)
        .ok()
        .and_then(|s| s.as_string())
        .ok_or_else(|| Error::InvalidInput("responseFormat cannot be written as JSON".into()))?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| Error::InvalidInput(format!("responseFormat is not JSON: {e}")))?;
    let wrong = |why: &str| Error::InvalidInput(format!("responseFormat {why}"));
    match value.get("type").and_then(serde_json::Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(Format::JsonObject)),
        Some("json_schema") => {
            let json_schema = value.get("json_schema");
            let strict = match json_schema.and_then(|j| j.get("strict")) {
                None | Some(serde_json::Value::Null) => None,
                Some(serde_json::Value::Bool(b)) => Some(*b),
                Some(_) => return Err(wrong("json_schema.strict must be true or false")),
            };
            match json_schema.and_then(|j| j.get("schema")) {
                Some(schema @ (serde_json::Value::Object(_) | serde_json::Value::Bool(_))) => {
                    Ok(Some(Format::JsonSchema { schema: schema.clone(), strict }))
                }
                _ => Err(wrong("json_schema needs { schema: {...} }")),
            }
        }
        Some("regex") => match value.get("regex").and_then(serde_json::Value::as_str) {
            Some(rx) => Ok(Some(Format::Regex(rx.to_string()))),
            None => Err(wrong("regex needs { regex: \"...\" }")),
        },
        _ => Err(wrong("type must be \"text\", \"json_object\", \"json_schema\" or \"regex\"")),
    }
}

/// A fresh constraint for `format` with the model's grammar compiler (built on first use: it
/// reads every token's bytes). A format llguidance refuses is `InvalidInput`.
fn constraint(shared: &Shared, rt: &Runtime, format: &Format) -> Result<Constraint> {
    let existing = shared.grammars.borrow().clone();
    let grammars = match existing {
        Some(g) => g,
        None => {
            let json = shared.tokenizer_json.as_deref().ok_or_else(|| {
                Error::Tokenizer("structured output needs the model's tokenizer.json".into())
            })?;
            let c = rt.engine().config();
            let eos = rt.end_tokens().first().copied().or(c.eos_token_id).unwrap_or(0);
            let g = Grammars::new(json, c.vocab_size, eos)?;
            *shared.grammars.borrow_mut() = Some(g.clone());
            g
        }
    };
    grammars.constraint(format)
}

/// A constrained generation about to run (`session::run_generate`): its format, its matcher
/// (holding the tokens since `start`, where its text began) and the session's [`Unfinished`],
/// which the run sets ([`remember`]).
pub(crate) struct Guided<'a> {
    pub(crate) format: Format,
    pub(crate) constraint: Constraint,
    pub(crate) start: usize,
    pub(crate) unfinished: &'a RefCell<Option<Unfinished>>,
}

impl<'a> Guided<'a> {
    /// `generate`'s: continues the session's unfinished generation when it is `format`'s (or
    /// a chat turn's `format` after thinking: it goes on as that) and left exactly `history`
    /// (its tokens since its start replayed into the fresh constraint), else begins at the
    /// history's end.
    pub(crate) fn resume(
        shared: &Shared,
        rt: &Runtime,
        format: Format,
        history: &[u32],
        unfinished: &'a RefCell<Option<Unfinished>>,
    ) -> Result<Self> {
        let continued = match unfinished.borrow().as_ref() {
            Some(u)
                if u.history == history && (u.format == format || u.format.after_thinking_of(&format)) =>
            {
                Some((u.format.clone(), u.start))
            }
            _ => None,
        };
        let (format, start) = continued.unwrap_or((format, history.len()));
        let mut constraint = constraint(shared, rt, &format)?;
        constraint.replay(&history[start..])?;
        Ok(Self { format, constraint, start, unfinished })
    }

    /// A chat turn's: a fresh constraint, its text beginning at history length `start` (the
    /// rendered prompt's end). Made before the prompt is fed: a refused format leaves the
    /// session as it was.
    pub(crate) fn fresh(
        shared: &Shared,
        rt: &Runtime,
        format: Format,
        start: usize,
        unfinished: &'a RefCell<Option<Unfinished>>,
    ) -> Result<Self> {
        Ok(Self { constraint: constraint(shared, rt, &format)?, format, start, unfinished })
    }
}

/// After a constrained generation of `format` begun at `start`: remembers it in `unfinished`
/// when it ended before its text was `complete` (a stop, a stop string, the signal,
/// maxTokens, an error), with the `history` it left; forgets it otherwise.
pub(crate) fn remember(
    unfinished: &RefCell<Option<Unfinished>>,
    format: Format,
    start: usize,
    history: &[u32],
    complete: bool,
) {
    *unfinished.borrow_mut() = (!complete).then(|| Unfinished { format, start, history: history.to_vec() });
}
