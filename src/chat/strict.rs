//! `strict` for a JSON schema — OpenAI's `response_format.json_schema.strict` and a tool's
//! `function.strict` — as a rewrite of the schema before llguidance compiles it:
//!
//! - `strict: true` is OpenAI's Structured Outputs contract: every object holds exactly the
//!   properties it names — `additionalProperties: false` everywhere, every named property in
//!   `required`. An object that allows other keys (`additionalProperties` true or a schema) is
//!   refused, as OpenAI refuses it.
//! - absent (the default) is XGrammar's strict mode, which WebLLM uses: an object that names
//!   properties and says nothing of `additionalProperties` allows no others, and a tuple
//!   (`prefixItems`) no items past it; `required` is the schema's own. A small model under a
//!   lenient schema invents keys until `max_tokens` cuts it off.
//! - `strict: false` is the schema as JSON Schema reads it: unnamed properties allowed.
//!
//! The rewrite walks every subschema that describes a value — `properties`,
//! `patternProperties`, `additionalProperties`, `items`, `prefixItems`, `anyOf`, `oneOf`,
//! `$defs` and `definitions` — so nested objects, arrays of objects and referenced definitions
//! are held alike. An `allOf`'s members are walked but not closed themselves (llguidance
//! intersects them key by key, so each closed alone would forbid the others' properties), and
//! neither is a schema holding an `allOf` or a `$ref` beside its own keywords (the same
//! intersection; the referenced definition is closed where it is defined).

use serde_json::{Map, Value};

use crate::chat::grammar_error::{escape, place};
use crate::error::{Error, Result};

/// The pointer of an object that allows properties it does not name, under `strict: true`.
type Open = String;

/// `schema` rewritten for `strict` (`None`: absent), or `InvalidInput` naming where a
/// `strict: true` schema lets an object hold keys it does not name; `what` starts that message
/// ("response_format: the JSON schema").
pub(crate) fn apply(schema: &Value, strict: Option<bool>, what: &str) -> Result<Value> {
    let mut out = schema.clone();
    if strict != Some(false) {
        walk(&mut out, strict == Some(true), true, &mut String::new()).map_err(|open| {
            Error::InvalidInput(format!(
                "{what} cannot be used with strict: true: the object at {} allows properties it \
                 does not name (additionalProperties); remove that, or set strict: false",
                place(&open)
            ))
        })?;
    }
    Ok(out)
}

/// Whether `o` describes an object: `type` says so, or it names properties without a type.
fn is_object(o: &Map<String, Value>) -> bool {
    match o.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => o.contains_key("properties"),
    }
}

/// Rewrites the schema at `node` (JSON pointer `path`); `closable` is false for an `allOf`
/// member.
fn walk(node: &mut Value, openai: bool, closable: bool, path: &mut String) -> Result<(), Open> {
    let Some(o) = node.as_object_mut() else { return Ok(()) };
    // An `allOf` or a `$ref` beside other keywords is an intersection (see the module doc).
    let closable = closable && !o.contains_key("allOf") && !o.contains_key("$ref");
    if closable && is_object(o) {
        close_object(o, openai, path)?;
    }
    if closable && o.contains_key("prefixItems") && !o.contains_key("items") {
        o.insert("items".into(), Value::Bool(false));
    }
    for key in ["properties", "patternProperties", "$defs", "definitions"] {
        if let Some(Value::Object(children)) = o.get_mut(key) {
            for (name, child) in children.iter_mut() {
                within(path, &[key, name], |p| walk(child, openai, true, p))?;
            }
        }
    }
    for key in ["additionalProperties", "items"] {
        match o.get_mut(key) {
            Some(child @ Value::Object(_)) => within(path, &[key], |p| walk(child, openai, true, p))?,
            Some(Value::Array(children)) => each(children, key, openai, true, path)?,
            _ => {}
        }
    }
    for (key, closable) in [("prefixItems", true), ("anyOf", true), ("oneOf", true), ("allOf", false)] {
        if let Some(Value::Array(children)) = o.get_mut(key) {
            each(children, key, openai, closable, path)?;
        }
    }
    Ok(())
}

/// `additionalProperties: false` where the object says nothing of it (every object under
/// OpenAI's contract, one that names properties otherwise); OpenAI's `required`: every name.
fn close_object(o: &mut Map<String, Value>, openai: bool, path: &str) -> Result<(), Open> {
    match o.get("additionalProperties") {
        None if openai || o.contains_key("properties") => {
            o.insert("additionalProperties".into(), Value::Bool(false));
        }
        Some(Value::Bool(false)) | None => {}
        Some(_) if openai => return Err(path.to_string()),
        Some(_) => {}
    }
    if openai && let Some(Value::Object(properties)) = o.get("properties") {
        let names = properties.keys().map(|k| Value::String(k.clone())).collect();
        o.insert("required".into(), Value::Array(names));
    }
    Ok(())
}

/// Walks each schema of the list under `key`.
fn each(
    children: &mut [Value],
    key: &str,
    openai: bool,
    closable: bool,
    path: &mut String,
) -> Result<(), Open> {
    for (i, child) in children.iter_mut().enumerate() {
        within(path, &[key, &i.to_string()], |p| walk(child, openai, closable, p))?;
    }
    Ok(())
}

/// Runs `f` with `path` extended by `parts` (escaped as JSON pointer tokens), then restores it.
fn within<T>(path: &mut String, parts: &[&str], f: impl FnOnce(&mut String) -> T) -> T {
    let len = path.len();
    for part in parts {
        path.push('/');
        path.push_str(&escape(part));
    }
    let r = f(path);
    path.truncate(len);
    r
}

#[cfg(test)]
mod tests;
