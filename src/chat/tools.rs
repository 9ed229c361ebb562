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
use super::constraint::prepare;
use super::grammar_error::cap;
use crate::error::{Error, Result};

/// How a template writes an assistant message's tool calls: each call as `before_name` NAME
/// `before_arguments` ARGUMENTS `after`, calls joined by `separator`, all of them inside
/// `block_open` … `block_close` where the template gathers them in one block (Nemotron's
/// `<TOOLCALL>[…, …]</TOOLCALL>`; empty for one tag pair per call).
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
        // The assistant's message starts where the rendering leaves the prompt (a template may
        // open a turn differently when it writes calls: Nemotron's `<think>`), at a boundary.
        let same = common_prefix(&whole, &prompt).len();
        let start = whole[..same].rfind(['\n', '>', ']', '}']).map_or(0, |i| i + 1);
        Self::from_rendering(&whole[start..])
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
        // What comes before each call's name is what the text before the first one and the
        // text between the two end with; the rest before the first opens the block.
        let (head, between, tail) = (&reply[..first[0]], &reply[first[3]..second[0]], &reply[second[3]..]);
        let name_prefix = common_suffix(head, between);
        let block_open = &head[..head.len() - name_prefix.len()];
        let after_and_separator = &between[..between.len() - name_prefix.len()];
        let after = common_prefix(after_and_separator, tail);
        let separator = &after_and_separator[after.len()..];
        let rest = &tail[after.len()..];
        let tag = |s: &str| s.trim().trim_end_matches(['[', '{']).trim().to_string();
        let (block_close, open, close) = if block_open.trim().is_empty() {
            let open = tag(&name_prefix[..name_prefix.find(['{', '['])?]);
            let close = after[after.rfind(['}', ']'])? + 1..].trim().to_string();
            (String::new(), open, close)
        } else {
            // `<TAG>[` … `]</TAG>`: the block closes at the closing tag.
            let open = tag(block_open);
            let name = open.strip_prefix('<')?.strip_suffix('>')?;
            let close = format!("</{name}>");
            let end = rest.find(&close)? + close.len();
            (rest[..end].to_string(), open, close)
        };
        if open.is_empty() || close.is_empty() {
            return None;
        }
        Some(Self {
            block_open: block_open.trim_start().to_string(),
            before_name: name_prefix.to_string(),
            before_arguments: reply[first[1]..first[2]].to_string(),
            after: after.to_string(),
            separator: separator.to_string(),
            block_close,
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
    /// `[{ type: "function", function: { name, parameters, strict? } }]`, or the flat `{ name,
    /// parameters }`) — only `only` when given — with arguments valid under its parameters,
    /// held to its `strict` as a response_format's schema is ([`super::constraint::Format`]).
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
            let parameters =
                f.get("parameters").cloned().unwrap_or_else(|| serde_json::json!({ "type": "object" }));
            if !parameters.is_object() {
                return Err(bad(format!("{name}'s parameters are not a JSON schema object")));
            }
            // OpenAI's `function.strict`, as `json_schema.strict` in a response_format.
            let strict = f.get("strict").and_then(Value::as_bool);
            let mut schema = prepare(&parameters, strict, &format!("tools: {}'s parameters", cap(name, 40)))?;
            if let Some(o) = schema.as_object_mut() {
                o.entry("x-guidance").or_insert_with(tojson_spacing);
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
        let calls = match parallel {
            true => format!("call ({} call)*", lit(&self.separator)),
            false => "call".to_string(),
        };
        let around = |t: &str| if t.is_empty() { String::new() } else { lit(t) };
        let start = format!("start: {} {calls} {}\n", around(&self.block_open), around(&self.block_close));
        Ok(format!("{start}call: {}\n{rules}", names.join(" | ")))
    }
}

/// The tool whose parameters line `L` of a [`ToolSyntax::grammar`] compiles, when llguidance's
/// `error` names that line ("at L(C): …"): its name and its parameters schema as compiled.
pub(crate) fn tool_at(grammar: &str, error: &str) -> Option<(String, Value)> {
    let line: usize = error.strip_prefix("at ")?.split_once('(')?.0.parse().ok()?;
    let (rule, schema) = grammar.lines().nth(line.checked_sub(1)?)?.split_once(": %json ")?;
    let i = rule.strip_prefix("args_")?;
    let call = grammar.lines().find_map(|l| l.strip_prefix(&format!("call_{i}: ")))?;
    // `call_i: "before name" "name" "before arguments" args_i "after"`.
    let name = serde_json::Deserializer::from_str(call).into_iter::<String>().nth(1)?.ok()?;
    Some((name, serde_json::from_str(schema).ok()?))
}

#[derive(Deserialize)]
struct RawCall<'a> {
    name: String,
    #[serde(borrow, alias = "parameters")]
    arguments: Option<&'a RawValue>,
}

/// The longest text both `a` and `b` end with (whole characters).
fn common_suffix<'a>(a: &'a str, b: &str) -> &'a str {
    let n: usize =
        a.chars().rev().zip(b.chars().rev()).take_while(|(x, y)| x == y).map(|(x, _)| x.len_utf8()).sum();
    &a[a.len() - n..]
}

/// The longest text both `a` and `b` start with (whole characters).
fn common_prefix<'a>(a: &'a str, b: &str) -> &'a str {
    let n: usize = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).map(|(x, _)| x.len_utf8()).sum();
    &a[..n]
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
