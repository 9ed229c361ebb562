//! Structured output for JavaScript: `responseFormat` in `session.generate` and
//! `session.chat`. A constrained generation that ends before its text is complete (a stop, the
//! signal, maxTokens) is remembered ([`Unfinished`]: its format, where its text began, the
//! history it left); a `generate` with the same format on that same history continues it — the
//! constraint replays the tokens since the start ([`crate::chat::constraint::Constraint::replay`])
//! — so stop then continue ends valid, as one run would. Any other history starts afresh.

use std::cell::{Cell, RefCell};

use wasm_bindgen::prelude::*;

use crate::chat::constraint::{self, Constraint, Format, Grammars};
use crate::error::{Error, Result};
use crate::sampling::Sampler;
use crate::session::{Runtime, SessionId};
use crate::wasm::lease::Shared;
use crate::wasm::options::{GenerateConfig, field};

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
pub(crate) fn constraint(shared: &Shared, rt: &Runtime, format: &Format) -> Result<Constraint> {
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

/// Where a constrained generation on `history` begins: the start of `unfinished` when it is
/// this format's and left exactly this history (its tokens then replayed into `constraint`),
/// else the history's end.
pub(crate) fn resume(
    unfinished: &RefCell<Option<Unfinished>>,
    format: &Format,
    history: &[u32],
    constraint: &mut Constraint,
) -> Result<usize> {
    match unfinished.borrow().as_ref() {
        Some(u) if &u.format == format && u.history == history => {
            constraint.replay(&history[u.start..])?;
            Ok(u.start)
        }
        _ => Ok(history.len()),
    }
}

/// Runs `constraint` (its text begun at history length `start`) on session `id` with
/// `options`' sampler, onToken, stop and signal, as `generate` runs; remembers the generation
/// if it ends unfinished. The text generated by this call.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run(
    rt: &mut Runtime,
    shared: &Shared,
    id: SessionId,
    options: &GenerateConfig,
    stop: &Cell<bool>,
    sampler: &RefCell<Option<Sampler>>,
    (format, mut constraint, start): (Format, Constraint, usize),
    unfinished: &RefCell<Option<Unfinished>>,
) -> Result<String> {
    let tokenizer = shared.tokenizer()?;
    let kept = sampler.borrow_mut().take();
    let mut chosen = options.sampler(kept)?;
    let made = constraint::generate(
        rt,
        id,
        tokenizer,
        &mut chosen,
        &mut constraint,
        options.max_tokens,
        |piece, token| options.show(stop, piece, token),
    )
    .await;
    *sampler.borrow_mut() = Some(chosen);
    let history = rt.history(id)?.to_vec();
    *unfinished.borrow_mut() = match &made {
        Ok(m) if m.complete => None,
        _ => Some(Unfinished { format, start, history }),
    };
    match made {
        Ok(_) if options.aborted() => Err(Error::Aborted("generation stopped by its AbortSignal".into())),
        Ok(m) => Ok(m.text),
        Err(e) => Err(e),
    }
}
