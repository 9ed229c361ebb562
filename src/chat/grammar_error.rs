//! llguidance's errors as sentences for a page's developer: what was wrong in the schema, the
//! regex or a tool's parameters, and where (a JSON pointer into the schema, the part of a regex).
//! The engine's text can run to a dump of its parser's state (its tokens, its statistics as
//! JSON, its grammar); that never reaches the message. Its first lines are kept in
//! [`Error::Grammar`]'s `detail`, which the message does not print.

use serde_json::Value;

use crate::error::Error;

/// The longest reason a message quotes, in characters (then an ellipsis).
const REASON_CHARS: usize = 200;
/// The longest detail kept, in characters.
const DETAIL_CHARS: usize = 2000;

/// The engine's text up to its state dump (`<state>` with `verbose_errors`, else
/// `<non-verbose/>`), capped at [`DETAIL_CHARS`].
fn engine_text(raw: &str) -> String {
    let end = ["\n<state>", "\n<non-verbose/>"].iter().filter_map(|m| raw.find(m)).min().unwrap_or(raw.len());
    cap(raw[..end].trim_end(), DETAIL_CHARS)
}

/// `s` cut to `n` characters, with an ellipsis when cut.
pub(crate) fn cap(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// A format the engine refused when compiling it: `what` is the message's start
/// ("response_format: the JSON schema"), `schema` the schema it came from (to say where).
pub(crate) fn refused(what: &str, raw: &str, schema: Option<&Value>) -> Error {
    let detail = engine_text(raw);
    let reason = cap(&sentence(&detail, schema), REASON_CHARS);
    Error::Grammar { message: format!("{what} cannot be used: {reason}"), detail }
}

/// A format that allows no text at all: nothing can begin it.
pub(crate) fn empty(what: &str, raw: &str) -> Error {
    Error::Grammar {
        message: format!("{what} matches no text: no token of this model can begin it"),
        detail: engine_text(raw),
    }
}

/// The matcher failed after `fed` tokens of a generation (a mask, or a token taken).
pub(crate) fn stuck(raw: &str, fed: usize) -> Error {
    let detail = engine_text(raw);
    let first = detail.lines().next().unwrap_or_default();
    let message = if first.starts_with("NoExtension") {
        format!(
            "structured output: the format allows no further token after {fed} tokens (no token of \
             this model continues the text it requires)"
        )
    } else if let Some(rest) = first.strip_prefix("Parser Error: token ") {
        let token = rest.split(" doesn't satisfy").next().unwrap_or(rest);
        format!("structured output: token {} is not allowed by the format after {fed} tokens", cap(token, 40))
    } else {
        format!(
            "structured output: the grammar engine stopped after {fed} tokens: {}",
            cap(first, REASON_CHARS)
        )
    };
    Error::Grammar { message, detail }
}

/// The engine's reason in words, with where in `schema` it applies when that can be found.
fn sentence(text: &str, schema: Option<&Value>) -> String {
    // Lark's wrapping (a regex format and a tool-call grammar are Lark): "at 1(8): …" before,
    // an excerpt of the grammar's line after.
    let text = match text.split_once("): ") {
        Some((at, rest)) if at.starts_with("at ") && !at.contains('\n') => rest,
        _ => text,
    };
    let text = text.strip_prefix("failed to compile JSON schema: ").unwrap_or(text);
    if let Some(i) = text.find("regex parse error:") {
        let (why, pattern) = regex_reason(&text[i..]);
        let at = pattern.and_then(|p| schema.and_then(|s| find(s, "pattern", Some(&p)))).map(|p| at(&p));
        return match (schema, at) {
            (Some(_), Some(at)) => format!("`pattern` is not a valid regex: {why}{at}"),
            (Some(_), None) => format!("a `pattern` is not a valid regex: {why}"),
            (None, _) => why,
        };
    }
    let first = text.lines().next().unwrap_or_default().trim();
    let quoted = |prefix: &str| first.strip_prefix(prefix).map(|s| s.trim().to_string());
    let where_ = |key: &str, value: Option<&str>| {
        schema.and_then(|s| find(s, key, value)).map(|p| at(&p)).unwrap_or_default()
    };
    if let Some(keys) = quoted("Unimplemented keys: ") {
        let keys: Vec<String> = serde_json::from_str(&keys).unwrap_or_else(|_| vec![keys]);
        let list = keys.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
        let at = keys.first().map(|k| where_(k, None)).unwrap_or_default();
        return format!("it uses {list}, which structured output does not support{at}");
    }
    if let Some(t) = quoted("Invalid type: ") {
        return format!("`type` {t:?} is not a JSON Schema type{}", where_("type", Some(&t)));
    }
    if let Some(f) = quoted("Unknown format: ") {
        return format!("`format` {f:?} is not one structured output knows{}", where_("format", Some(&f)));
    }
    if let Some(r) = ref_of(first) {
        let at = where_("$ref", Some(&r));
        return match first.starts_with("Only absolute") {
            true => format!("`$ref` {r:?} is outside the schema (only \"#/…\" references are supported){at}"),
            false => format!("`$ref` {r:?} points to nothing in the schema{at}"),
        };
    }
    if let Some(why) = quoted("Unsatisfiable schema: ") {
        return format!("no value satisfies it: {why}");
    }
    first.to_string()
}

/// The reference an unresolved-`$ref` error names: "Reference segment 'x' not found in
/// '#/x/y'.", "Only absolute $ref's (#/...) are supported …; ref 'http://…'".
fn ref_of(first: &str) -> Option<String> {
    let named = (first.starts_with("Reference segment") && first.contains(" not found in '"))
        || first.starts_with("Only absolute $ref");
    let (_, r) = first.rsplit_once(" '").filter(|_| named)?;
    Some(r.strip_suffix("'.").or_else(|| r.strip_suffix('\'')).unwrap_or(r).to_string())
}

/// regex-syntax's error ("regex parse error:", the pattern, a line of carets under the bad
/// part, "error: why") as "why at `part`", and the pattern.
fn regex_reason(text: &str) -> (String, Option<String>) {
    let lines: Vec<&str> = text.lines().collect();
    let why = lines
        .iter()
        .find_map(|l| l.strip_prefix("error: "))
        .unwrap_or_else(|| lines[0].trim_start_matches("regex parse error:").trim());
    match (lines.get(1), lines.get(2)) {
        (Some(pattern), Some(carets)) if carets.trim_start().starts_with('^') => {
            let pattern = pattern.strip_prefix("    ").unwrap_or(pattern);
            let start = carets.chars().take_while(|&c| c == ' ').count().saturating_sub(4);
            let len = carets.trim().chars().count();
            let part: String = pattern.chars().skip(start).take(len.min(40)).collect();
            (format!("{why} at `{part}`"), Some(pattern.to_string()))
        }
        _ => (why.to_string(), None),
    }
}

/// " (at /pointer)", or " (at the root)".
fn at(pointer: &str) -> String {
    format!(" (at {})", place(pointer))
}

/// A JSON pointer in words: "the root", or the pointer (its first 80 characters).
pub(crate) fn place(pointer: &str) -> String {
    if pointer.is_empty() { "the root".into() } else { cap(pointer, 80) }
}

/// The JSON pointer of the first object in `schema` (depth first) that has `key` (with the
/// string `value`, when given).
pub(crate) fn find(schema: &Value, key: &str, value: Option<&str>) -> Option<String> {
    match schema {
        Value::Object(o) => {
            if o.get(key).is_some_and(|v| value.is_none_or(|want| v.as_str() == Some(want))) {
                return Some(String::new());
            }
            o.iter().find_map(|(k, v)| find(v, key, value).map(|p| format!("/{}{p}", escape(k))))
        }
        Value::Array(a) => {
            a.iter().enumerate().find_map(|(i, v)| find(v, key, value).map(|p| format!("/{i}{p}")))
        }
        _ => None,
    }
}

/// `token` escaped for a JSON pointer.
pub(crate) fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}
