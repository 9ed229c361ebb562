//! Tool calls in the template's own format. A chat template says how an assistant message's
//! `tool_calls` are written (`<tool_call>\n{"name": "…", "arguments": {…}}\n</tool_call>` for
//! Granite-4.0-H, Qwen2.5, Hermes; other tags elsewhere); [`ToolSyntax::from_template`] learns it
//! by rendering a probe conversation with two calls, so no template's format is written here.
//! A reply is then read back into calls ([`ToolSyntax::parse`]), and a turn that must call a tool
//! is constrained to the exact text the template would write for the call
//! ([`ToolSyntax::grammar`]: the tags, one of the tools' names, arguments valid under its
//! parameters schema in Python's `json.dumps` spacing, as `tojson` writes them back), so the
//! next turn's rendering starts with the model's own tokens and reads only what is new.

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::ChatTemplate;
use crate::error::{Error, Result};

/// How a template writes an assistant message's tool calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolSyntax {
    /// The text before a call's function name (`<tool_call>\n{"name": "`).
    pub before_name: String,
    /// Between the name and the arguments (`", "arguments": `).
    pub before_arguments: String,
    /// After the arguments (`}\n</tool_call>`).
    pub after: String,
    /// Between two calls (`\n`).
    pub separator: String,
    /// The tag opening a call: `before_name` up to its JSON (`<tool_call>`).
    pub open: String,
    /// The tag closing a call: `after` from the end of its JSON (`</tool_call>`).
    pub close: String,
}

/// One call read from a reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCall {
    /// The function's name.
    pub name: String,
    /// Its arguments as the model wrote them (JSON text, OpenAI's `function.arguments`).
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

const NAMES: [&str; 2] = ["webmamba_probe_first", "webmamba_probe_second"];
const KEY: &str = "webmamba_probe_key";
const VALUE: &str = "webmamba_probe_value";

/// Python `json.dumps`' spacing (what HF's `tojson` writes), with no other whitespace.
fn tojson_spacing() -> Value {
    serde_json::json!({ "item_separator": ", ", "key_separator": ": ", "whitespace_flexible": false })
}

impl ToolSyntax {
    /// The syntax `template` writes tool calls in; `None` when it writes none (no tool
    /// support) or writes them in a way this cannot take apart.
    pub fn from_template(template: &ChatTemplate) -> Option<Self> {
        let tool = |name: &str| {
            serde_json::json!({ "type": "function", "function": { "name": name, "description": "probe",
                "parameters": { "type": "object", "properties": { KEY: { "type": "string" } } } } })
        };
        let call = |name: &str| serde_json::json!({ "type": "function", "function": { "name": name, "arguments": { KEY: VALUE } } });
        let tools = serde_json::json!([tool(NAMES[0]), tool(NAMES[1])]);
        let user = serde_json::json!({ "role": "user", "content": "webmamba probe" });
        let asked = serde_json::json!({ "messages": [user], "tools": tools, "add_generation_prompt": true });
        let answered = serde_json::json!({ "messages": [user, { "role": "assistant", "content": "",
            "tool_calls": [call(NAMES[0]), call(NAMES[1])] }], "tools": tools });
        let prompt = template.render(&asked.to_string()).ok()?;
        let whole = template.render(&answered.to_string()).ok()?;
        Self::from_rendering(whole.strip_prefix(prompt.as_str())?)
    }

    /// From the assistant message of the probe: two calls and the end of the turn.
    fn from_rendering(reply: &str) -> Option<Self> {
        // (start of the name, end of the name, start of the arguments, end of the arguments)
        let spans = |from: usize, name: &str| -> Option<[usize; 4]> {
            let n = from + reply[from..].find(name)?;
            let key = n + reply[n..].find(KEY)?;
            let a = reply[..key].rfind('{')?;
            let v = key + reply[key..].find(VALUE)?;
            let e = v + reply[v..].find('}')? + 1;
            (a >= n + name.len()).then_some([n, n + name.len(), a, e])
        };
        let first = spans(0, NAMES[0])?;
        let second = spans(first[3], NAMES[1])?;
        let before_name = &reply[..first[0]];
        let between = &reply[first[3]..second[0]];
        let after_and_separator = between.strip_suffix(before_name)?;
        let tail = &reply[second[3]..];
        let common = after_and_separator.chars().zip(tail.chars()).take_while(|(a, b)| a == b).count();
        let after: String = tail.chars().take(common).collect();
        let separator = after_and_separator[after.len()..].to_string();
        let open = before_name[..before_name.find(['{', '['])?].trim().to_string();
        let close = after[after.rfind(['}', ']'])? + 1..].trim().to_string();
        if open.is_empty() || close.is_empty() {
            return None;
        }
        Some(Self {
            before_name: before_name.to_string(),
            before_arguments: reply[first[1]..first[2]].to_string(),
            after,
            separator,
            open,
            close,
        })
    }

    /// Splits `reply` into its text and the calls between the tags. A tagged block whose JSON
    /// is not `{ "name", "arguments" }` (or a list of them) stays in the text; a last block the
    /// reply ended in before its closing tag counts when its JSON is whole.
    pub fn parse(&self, reply: &str) -> ToolReply {
        let mut out = ToolReply::default();
        let mut rest = reply;
        while let Some(i) = rest.find(&self.open) {
            let body = i + self.open.len();
            let (end, next) = match rest[body..].find(&self.close) {
                Some(j) => (body + j, body + j + self.close.len()),
                None => (rest.len(), rest.len()),
            };
            match calls_in(rest[body..end].trim()) {
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

    /// A Lark grammar (llguidance's) for replies that are calls and nothing else: one call
    /// (`parallel` false) or calls joined by the separator, each of a tool in `tools` (HF's
    /// `[{ type: "function", function: { name, parameters } }]`, or the flat `{ name,
    /// parameters }`) — only `only` when given — with arguments valid under its parameters.
    pub fn grammar(&self, tools: &Value, only: Option<&str>, parallel: bool) -> Result<String> {
        let bad = |why: String| Error::InvalidInput(format!("tools: {why}"));
        let list = tools.as_array().ok_or_else(|| bad("not a list".into()))?;
        let lit = |s: &str| serde_json::to_string(s).unwrap_or_default();
        let mut rules = String::new();
        let mut names = Vec::new();
        for (i, tool) in list.iter().enumerate() {
            let f = tool.get("function").unwrap_or(tool);
            let name =
                f.get("name").and_then(Value::as_str).ok_or_else(|| bad(format!("tool {i} has no name")))?;
            if only.is_some_and(|o| o != name) {
                continue;
            }
            let mut schema =
                f.get("parameters").cloned().unwrap_or_else(|| serde_json::json!({ "type": "object" }));
            match schema.as_object_mut() {
                Some(o) => {
                    o.entry("x-guidance").or_insert_with(tojson_spacing);
                }
                None => return Err(bad(format!("{name}'s parameters are not a JSON schema object"))),
            }
            rules.push_str(&format!(
                "call_{i}: {} {} {} args_{i} {}\nargs_{i}: %json {schema}\n",
                lit(&self.before_name),
                lit(name),
                lit(&self.before_arguments),
                lit(&self.after)
            ));
            names.push(format!("call_{i}"));
        }
        if names.is_empty() {
            return Err(bad(match only {
                Some(o) => format!("tool_choice names {o:?}, which is not among the tools"),
                None => "a required tool call needs at least one tool".into(),
            }));
        }
        let start = match parallel {
            true => format!("start: call ({} call)*\n", lit(&self.separator)),
            false => "start: call\n".to_string(),
        };
        Ok(format!("{start}call: {}\n{rules}", names.join(" | ")))
    }
}

#[derive(Deserialize)]
struct RawCall<'a> {
    name: String,
    #[serde(borrow, alias = "parameters")]
    arguments: Option<&'a RawValue>,
}

/// The calls in one tagged block's JSON.
fn calls_in(body: &str) -> Option<Vec<ToolCall>> {
    let calls: Vec<RawCall> = match body.starts_with('[') {
        true => serde_json::from_str(body).ok()?,
        false => vec![serde_json::from_str(body).ok()?],
    };
    let arguments = |a: Option<&RawValue>| match a.map(RawValue::get) {
        None => Some("{}".to_string()),
        // Arguments written as a string of JSON: that JSON.
        Some(text) if text.starts_with('"') => serde_json::from_str::<String>(text).ok(),
        Some(text) => Some(text.to_string()),
    };
    let calls: Option<Vec<ToolCall>> = calls
        .into_iter()
        .map(|c| Some(ToolCall { arguments: arguments(c.arguments)?, name: c.name }))
        .collect();
    calls.filter(|c| !c.is_empty())
}
