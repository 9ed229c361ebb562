//! Chat for JavaScript: `model.chatTemplate`, `model.renderChat(request)` and
//! `session.chat(request, onToken?)` — the checkpoint's chat template rendered as HF renders it
//! ([`crate::chat::ChatTemplate`]), a turn feeding only what extends the session's history
//! ([`crate::chat::ChatHistory`]) and generating to the end-of-turn token.

use js_sys::{Array, JSON};
use wasm_bindgen::prelude::*;

use crate::chat::constraint::Format;
use crate::chat::{Arguments, ChatTemplate, ToolReply, ToolSyntax, reasoning};
use crate::error::{Error, Result};
use crate::session::Runtime;
use crate::wasm::chat_tools::{ToolChoice, calls_to_js, tool_choice, tool_format};
use crate::wasm::constrained::{Guided, response_format};
use crate::wasm::lease::Shared;
use crate::wasm::model::Model;
use crate::wasm::options::{GenerateConfig, field};
use crate::wasm::session::{Session, run_generate};
use crate::wasm::{args, to_js};

/// What a chat turn did: the reply, and the token counts of its prompt.
#[wasm_bindgen(getter_with_clone, inspectable)]
#[derive(Clone, Debug)]
pub struct ChatTurn {
    /// The reply's text (without the end-of-turn token).
    pub text: String,
    /// Tokens of the whole rendered conversation (the session's history before the reply).
    #[wasm_bindgen(js_name = promptTokens)]
    pub prompt_tokens: u32,
    /// Of those, the ones run through the model by this turn.
    pub prefilled: u32,
    /// Of those, the ones that came from the session's live state or a cached checkpoint.
    #[wasm_bindgen(js_name = cachedTokens)]
    pub cached_tokens: u32,
    /// Tokens generated (the end-of-turn token included when it came).
    #[wasm_bindgen(js_name = completionTokens)]
    pub completion_tokens: u32,
    /// `"stop"` (an end-of-turn token or a stop string), `"length"` (maxTokens) or
    /// `"tool_calls"` (the reply called tools).
    #[wasm_bindgen(js_name = finishReason)]
    pub finish_reason: String,
    /// The reply without its tool calls (`text` when it made none), and without its thinking
    /// when the prompt opened a think block (after `</think>`, leading newlines dropped).
    pub content: String,
    /// The thinking, when the prompt left the reply inside a think block (a thinking template's
    /// generation prompt: Qwen3.5's with `enable_thinking` on, its default): the text before
    /// `</think>`, trimmed; all of it when the reply never closed the block. `undefined`
    /// otherwise.
    pub reasoning: Option<String>,
    /// The tool calls read from the reply in the template's format: `[{ name, arguments }]`,
    /// arguments as the JSON text the model wrote (empty without tools or with toolChoice
    /// `"none"`).
    #[wasm_bindgen(js_name = toolCalls)]
    pub tool_calls: JsValue,
}

/// A JSON value's text, for the template's context.
fn json(v: &JsValue, name: &str) -> Result<String> {
    JSON::stringify(v)
        .ok()
        .and_then(|s| s.as_string())
        .ok_or_else(|| Error::InvalidInput(format!("{name} cannot be written as JSON")))
}

/// The template context of `request` (`{ messages, tools?, documents?, templateArgs? }`) as JSON
/// text (the objects' key order kept), and whether it has tools.
fn context(request: &JsValue) -> Result<(String, bool)> {
    let what = "the chat request";
    let messages = field(request, "messages", what)?.ok_or_else(|| {
        Error::InvalidInput("the chat request needs messages: [{ role, content }, …]".into())
    })?;
    if !Array::is_array(&messages) {
        return Err(args::wrong("messages", "an array of { role, content }", &messages));
    }
    let mut out = format!("{{\"messages\": {}", json(&messages, "messages")?);
    let mut tools = false;
    for name in ["tools", "documents"] {
        if let Some(v) = field(request, name, what)? {
            if !Array::is_array(&v) {
                return Err(args::wrong(name, "an array", &v));
            }
            tools |= name == "tools" && Array::from(&v).length() > 0;
            out.push_str(&format!(", \"{name}\": {}", json(&v, name)?));
        }
    }
    if let Some(extra) = field(request, "templateArgs", what)? {
        if !extra.is_object() || Array::is_array(&extra) {
            return Err(args::wrong("templateArgs", "an object", &extra));
        }
        let text = json(&extra, "templateArgs")?;
        let inner = text.trim().trim_start_matches('{').trim_end_matches('}').trim();
        if !inner.is_empty() {
            out.push_str(", ");
            out.push_str(inner);
        }
    }
    out.push('}');
    Ok((out, tools))
}

/// `request.chatTemplate` or the model's template (its tool-use one when there are tools).
fn template(shared: &Shared, request: &JsValue, tools: bool) -> Result<ChatTemplate> {
    let given = match field(request, "chatTemplate", "the chat request")? {
        Some(v) => Some(args::string(&v, "chatTemplate")?),
        None => None,
    };
    let source = match &given {
        Some(t) => t.as_str(),
        None => shared.chat.template(tools).ok_or_else(|| Error::Template {
            line: None,
            message: "the model has no chat template (tokenizer_config.json's chat_template or \
                      chat_template.jinja): pass chatTemplate"
                .into(),
        })?,
    };
    ChatTemplate::new(source, shared.chat.special_tokens.clone())
}

/// `context` rendered with `request.chatTemplate` or the model's template (`prompt`: with the
/// generation prompt unless the context says otherwise).
fn render(shared: &Shared, request: &JsValue, context: &str, tools: bool, prompt: bool) -> Result<String> {
    let template = template(shared, request, tools)?;
    let context = with_calls(&template, context)?;
    if prompt { template.render_prompt(&context) } else { template.render(&context) }
}

/// `context` with the assistant messages' tool calls written into their content where the
/// template writes none (LFM2's: [`ToolSyntax::calls_into_content`]).
fn with_calls(template: &ChatTemplate, context: &str) -> Result<String> {
    // Learning the syntax renders probe conversations: only for messages that carry calls.
    let learned = context.contains("tool_calls").then(|| ToolSyntax::from_template(template)).flatten();
    let written = match learned {
        Some(syntax) => syntax.calls_into_content(context)?,
        None => None,
    };
    Ok(written.unwrap_or_else(|| context.to_string()))
}

#[wasm_bindgen]
impl Model {
    /// The checkpoint's chat template (`undefined` when it has none).
    #[wasm_bindgen(getter = chatTemplate)]
    pub fn chat_template(&self) -> Option<String> {
        self.shared.chat.template(false).map(str::to_string)
    }

    /// How the chat template writes tool calls: `{ open, close, arguments }`, the tags around a
    /// call and how its arguments are written (`"json"`; `"xml"`, Qwen3.5's `<parameter=…>`;
    /// `"pythonic"`, LFM2's `[f(a=1)]`, which its template does not write: an assistant
    /// message's `tool_calls` are written into its content before rendering) — `undefined` when
    /// it writes none webmamba can read.
    #[wasm_bindgen(
        getter = toolCallFormat,
        unchecked_return_type = "{ open: string; close: string; arguments: 'json' | 'xml' | 'pythonic' } | undefined"
    )]
    pub fn tool_call_format(&self) -> JsValue {
        let Some(syntax) = self
            .shared
            .chat
            .template(true)
            .and_then(|t| ChatTemplate::new(t, self.shared.chat.special_tokens.clone()).ok())
            .and_then(|t| ToolSyntax::from_template(&t))
        else {
            return JsValue::UNDEFINED;
        };
        let o = js_sys::Object::new();
        let _ = js_sys::Reflect::set(&o, &"open".into(), &syntax.open.as_str().into());
        let _ = js_sys::Reflect::set(&o, &"close".into(), &syntax.close.as_str().into());
        let arguments = match syntax.arguments {
            Arguments::Json => "json",
            Arguments::Xml { .. } => "xml",
            Arguments::Pythonic => "pythonic",
        };
        let _ = js_sys::Reflect::set(&o, &"arguments".into(), &arguments.into());
        o.into()
    }

    /// The tokens that end a generation: the files' end-of-turn ids.
    #[wasm_bindgen(getter = endTokens)]
    pub fn end_tokens(&self) -> std::result::Result<Vec<u32>, JsValue> {
        crate::wasm::lease::Lease::run(&self.shared, |rt| Ok(rt.end_tokens().to_vec())).map_err(to_js)
    }

    /// generation_config.json's sampling defaults, as given (an object).
    #[wasm_bindgen(getter = generationDefaults, unchecked_return_type = "Record<string, number | boolean>")]
    pub fn generation_defaults(&self) -> JsValue {
        let text = serde_json::Value::Object(self.shared.chat.generation.clone()).to_string();
        JSON::parse(&text).unwrap_or(JsValue::UNDEFINED)
    }

    /// Renders `{ messages, tools?, documents?, templateArgs?, addGenerationPrompt? }` with the
    /// chat template, as HF's `apply_chat_template(..., tokenize=False)` does.
    #[wasm_bindgen(js_name = renderChat)]
    pub fn render_chat(
        &self,
        #[wasm_bindgen(unchecked_param_type = "ChatRequest")] request: JsValue,
    ) -> std::result::Result<String, JsValue> {
        let (ctx, tools) = context(&request).map_err(to_js)?;
        let prompt = match field(&request, "addGenerationPrompt", "the chat request").map_err(to_js)? {
            None => false,
            Some(v) => {
                v.as_bool().ok_or_else(|| to_js(args::wrong("addGenerationPrompt", "a boolean", &v)))?
            }
        };
        render(&self.shared, &request, &ctx, tools, prompt).map_err(to_js)
    }
}

#[wasm_bindgen]
impl Session {
    /// One chat turn: renders `request.messages` (with `tools`, `documents`, `templateArgs`)
    /// with the model's template and its generation prompt, feeds only what extends the
    /// history (the previous reply is already there, as the model's own tokens), and generates
    /// with `request`'s generate options to an end-of-turn token; `onToken(text, id)` as
    /// `generate`'s. Resolves to a `ChatTurn`.
    #[wasm_bindgen(unchecked_return_type = "Promise<ChatTurn>")]
    pub fn chat(
        &self,
        #[wasm_bindgen(unchecked_param_type = "ChatRequest")] request: JsValue,
        #[wasm_bindgen(js_name = onToken, unchecked_param_type = "((text: string, id: number) => void) | undefined")]
        on_token: JsValue,
    ) -> js_sys::Promise {
        let (stop, sampler, history) = (self.stop.clone(), self.sampler.clone(), self.chat.clone());
        let unfinished = self.unfinished.clone();
        if self.shared.is_idle() {
            stop.set(false);
        }
        self.promise(async move |rt: &mut Runtime, shared: &Shared, id| {
            let (ctx, tools) = context(&request)?;
            let mut options = GenerateConfig::parse(&request, &on_token)?;
            let choice = tool_choice(&request, tools)?;
            let template = template(shared, &request, tools)?;
            let rendered = template.render_prompt(&with_calls(&template, &ctx)?)?;
            // A reply that begins inside a think block: its thinking is free, a constraint
            // applies after it, and it is split off the content.
            let thinking = reasoning::opens_thinking(&rendered);
            options.thinking = thinking;
            let syntax = match choice {
                ToolChoice::None => None,
                _ => ToolSyntax::from_template(&template),
            };
            let format =
                match (response_format(&request)?, tool_format(syntax.as_ref(), &choice, &ctx, &request)?) {
                    (Some(_), Some(_)) => {
                        return Err(Error::InvalidInput(
                            "responseFormat and a required tool call cannot both constrain one reply".into(),
                        ));
                    }
                    (a, b) => a.or(b).map(|f| match thinking {
                        true => Format::AfterThinking(Box::new(f)),
                        false => f,
                    }),
                };
            let tokenizer = shared.tokenizer()?;
            let before = rt.history(id)?.to_vec();
            let target = history.borrow().target(&before, &rendered, tokenizer)?;
            let start = target.tokens.len();
            // The constraint before anything runs: a refused format leaves the session as it was.
            let guided = match format {
                Some(f) => Some(Guided::fresh(shared, rt, f, start, &unfinished)?),
                None => None,
            };
            let outcome = rt.edit(id, &target.tokens).await?;
            let ran = run_generate(rt, shared, id, &options, &stop, &sampler, guided).await;
            let after = rt.history(id)?.to_vec();
            let generated = after.get(target.tokens.len()..).unwrap_or_default();
            match &ran {
                Ok(_) => history.borrow_mut().record(&rendered, &target.tokens, generated, tokenizer)?,
                Err(_) => history.borrow_mut().clear(),
            }
            let text = ran?;
            let n = target.tokens.len();
            let (thought, answer) = match thinking {
                true => {
                    let (r, a) = reasoning::split(&text);
                    (Some(r), a)
                }
                false => (None, text.as_str()),
            };
            let reply = match &syntax {
                // XML arguments typed by the tools' schemas.
                Some(s) => {
                    let context = serde_json::from_str::<serde_json::Value>(&ctx).ok();
                    s.parse_with(answer, context.as_ref().and_then(|c| c.get("tools")))
                }
                None => ToolReply { content: answer.to_string(), calls: Vec::new() },
            };
            let finish = match () {
                _ if !reply.calls.is_empty() => "tool_calls",
                _ if generated.len() >= options.max_tokens => "length",
                _ => "stop",
            };
            Ok(ChatTurn {
                text,
                prompt_tokens: n as u32,
                prefilled: outcome.prefilled as u32,
                cached_tokens: n.saturating_sub(outcome.prefilled) as u32,
                completion_tokens: generated.len() as u32,
                finish_reason: finish.into(),
                content: reply.content,
                reasoning: thought,
                tool_calls: calls_to_js(&reply.calls),
            })
        })
    }
}
