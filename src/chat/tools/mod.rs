//! Tool calls in the template's own format. A chat template says how an assistant message's
//! `tool_calls` are written (`<tool_call>\n{"name": "…", "arguments": {…}}\n</tool_call>` for
//! Granite-4.0-H, Qwen2.5, Hermes; XML-style `<tool_call>\n<function=NAME>\n<parameter=ARG>\n
//! VALUE\n</parameter>\n…</function>\n</tool_call>` for Qwen3.5; other tags elsewhere);
//! [`ToolSyntax::from_template`] learns it by rendering a probe conversation with two calls, so
//! no template's format is written here. LFM2's template writes no calls (its model writes
//! Pythonic ones, `<|tool_call_start|>[f(a="x", n=1)]<|tool_call_end|>`, in its content): that
//! syntax is known by the template's tool tokens ([`Arguments::Pythonic`]).
//! A reply is then read back into calls ([`ToolSyntax::parse`]), and a turn that must call a tool
//! is constrained to the exact text the template would write for the call
//! ([`ToolSyntax::grammar`]: the tags, one of the tools' names, arguments valid under its
//! parameters schema in Python's `json.dumps` spacing, as `tojson` writes them back), so the
//! next turn's rendering starts with the model's own tokens and reads only what is new.

mod json;
mod learn;
mod pythonic;
mod xml;

use serde_json::Value;

use super::ChatTemplate;
use super::constraint::prepare;
use super::grammar_error::cap;
use crate::error::{Error, Result};

/// How a template writes an assistant message's tool calls: each call as `before_name` NAME
/// `before_arguments` ARGUMENTS `after`, calls joined by `separator`, all of them inside
/// `block_open` … `block_close` where the template gathers them in one block (Nemotron's
/// `<TOOLCALL>[…, …]</TOOLCALL>`; empty for one tag pair per call); ARGUMENTS as `arguments`
/// says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolSyntax {
    /// Before the calls (`<TOOLCALL>[`; usually empty).
    pub block_open: String,
    /// The text before a call's function name (`<tool_call>\n{"name": "`).
    pub(crate) before_name: String,
    /// Between the name and the arguments (`", "arguments": `).
    pub before_arguments: String,
    /// After the arguments (`}\n</tool_call>`).
    pub(crate) after: String,
    /// Between two calls (`\n`).
    pub separator: String,
    /// After the calls (`]</TOOLCALL>`; usually empty).
    pub block_close: String,
    /// The tag opening calls: the block's (`<TOOLCALL>`) or each call's (`<tool_call>`).
    pub open: String,
    /// The tag closing them (`</TOOLCALL>`, `</tool_call>`).
    pub close: String,
    /// How the arguments are written.
    pub arguments: Arguments,
}

/// How a call's arguments are written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arguments {
    /// One JSON object (`{"city": "Paris"}`).
    Json,
    /// One element per argument, `open` KEY `mid` VALUE `close` (Qwen3.5's `<parameter=` KEY
    /// `>\n` VALUE `\n</parameter>\n`): a string's VALUE as it is, any other as the template
    /// writes it (JSON for lists and objects, Python's `True`, `False`, `None`).
    Xml {
        /// Before the argument's name (`<parameter=`).
        open: String,
        /// Between the name and the value (`>\n`).
        mid: String,
        /// After the value (`\n</parameter>\n`).
        close: String,
    },
    /// Keyword arguments of a Python call, `(city="Paris", n=2)`: Python literals (LFM2's
    /// format; the template writes the calls in the assistant's content, not from
    /// `tool_calls`: [`ToolSyntax::calls_into_content`] puts them there).
    Pythonic,
}

/// One call read from a reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCall {
    /// The function's name.
    pub name: String,
    /// Its arguments as JSON text (OpenAI's `function.arguments`): as the model wrote them
    /// for JSON arguments, a compact JSON object for the other formats.
    pub arguments: String,
}

/// A reply split into its text and its tool calls.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolReply {
    /// The text outside the calls (trimmed when there were calls).
    pub content: String,
    /// The calls, in order.
    pub calls: Vec<ToolCall>,
}

/// Python `json.dumps`' spacing (what HF's `tojson` writes), with no other whitespace.
fn tojson_spacing() -> Value {
    serde_json::json!({ "item_separator": ", ", "key_separator": ": ", "whitespace_flexible": false })
}

/// `s` as a Lark string literal.
fn lit(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// `s` as a Lark string literal, nothing for an empty one.
fn around(s: &str) -> String {
    if s.is_empty() { String::new() } else { lit(s) }
}

/// The function of a tool in HF's `[{ type: "function", function: {…} }]` (or the flat form).
fn function(tool: &Value) -> &Value {
    tool.get("function").unwrap_or(tool)
}

/// The JSON schema of argument `key` of tool `name` in `tools`, when it gives one.
fn parameter<'a>(tools: Option<&'a Value>, name: &str, key: &str) -> Option<&'a Value> {
    let tool = tools?
        .as_array()?
        .iter()
        .map(function)
        .find(|f| f.get("name").and_then(Value::as_str) == Some(name))?;
    tool.get("parameters")?.get("properties")?.get(key)
}

impl ToolSyntax {
    /// The syntax `template` writes tool calls in; `None` when it writes none (no tool
    /// support) or writes them in a way this cannot take apart. A template with LFM2's tool
    /// tokens (`<|tool_list_start|>`, `<|tool_call_start|>`) that writes no calls gets LFM2's
    /// Pythonic calls.
    pub fn from_template(template: &ChatTemplate) -> Option<Self> {
        learn::from_template(template).or_else(|| {
            let source = template.source();
            ["<|tool_list_start|>", "<|tool_call_start|>"]
                .iter()
                .any(|t| source.contains(t))
                .then(pythonic::lfm2)
        })
    }

    /// Splits `reply` into its text and the calls between the tags, arguments read without
    /// the tools' schemas ([`ToolSyntax::parse_with`]).
    pub fn parse(&self, reply: &str) -> ToolReply {
        self.parse_with(reply, None)
    }

    /// Splits `reply` into its text and the calls between the tags. A tagged block that holds
    /// no call (JSON that is not `{ "name", "arguments" }` or a list of them; no function
    /// element; no Python call list) stays in the text; a last block the reply ended in before
    /// its closing tag counts when its calls are whole. XML arguments are typed by `tools`'
    /// parameter schemas where they give one (a string parameter's value stays a string); other
    /// values are read as JSON or a Python literal where they are one, else kept as strings.
    pub fn parse_with(&self, reply: &str, tools: Option<&Value>) -> ToolReply {
        let mut out = ToolReply::default();
        let mut rest = reply;
        while let Some(i) = rest.find(&self.open) {
            let body = i + self.open.len();
            let (end, next) = match rest[body..].find(&self.close) {
                Some(j) => (body + j, body + j + self.close.len()),
                None => (rest.len(), rest.len()),
            };
            let inner = &rest[body..end];
            let calls = match &self.arguments {
                Arguments::Json => json::calls_in(inner.trim()),
                Arguments::Xml { .. } => xml::calls_in(self, inner, tools),
                Arguments::Pythonic => pythonic::calls_in(inner.trim()),
            };
            match calls {
                Some(calls) => {
                    out.content.push_str(&rest[..i]);
                    out.calls.extend(calls);
                }
                None => out.content.push_str(&rest[..next]),
            }
            rest = &rest[next..];
        }
        out.content.push_str(rest);
        if !out.calls.is_empty() {
            out.content = out.content.trim().to_string();
        }
        out
    }

    /// The text of `calls` as the model writes them in its content, for a syntax the template
    /// does not write itself (LFM2's Pythonic calls); `None` for the others, whose templates
    /// write an assistant message's `tool_calls`.
    pub fn write_in_content(&self, calls: &[ToolCall]) -> Option<String> {
        match self.arguments {
            Arguments::Pythonic => Some(pythonic::write(self, calls)),
            _ => None,
        }
    }

    /// The chat context `ctx` (`{ "messages": [...], ... }`) with each assistant message's
    /// OpenAI-shaped `tool_calls` also written into its content as the model writes them, for a
    /// syntax whose template writes no calls (LFM2's: HF's rendering would drop them, and the
    /// next turn would not show the model its own calls); `None` when nothing changes (another
    /// syntax, no calls, or content that already holds them).
    pub fn calls_into_content(&self, ctx: &str) -> Result<Option<String>> {
        if self.arguments != Arguments::Pythonic || !ctx.contains("tool_calls") {
            return Ok(None);
        }
        let mut v: Value =
            serde_json::from_str(ctx).map_err(|e| Error::InvalidInput(format!("messages: {e}")))?;
        let mut changed = false;
        let messages = v.get_mut("messages").and_then(Value::as_array_mut).into_iter().flatten();
        for m in messages.filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant")) {
            let calls: Vec<ToolCall> = match m.get("tool_calls").and_then(Value::as_array) {
                Some(list) => list.iter().filter_map(openai_call).collect(),
                None => continue,
            };
            let content = m.get("content").and_then(Value::as_str).unwrap_or_default().to_string();
            if calls.is_empty() || content.contains(&self.open) {
                continue;
            }
            let written = pythonic::write(self, &calls);
            m["content"] =
                Value::String(if content.is_empty() { written } else { format!("{content}{written}") });
            changed = true;
        }
        Ok(changed.then(|| v.to_string()))
    }

    /// A Lark grammar (llguidance's) for replies that are calls and nothing else: one call
    /// (`parallel` false) or calls joined by the separator, each of a tool in `tools` (HF's
    /// `[{ type: "function", function: { name, parameters, strict? } }]`, or the flat `{ name,
    /// parameters }`) — only `only` when given — with arguments valid under its parameters,
    /// held to its `strict` as a response_format's schema is ([`super::constraint::Format`]).
    /// XML and Pythonic arguments: the schema's properties in its order, the required ones
    /// present (all of them under `strict: true`), no others (any names where it names none);
    /// each value as the format writes it: see [`Arguments`] and the modules' grammars.
    pub fn grammar(&self, tools: &Value, only: Option<&str>, parallel: bool) -> Result<String> {
        let bad = |why: String| Error::InvalidInput(format!("tools: {why}"));
        let list = tools.as_array().ok_or_else(|| bad("not a list".into()))?;
        let mut rules = String::new();
        let mut names = Vec::new();
        for (i, tool) in list.iter().enumerate() {
            let f = function(tool);
            let name =
                f.get("name").and_then(Value::as_str).ok_or_else(|| bad(format!("tool {i} has no name")))?;
            if only.is_some_and(|o| o != name) {
                continue;
            }
            let parameters =
                f.get("parameters").cloned().unwrap_or_else(|| serde_json::json!({ "type": "object" }));
            if !parameters.is_object() {
                return Err(bad(format!("{name}'s parameters are not a JSON schema object")));
            }
            // OpenAI's `function.strict`, as `json_schema.strict` in a response_format.
            let strict = f.get("strict").and_then(Value::as_bool);
            let mut schema = prepare(&parameters, strict, &format!("tools: {}'s parameters", cap(name, 40)))?;
            let arguments = match &self.arguments {
                Arguments::Json => {
                    if let Some(o) = schema.as_object_mut() {
                        o.entry("x-guidance").or_insert_with(tojson_spacing);
                    }
                    rules.push_str(&format!("args_{i}: %json {schema}\n"));
                    format!("args_{i}")
                }
                Arguments::Xml { open, mid, close } => {
                    xml::arguments(&schema, i, [open, mid, close], &mut rules)
                }
                Arguments::Pythonic => pythonic::arguments(&schema, i, &mut rules),
            };
            rules.push_str(&format!(
                "name_{i}: {}\ncall_{i}: {} name_{i} {} {arguments} {}\n",
                lit(name),
                around(&self.before_name),
                around(&self.before_arguments),
                around(&self.after)
            ));
            names.push(format!("call_{i}"));
        }
        if names.is_empty() {
            return Err(bad(match only {
                Some(o) => format!("tool_choice names {o:?}, which is not among the tools"),
                None => "a required tool call needs at least one tool".into(),
            }));
        }
        let calls = match parallel {
            true => format!("call ({} call)*", lit(&self.separator)),
            false => "call".to_string(),
        };
        let start = format!("start: {} {calls} {}\n", around(&self.block_open), around(&self.block_close));
        Ok(format!("{start}call: {}\n{rules}", names.join(" | ")))
    }
}

/// The tool whose parameters line `L` of a [`ToolSyntax::grammar`] compiles, when llguidance's
/// `error` names that line ("at L(C): …"): its name and the schema compiled there (its
/// parameters; one parameter's for XML and Pythonic arguments).
pub(crate) fn tool_at(grammar: &str, error: &str) -> Option<(String, Value)> {
    let line: usize = error.strip_prefix("at ")?.split_once('(')?.0.parse().ok()?;
    let (rule, schema) = grammar.lines().nth(line.checked_sub(1)?)?.split_once(": %json ")?;
    let tail = rule.strip_prefix("args_")?;
    let i = tail.split('_').next()?;
    let name = grammar.lines().find_map(|l| l.strip_prefix(&format!("name_{i}: ")))?;
    Some((serde_json::from_str(name).ok()?, serde_json::from_str(schema).ok()?))
}

/// A schema's properties in order, each with whether it is required; `None` where it names
/// none (any argument goes).
fn properties(schema: &Value) -> Option<Vec<(&str, &Value, bool)>> {
    let props = schema.get("properties")?.as_object()?;
    if props.is_empty() && schema.get("additionalProperties") != Some(&Value::Bool(false)) {
        return None;
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    Some(props.iter().map(|(k, v)| (k.as_str(), v, required.contains(&k.as_str()))).collect())
}

/// A property's schema, made whole for compiling on its own: the root's `$defs` and
/// `definitions` (which its `$ref`s name) and Python's `json.dumps` spacing.
fn standalone(root: &Value, property: &Value) -> Value {
    let mut s = match property {
        Value::Object(_) => property.clone(),
        Value::Bool(true) => serde_json::json!({}),
        other => other.clone(),
    };
    if let Some(o) = s.as_object_mut() {
        for defs in ["$defs", "definitions"] {
            if let Some(d) = root.get(defs) {
                o.entry(defs).or_insert_with(|| d.clone());
            }
        }
        o.entry("x-guidance").or_insert_with(tojson_spacing);
    }
    s
}

/// The schema's single `type`, when it names exactly one.
fn single_type(schema: &Value) -> Option<&str> {
    match schema.get("type")? {
        Value::String(t) => Some(t),
        Value::Array(ts) if ts.len() == 1 => ts[0].as_str(),
        _ => None,
    }
}

/// The arguments `first, rest…` in order, each required one present, joined by `separator`,
/// as a Lark expression (empty when no argument is required and none is given). `parts` are
/// the arguments' expressions with whether each is required.
fn in_order(parts: &[(String, bool)], separator: &str) -> String {
    let sep = around(separator);
    let rest = |from: usize| -> String {
        parts[from..]
            .iter()
            .map(|(p, required)| match required {
                true => format!("{sep} {p}"),
                false => format!("[{sep} {p}]"),
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    // The first argument given is one of the optional ones before the first required one, or
    // that one.
    let first_required = parts.iter().position(|(_, r)| *r);
    let last = first_required.unwrap_or(parts.len().saturating_sub(1));
    let alternatives: Vec<String> =
        (0..parts.len().min(last + 1)).map(|j| format!("{} {}", parts[j].0, rest(j + 1))).collect();
    match (alternatives.is_empty(), first_required) {
        (true, _) => String::new(),
        (false, Some(_)) => format!("({})", alternatives.join(" | ")),
        (false, None) => format!("[{}]", alternatives.join(" | ")),
    }
}

/// One OpenAI-shaped call (`{ function: { name, arguments } }`, arguments a JSON text or an
/// object; or the flat `{ name, arguments }`) as a [`ToolCall`].
fn openai_call(call: &Value) -> Option<ToolCall> {
    let f = call.get("function").unwrap_or(call);
    let name = f.get("name")?.as_str()?.to_string();
    let arguments = match f.get("arguments") {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => "{}".into(),
    };
    Some(ToolCall { name, arguments })
}
