//! Learning a template's call syntax from its rendering of a probe conversation: two calls,
//! each of a probe tool with probe arguments, whose names and values are found again in the
//! text, so what lies around them is the template's own.

use serde_json::Value;

use super::{Arguments, ToolSyntax};
use crate::chat::ChatTemplate;

const NAMES: [&str; 2] = ["webmamba_probe_first", "webmamba_probe_second"];
const KEY: &str = "webmamba_probe_key";
const VALUE: &str = "webmamba_probe_value";
/// A second argument, for templates that write each argument in its own element.
const KEY2: &str = "webmamba_probe_other";
const VALUE2: &str = "webmamba_probe_more";

/// JSON arguments (one probe argument), else XML-style ones (two).
pub(super) fn from_template(template: &ChatTemplate) -> Option<ToolSyntax> {
    let json = probe(template, &[(KEY, VALUE)])?;
    if let Some(s) = from_rendering(&json) {
        return Some(s);
    }
    from_xml_rendering(&probe(template, &[(KEY, VALUE), (KEY2, VALUE2)])?)
}

/// The assistant message of the probe conversation with `arguments` in both calls: the calls
/// and the end of the turn.
fn probe(template: &ChatTemplate, arguments: &[(&str, &str)]) -> Option<String> {
    let properties: serde_json::Map<String, Value> =
        arguments.iter().map(|(k, _)| (k.to_string(), serde_json::json!({ "type": "string" }))).collect();
    let values: serde_json::Map<String, Value> =
        arguments.iter().map(|(k, v)| (k.to_string(), Value::from(*v))).collect();
    let tool = |name: &str| {
        serde_json::json!({ "type": "function", "function": { "name": name, "description": "probe",
            "parameters": { "type": "object", "properties": properties } } })
    };
    let call = |name: &str| serde_json::json!({ "type": "function", "function": { "name": name, "arguments": values } });
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
    Some(whole[start..].to_string())
}

/// JSON arguments: `{` … `}` around the probe argument.
fn from_rendering(reply: &str) -> Option<ToolSyntax> {
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
    assemble(reply, first, second, Arguments::Json)
}

/// XML-style arguments: each as `open` KEY `mid` VALUE `close`; the element opening an
/// argument starts at its last `<`.
fn from_xml_rendering(reply: &str) -> Option<ToolSyntax> {
    let find = |from: usize, what: &str| reply[from..].find(what).map(|i| from + i);
    // (name, end of name, first key, end of the last value) and the argument's three parts.
    let call = |from: usize, name: &str| -> Option<([usize; 4], [String; 3])> {
        let n = find(from, name)?;
        let k1 = find(n + name.len(), KEY)?;
        let v1 = find(k1, VALUE)?;
        let k2 = find(v1, KEY2)?;
        let v2 = find(k2, VALUE2)?;
        let (head, mid) = (&reply[n + name.len()..k1], &reply[k1 + KEY.len()..v1]);
        let between = &reply[v1 + VALUE.len()..k2];
        if mid.is_empty() || mid != &reply[k2 + KEY2.len()..v2] {
            return None;
        }
        let mut open = common_suffix(head, between);
        if let Some(i) = open.rfind('<') {
            open = &open[i..];
        }
        let close = &between[..between.len() - open.len()];
        let end = v2 + VALUE2.len();
        if open.is_empty() || close.is_empty() || !reply[end..].starts_with(close) {
            return None;
        }
        let a = n + name.len() + head.len() - open.len();
        Some(([n, n + name.len(), a, end + close.len()], [open.into(), mid.into(), close.into()]))
    };
    let (first, parts) = call(0, NAMES[0])?;
    let (second, again) = call(first[3], NAMES[1])?;
    if parts != again {
        return None;
    }
    let [open, mid, close] = parts;
    assemble(reply, first, second, Arguments::Xml { open, mid, close })
}

/// The syntax from the two calls' spans (name start, name end, arguments' start and end).
fn assemble(reply: &str, first: [usize; 4], second: [usize; 4], arguments: Arguments) -> Option<ToolSyntax> {
    // What comes before each call's name is what the text before the first one and the
    // text between the two end with; the rest before the first opens the block.
    let (head, between, tail) = (&reply[..first[0]], &reply[first[3]..second[0]], &reply[second[3]..]);
    let mut name_prefix = common_suffix(head, between);
    if arguments != Arguments::Json {
        // Qwen3.5 writes `\n<tool_call>` before every call but the first: the newline goes with
        // the separator.
        name_prefix = name_prefix.trim_start();
    }
    let mut block_open = &head[..head.len() - name_prefix.len()];
    if !block_open.trim_end().ends_with('[') {
        // Not a block of calls: the turn's own text before them (Qwen3.5's `</think>`).
        block_open = "";
    }
    let after_and_separator = &between[..between.len() - name_prefix.len()];
    let after = common_prefix(after_and_separator, tail);
    let separator = &after_and_separator[after.len()..];
    let rest = &tail[after.len()..];
    let tag = |s: &str| s.trim().trim_end_matches(['[', '{']).trim().to_string();
    let (block_close, open, close) = if !block_open.trim().is_empty() {
        // `<TAG>[` … `]</TAG>`: the block closes at the closing tag.
        let open = tag(block_open);
        let name = open.strip_prefix('<')?.strip_suffix('>')?;
        let close = format!("</{name}>");
        let end = rest.find(&close)? + close.len();
        (rest[..end].to_string(), open, close)
    } else if arguments == Arguments::Json {
        let open = tag(&name_prefix[..name_prefix.find(['{', '['])?]);
        let close = after[after.rfind(['}', ']'])? + 1..].trim().to_string();
        (String::new(), open, close)
    } else {
        // `<tool_call>\n<function=` … `</function>\n</tool_call>`: the outer tags.
        let open = name_prefix.trim_start();
        let open = open[..open.find('>')? + 1].to_string();
        let close = after[after.rfind('<')?..].trim().to_string();
        (String::new(), open, close)
    };
    if open.is_empty() || close.is_empty() {
        return None;
    }
    Some(ToolSyntax {
        block_open: block_open.trim_start().to_string(),
        before_name: name_prefix.to_string(),
        before_arguments: reply[first[1]..first[2]].to_string(),
        after: after.to_string(),
        separator: separator.to_string(),
        block_close,
        open,
        close,
        arguments,
    })
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
