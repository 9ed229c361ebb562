//! A JSON schema whose `$ref` recursion has no base case — `{"$ref": "#"}`, or an object whose
//! required property refers back to the object — describes no finite value. llguidance
//! compiles it, then allows no first token (its error a dump of its parser's state) or lets the
//! model nest the object until `max_tokens`; so it is refused first, naming the `$ref` and
//! where it is used.
//!
//! A reference "can end" when some finite value satisfies its target. That is the least fixed
//! point of [`ends`] over the schema's references (all start as "cannot"); those that cannot
//! end there but can in the greatest fixed point (all start as "can") fail only through their
//! recursion — a target that cannot end for another reason (`false`, a contradiction) is left
//! to llguidance's own error.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use crate::chat::grammar_error::{cap, escape, place};
use crate::error::{Error, Result};

/// Keywords whose values are data, not schemas: a `$ref` inside them is not a reference.
const DATA: [&str; 4] = ["const", "enum", "default", "examples"];

/// `InvalidInput` when a `$ref` reachable from the root of `schema` recurses without a base
/// case; `what` starts the message ("response_format: the JSON schema").
pub(crate) fn check(schema: &Value, what: &str) -> Result<()> {
    let mut targets = HashMap::new();
    collect(schema, schema, &mut targets);
    let least = fixed_point(&targets, false);
    let greatest = fixed_point(&targets, true);
    let endless = |r: &str| !least[r] && greatest[r];
    if !targets.keys().any(|r| endless(r)) {
        return Ok(());
    }
    let mut seen = HashSet::new();
    match first_endless(schema, String::new(), &targets, &endless, &mut seen) {
        Some((r, at)) => Err(Error::InvalidInput(format!(
            "{what} cannot be used: `$ref` {:?} is recursive without a base case (at {}): every \
             value it describes would contain itself",
            cap(&r, 60),
            place(&at)
        ))),
        None => Ok(()),
    }
}

/// What `reference` points to in `root`, resolved as llguidance resolves it ("#" or "#/a/0/b",
/// segments taken as they are written).
fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    if reference == "#" || reference == "#/" {
        return Some(root);
    }
    reference.strip_prefix("#/")?.split('/').try_fold(root, |node, segment| match node {
        Value::Array(a) => a.get(segment.parse::<usize>().ok()?),
        _ => node.get(segment),
    })
}

/// Every `$ref` under `node` that resolves, with its target.
fn collect<'a>(root: &'a Value, node: &'a Value, targets: &mut HashMap<&'a str, &'a Value>) {
    match node {
        Value::Object(o) => {
            if let Some(r) = o.get("$ref").and_then(Value::as_str)
                && let Some(target) = resolve(root, r)
            {
                targets.insert(r, target);
            }
            for (k, v) in o {
                if !DATA.contains(&k.as_str()) {
                    collect(root, v, targets);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| collect(root, v, targets)),
        _ => {}
    }
}

/// Which references can end, iterated from `start` for all until nothing changes.
fn fixed_point<'a>(targets: &HashMap<&'a str, &'a Value>, start: bool) -> HashMap<&'a str, bool> {
    let mut can: HashMap<&str, bool> = targets.keys().map(|&r| (r, start)).collect();
    loop {
        let mut changed = false;
        for (&r, target) in targets {
            let now = ends(target, &can);
            if now != can[r] {
                can.insert(r, now);
                changed = true;
            }
        }
        if !changed {
            return can;
        }
    }
}

/// Whether some finite value satisfies `node`, given which references can end (one that does
/// not resolve is llguidance's to report: taken as able to end).
fn ends(node: &Value, can: &HashMap<&str, bool>) -> bool {
    let Value::Object(o) = node else { return node != &Value::Bool(false) };
    let list = |key: &str| o.get(key).and_then(Value::as_array).map(Vec::as_slice);
    if o.get("$ref").and_then(Value::as_str).is_some_and(|r| can.get(r) == Some(&false))
        || list("anyOf").is_some_and(|v| !v.iter().any(|s| ends(s, can)))
        || list("oneOf").is_some_and(|v| !v.iter().any(|s| ends(s, can)))
        || list("allOf").is_some_and(|v| !v.iter().all(|s| ends(s, can)))
    {
        return false;
    }
    if o.contains_key("const") || o.contains_key("enum") {
        return true;
    }
    let all = ["null", "boolean", "number", "string", "array", "object"];
    let types: Vec<&str> = match o.get("type") {
        Some(Value::String(t)) => vec![t],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => all.to_vec(),
    };
    types.iter().any(|&t| match t {
        "object" => object_ends(o, can),
        "array" => array_ends(o, can),
        _ => true,
    })
}

/// An object ends when each required property's schema does.
fn object_ends(o: &Map<String, Value>, can: &HashMap<&str, bool>) -> bool {
    let Some(required) = o.get("required").and_then(Value::as_array) else { return true };
    required.iter().filter_map(Value::as_str).all(|name| {
        match o.get("properties").and_then(|p| p.get(name)).or_else(|| o.get("additionalProperties")) {
            Some(s) => ends(s, can),
            None => true,
        }
    })
}

/// An array ends when each of its first `minItems` items' schemas does.
fn array_ends(o: &Map<String, Value>, can: &HashMap<&str, bool>) -> bool {
    let min = o.get("minItems").and_then(Value::as_u64).unwrap_or(0) as usize;
    let prefix = o.get("prefixItems").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let rest = o.get("items").filter(|i| !i.is_array());
    prefix.iter().take(min).all(|s| ends(s, can))
        && (min <= prefix.len() || rest.is_none_or(|s| ends(s, can)))
}

/// The first endless `$ref` reachable from `node` (at pointer `path`), depth first, following
/// references once each; with the pointer of the schema that holds it.
fn first_endless<'a>(
    node: &'a Value,
    path: String,
    targets: &HashMap<&'a str, &'a Value>,
    endless: &dyn Fn(&str) -> bool,
    seen: &mut HashSet<&'a str>,
) -> Option<(String, String)> {
    match node {
        Value::Object(o) => {
            if let Some(r) = o.get("$ref").and_then(Value::as_str) {
                if targets.contains_key(r) && endless(r) {
                    return Some((r.to_string(), path));
                }
                if let Some(&target) = targets.get(r)
                    && seen.insert(r)
                {
                    let at = r.trim_start_matches('#').to_string();
                    if let Some(found) = first_endless(target, at, targets, endless, seen) {
                        return Some(found);
                    }
                }
            }
            o.iter()
                .filter(|(k, _)| !DATA.contains(&k.as_str()) && *k != "$defs" && *k != "definitions")
                .find_map(|(k, v)| first_endless(v, format!("{path}/{}", escape(k)), targets, endless, seen))
        }
        Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, v)| first_endless(v, format!("{path}/{i}"), targets, endless, seen)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::check;

    #[test]
    fn recursion_without_a_base_case_is_named_with_where() {
        for (schema, reference, at) in [
            (json!({ "$ref": "#" }), "#", "the root"),
            (
                json!({ "type": "object", "properties": { "a": { "$ref": "#" } }, "required": ["a"] }),
                "#",
                "/properties/a",
            ),
            (
                json!({ "type": "object", "properties": { "a": { "$ref": "#/$defs/x" } },
                        "$defs": { "x": { "type": "array", "minItems": 1, "items": { "$ref": "#/$defs/x" } } } }),
                "#/$defs/x",
                "/properties/a",
            ),
            (
                json!({ "anyOf": [{ "$ref": "#/definitions/n" }],
                        "definitions": { "n": { "type": "object", "required": ["next"],
                                                "properties": { "next": { "$ref": "#/definitions/n" } } } } }),
                "#/definitions/n",
                "/anyOf/0",
            ),
            (
                json!({ "properties": { "a": { "$ref": "#/$defs/A" } },
                        "$defs": { "A": { "properties": { "b": { "$ref": "#/$defs/B" } } }, "B": { "$ref": "#/$defs/B" } } }),
                "#/$defs/B",
                "/$defs/A/properties/b",
            ),
        ] {
            let e = check(&schema, "response_format: the JSON schema").unwrap_err();
            let message = e.to_string();
            assert!(
                message.contains(&format!("`$ref` {reference:?}")) && message.contains(&format!("(at {at})")),
                "{message}"
            );
            assert!(message.len() < 300, "{message}");
        }
    }

    #[test]
    fn recursion_with_a_way_to_end_passes() {
        for schema in [
            // An optional property, a nullable type, an empty array, another branch of a union.
            json!({ "type": "object", "properties": { "a": { "$ref": "#" } } }),
            json!({ "type": ["object", "null"], "properties": { "a": { "$ref": "#" } }, "required": ["a"] }),
            json!({ "type": "array", "items": { "$ref": "#" } }),
            json!({ "$defs": { "t": { "anyOf": [{ "type": "integer" }, { "type": "array", "minItems": 1, "items": { "$ref": "#/$defs/t" } }] } },
                    "$ref": "#/$defs/t" }),
            // An unused endless definition, a reference that does not resolve (llguidance's to
            // report), a `$ref` that is data.
            json!({ "$defs": { "x": { "$ref": "#/$defs/x" } }, "type": "string" }),
            json!({ "$ref": "#/$defs/missing" }),
            json!({ "const": { "$ref": "#" } }),
            // A target that cannot end for another reason than recursion.
            json!({ "$defs": { "f": false }, "$ref": "#/$defs/f" }),
        ] {
            assert!(check(&schema, "x").is_ok(), "{schema}");
        }
    }
}
