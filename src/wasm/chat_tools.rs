//! Tool calls for `session.chat`: `toolChoice` (OpenAI's `tool_choice`) and
//! `parallelToolCalls` read from the request, the constraint a required call puts on the reply
//! ([`crate::chat::ToolSyntax::grammar`]), and the calls read back as JavaScript objects.

use js_sys::Array;
use wasm_bindgen::prelude::*;

use crate::chat::constraint::Format;
use crate::chat::{ToolCall, ToolSyntax};
use crate::error::{Error, Result};
use crate::wasm::args;
use crate::wasm::options::field;

/// What `request.toolChoice` (OpenAI's `tool_choice`) asks of a turn with tools.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ToolChoice {
    /// Calls are neither read nor enforced (`"none"`, or no tools).
    None,
    /// The model may call tools; its calls are read back (`"auto"`, the default).
    Auto,
    /// The reply is calls, of any tool (`"required"`) or of the one named
    /// (`{ type: "function", function: { name } }`).
    Required(Option<String>),
}

pub(crate) fn tool_choice(request: &JsValue, tools: bool) -> Result<ToolChoice> {
    let Some(v) = field(request, "toolChoice", "the chat request")? else {
        return Ok(if tools { ToolChoice::Auto } else { ToolChoice::None });
    };
    let named = || -> Option<String> {
        let f = js_sys::Reflect::get(&v, &"function".into()).ok()?;
        js_sys::Reflect::get(&f, &"name".into()).ok()?.as_string()
    };
    let choice = match v.as_string().as_deref() {
        Some("none") => ToolChoice::None,
        Some("auto") => ToolChoice::Auto,
        Some("required") => ToolChoice::Required(None),
        _ => match named() {
            Some(name) => ToolChoice::Required(Some(name)),
            None => {
                return Err(args::wrong(
                    "toolChoice",
                    "\"none\", \"auto\", \"required\" or { type: \"function\", function: { name } }",
                    &v,
                ));
            }
        },
    };
    match (&choice, tools) {
        (ToolChoice::Required(_), false) => {
            Err(Error::InvalidInput("toolChoice asks for a tool call but the request has no tools".into()))
        }
        (_, false) => Ok(ToolChoice::None),
        _ => Ok(choice),
    }
}

/// The constraint a tool choice puts on the reply, when it puts one (`None` for free text).
pub(crate) fn tool_format(
    syntax: Option<&ToolSyntax>,
    choice: &ToolChoice,
    context: &str,
    request: &JsValue,
) -> Result<Option<Format>> {
    let ToolChoice::Required(only) = choice else { return Ok(None) };
    let syntax = syntax.ok_or_else(|| {
        Error::InvalidInput(
            "the chat template writes no tool calls webmamba can read, so a required tool call \
             cannot be enforced"
                .into(),
        )
    })?;
    let parallel = match field(request, "parallelToolCalls", "the chat request")? {
        None => true,
        Some(v) => v.as_bool().ok_or_else(|| args::wrong("parallelToolCalls", "a boolean", &v))?,
    };
    let ctx: serde_json::Value = serde_json::from_str(context)
        .map_err(|e| Error::InvalidInput(format!("the chat request is not JSON: {e}")))?;
    Ok(Some(Format::Lark(syntax.grammar(&ctx["tools"], only.as_deref(), parallel)?)))
}

/// Calls as JavaScript: `[{ name, arguments }]` (arguments as the JSON text the model wrote).
pub(crate) fn calls_to_js(calls: &[ToolCall]) -> JsValue {
    let out = Array::new();
    for c in calls {
        let o = js_sys::Object::new();
        let _ = js_sys::Reflect::set(&o, &"name".into(), &c.name.as_str().into());
        let _ = js_sys::Reflect::set(&o, &"arguments".into(), &c.arguments.as_str().into());
        out.push(&o);
    }
    out.into()
}
