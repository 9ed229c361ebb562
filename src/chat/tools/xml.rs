//! XML-style calls (Qwen3.5's): `<function=NAME>` then one `<parameter=KEY>\nVALUE\n</parameter>`
//! per argument, then `</function>`, inside the call's tags. A string's value is written as it
//! is; others as the template's `| string` or `| tojson` writes them (`3`, `1.5`, `True`,
//! `None`, `["a", "b"]`, `{"k": 1}`).

use serde_json::{Map, Value};

use super::{
    Arguments, ToolCall, ToolSyntax, around, in_order, lit, parameter, properties, single_type, standalone,
};

/// The pieces of an XML call's elements, trimmed: `<function=`, `>`, `</function>`,
/// `<parameter=`, `>`, `</parameter>`.
struct Tags<'a> {
    function: &'a str,
    name_end: &'a str,
    function_close: &'a str,
    open: &'a str,
    mid: &'a str,
    close: &'a str,
    /// Whether the value starts after a newline, and ends before one (the template's own).
    newline_before: bool,
    newline_after: bool,
}

fn tags(s: &ToolSyntax) -> Option<Tags<'_>> {
    let Arguments::Xml { open, mid, close } = &s.arguments else { return None };
    let function = s.before_name.trim_start().strip_prefix(s.open.as_str()).unwrap_or(&s.before_name).trim();
    let function_close = s.after.trim_end().strip_suffix(s.close.as_str()).unwrap_or(&s.after).trim();
    Some(Tags {
        function,
        name_end: s.before_arguments.trim(),
        function_close,
        open: open.trim(),
        mid: mid.trim(),
        close: close.trim(),
        newline_before: mid.ends_with('\n'),
        newline_after: close.starts_with('\n'),
    })
}

/// The calls in one tagged block: each `<function=NAME>` … `</function>` in it (one where the
/// reply ended before `</function>`); `None` when there is none.
pub(super) fn calls_in(s: &ToolSyntax, body: &str, tools: Option<&Value>) -> Option<Vec<ToolCall>> {
    let t = tags(s)?;
    if [t.function, t.name_end, t.open, t.mid, t.close].iter().any(|p| p.is_empty()) {
        return None;
    }
    let mut calls = Vec::new();
    let mut rest = body;
    while let Some(i) = rest.find(t.function) {
        let after = &rest[i + t.function.len()..];
        let n = after.find(t.name_end)?;
        let name = after[..n].trim().to_string();
        let inner = &after[n + t.name_end.len()..];
        let (inner, next) = match t.function_close.is_empty() {
            true => (inner, ""),
            false => match inner.find(t.function_close) {
                Some(e) => (&inner[..e], &inner[e + t.function_close.len()..]),
                None => (inner, ""),
            },
        };
        let mut arguments = Map::new();
        let mut args = inner;
        while let Some(p) = args.find(t.open) {
            let key_and_more = &args[p + t.open.len()..];
            let k = key_and_more.find(t.mid)?;
            let key = key_and_more[..k].trim();
            let mut value = &key_and_more[k + t.mid.len()..];
            let end = value.find(t.close);
            args = end.map_or("", |e| &value[e + t.close.len()..]);
            value = end.map_or(value, |e| &value[..e]);
            if t.newline_before {
                value = value.strip_prefix('\n').unwrap_or(value);
            }
            if t.newline_after {
                value = value.strip_suffix('\n').unwrap_or(value);
            }
            arguments.insert(key.to_string(), typed(value, parameter(tools, &name, key)));
        }
        let arguments = serde_json::to_string(&Value::Object(arguments)).ok()?;
        calls.push(ToolCall { name, arguments });
        rest = next;
    }
    (!calls.is_empty()).then_some(calls)
}

/// Whether `schema` admits strings only.
fn is_string(schema: &Value) -> bool {
    let all_strings =
        |v: &Value| v.as_array().is_some_and(|a| !a.is_empty() && a.iter().all(Value::is_string));
    single_type(schema) == Some("string")
        || schema.get("const").is_some_and(Value::is_string)
        || schema.get("enum").is_some_and(all_strings)
}

/// A value as written: a string where the parameter's schema says so, else JSON or Python's
/// `True`, `False`, `None` where it is one, else the string.
pub(super) fn typed(value: &str, schema: Option<&Value>) -> Value {
    if schema.is_some_and(is_string) {
        return Value::String(value.to_string());
    }
    match value.trim() {
        "True" => Value::Bool(true),
        "False" => Value::Bool(false),
        "None" => Value::Null,
        v => serde_json::from_str(v).unwrap_or_else(|_| Value::String(value.to_string())),
    }
}

/// `s` as a regular expression matching it literally (Lark's `/…/`).
fn escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\\' | '.' | '+' | '*' | '?' | '(' | ')' | '|' | '[' | ']' | '{' | '}' | '^' | '$' | '#'
            | '&' | '-' | '~' | '/' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// The Lark expression for tool `i`'s arguments under `schema` (its rules pushed onto
/// `rules`): its properties in order, each required one present. A value is free text without
/// the closing element for a string parameter (one of its `enum` strings when it lists them),
/// `True`/`False` for a boolean, `None` for null, JSON valid under the parameter's schema for
/// numbers, lists and objects, free text where the schema names no single type.
pub(super) fn arguments(
    schema: &Value,
    i: usize,
    [open, mid, close]: [&String; 3],
    rules: &mut String,
) -> String {
    // Free text up to and with the closing element, which it does not hold before its end.
    let core = close.trim_end();
    let (lead, tag) = (&core[..core.len() - core.trim_start().len()], core.trim_start());
    let text = format!("TEXT_{i}");
    rules.push_str(&format!(
        "{text}: /(?s:.*){}/ & ~/(?s:.*){}(?s:.+)/\n",
        escape(&format!("{lead}{tag}")),
        escape(tag)
    ));
    let end = around(&close[core.len()..]);
    let free = format!("{text} {end}");
    let Some(props) = properties(schema) else {
        // Any names: `open` NAME `mid` TEXT `close`, as many as given.
        return format!("({} /[^<>\\n]+/ {} {free})*", lit(open), lit(mid));
    };
    let parts: Vec<(String, bool)> = props
        .iter()
        .enumerate()
        .map(|(k, (key, property, required))| {
            let value = match single_type(property) {
                _ if is_string(property) => match property.get("enum").or(property.get("const")) {
                    Some(Value::Array(a)) => {
                        let options: Vec<String> =
                            a.iter().filter_map(Value::as_str).map(|v| lit(&format!("{v}{close}"))).collect();
                        format!("({})", options.join(" | "))
                    }
                    Some(Value::String(v)) => lit(&format!("{v}{close}")),
                    _ => free.clone(),
                },
                Some("boolean") => format!("(\"True\" | \"False\") {}", lit(close)),
                Some("null") => format!("\"None\" {}", lit(close)),
                Some("integer" | "number" | "array" | "object") => {
                    rules.push_str(&format!("args_{i}_{k}: %json {}\n", standalone(schema, property)));
                    format!("args_{i}_{k} {}", lit(close))
                }
                _ => free.clone(),
            };
            (format!("{} {value}", lit(&format!("{open}{key}{mid}"))), *required)
        })
        .collect();
    in_order(&parts, "")
}
