//! The rewrite against OpenAI's Structured Outputs contract (every object: only the properties
//! it names, all of them required; an open object refused) and XGrammar's default (unnamed
//! properties closed where the schema is silent, `required` kept).

use serde_json::{Value, json};

use super::apply;

const W: &str = "response_format: the JSON schema";

fn strict(schema: Value) -> Value {
    apply(&schema, Some(true), W).unwrap()
}

fn default(schema: Value) -> Value {
    apply(&schema, None, W).unwrap()
}

fn person() -> Value {
    json!({ "type": "object", "properties": { "name": { "type": "string" }, "age": { "type": "integer" } } })
}

#[test]
fn strict_closes_the_root_and_requires_every_property() {
    let got = strict(person());
    assert_eq!(got["additionalProperties"], json!(false));
    assert_eq!(got["required"], json!(["name", "age"]));
    // A partial `required` becomes every name, in the properties' order.
    let got = strict(json!({ "type": "object", "required": ["age"],
        "properties": { "name": { "type": "string" }, "age": { "type": "integer" } } }));
    assert_eq!(got["required"], json!(["name", "age"]));
}

#[test]
fn strict_reaches_nested_objects_arrays_definitions_and_unions() {
    let schema = json!({
        "type": "object",
        "properties": {
            "home": { "type": "object", "properties": { "city": { "type": "string" } } },
            "pets": { "type": "array", "items": { "type": "object", "properties": { "kind": { "type": "string" } } } },
            "boss": { "$ref": "#/$defs/person" },
            "old": { "$ref": "#/definitions/thing" },
            "either": { "anyOf": [{ "type": "object", "properties": { "a": { "type": "integer" } } }, { "type": "string" }] },
            "one": { "oneOf": [{ "properties": { "b": { "type": "integer" } } }, { "type": "null" }] },
            "any": { "type": "object" }
        },
        "$defs": { "person": person() },
        "definitions": { "thing": { "type": ["object", "null"], "properties": { "id": { "type": "integer" } } } }
    });
    let got = strict(schema);
    for (pointer, required) in [
        ("", json!(["home", "pets", "boss", "old", "either", "one", "any"])),
        ("/properties/home", json!(["city"])),
        ("/properties/pets/items", json!(["kind"])),
        ("/$defs/person", json!(["name", "age"])),
        ("/definitions/thing", json!(["id"])),
        ("/properties/either/anyOf/0", json!(["a"])),
        ("/properties/one/oneOf/0", json!(["b"])),
    ] {
        let o = got.pointer(pointer).unwrap();
        assert_eq!(o["additionalProperties"], json!(false), "{pointer}: {o}");
        assert_eq!(o["required"], required, "{pointer}");
    }
    // An object naming no properties holds none (OpenAI closes every object).
    assert_eq!(
        got.pointer("/properties/any").unwrap(),
        &json!({ "type": "object", "additionalProperties": false })
    );
    // Not objects: untouched.
    assert_eq!(got.pointer("/properties/either/anyOf/1").unwrap(), &json!({ "type": "string" }));
    assert_eq!(got.pointer("/properties/boss").unwrap(), &json!({ "$ref": "#/$defs/person" }));
}

#[test]
fn strict_refuses_an_object_open_to_other_keys_naming_where() {
    for extra in [json!(true), json!({ "type": "string" }), json!({})] {
        let schema = json!({ "type": "object", "properties": { "meta": { "type": "object", "additionalProperties": extra } } });
        let e = apply(&schema, Some(true), W).unwrap_err();
        assert_eq!(e.code(), "InvalidInput");
        let message = e.to_string();
        assert!(message.contains("/properties/meta") && message.contains("strict: false"), "{message}");
        assert!(message.len() < 300, "{message}");
    }
    let e = apply(&json!({ "type": "object", "additionalProperties": true }), Some(true), W).unwrap_err();
    assert!(e.to_string().contains("the root"), "{e}");
    // Property names that need escaping in a JSON pointer.
    let schema = json!({ "properties": { "a/b~c": { "type": "object", "additionalProperties": true } } });
    assert!(apply(&schema, Some(true), W).unwrap_err().to_string().contains("/properties/a~1b~0c"));
}

#[test]
fn the_default_closes_named_objects_and_keeps_what_the_schema_says() {
    let got = default(json!({
        "type": "object",
        "properties": {
            "home": { "type": "object", "properties": { "city": { "type": "string" } } },
            "tags": { "type": "object", "additionalProperties": { "type": "integer" } },
            "free": { "type": "object", "properties": { "x": {} }, "additionalProperties": true },
            "any": { "type": "object" },
            "list": { "type": "array", "items": { "properties": { "k": { "type": "string" } } } },
            "pair": { "type": "array", "prefixItems": [{ "type": "string" }, { "type": "integer" }] }
        },
        "required": ["home"],
        "$defs": { "person": person() }
    }));
    assert_eq!(got["additionalProperties"], json!(false));
    assert_eq!(got["required"], json!(["home"]), "required is the schema's own");
    assert_eq!(got.pointer("/properties/home/additionalProperties"), Some(&json!(false)));
    assert_eq!(got.pointer("/properties/home/required"), None);
    assert_eq!(got.pointer("/properties/list/items/additionalProperties"), Some(&json!(false)));
    assert_eq!(got.pointer("/$defs/person/additionalProperties"), Some(&json!(false)));
    // What the schema says is kept: a typed map, an open object, an object naming nothing.
    assert_eq!(got.pointer("/properties/tags/additionalProperties"), Some(&json!({ "type": "integer" })));
    assert_eq!(got.pointer("/properties/free/additionalProperties"), Some(&json!(true)));
    assert_eq!(got.pointer("/properties/any").unwrap(), &json!({ "type": "object" }));
    // A tuple holds only its named items.
    assert_eq!(got.pointer("/properties/pair/items"), Some(&json!(false)));
}

#[test]
fn strict_false_is_the_schema_as_written() {
    let schema = json!({ "type": "object", "properties": { "a": person() }, "prefixItems": [] });
    assert_eq!(apply(&schema, Some(false), W).unwrap(), schema);
    assert_eq!(apply(&json!(true), None, W).unwrap(), json!(true));
}

#[test]
fn intersections_stay_open_and_their_children_are_walked() {
    let schema = json!({ "allOf": [
        { "properties": { "a": { "type": "integer" } } },
        { "properties": { "b": { "type": "object", "properties": { "c": { "type": "string" } } } } }
    ] });
    for strictness in [None, Some(true)] {
        let got = apply(&schema, strictness, W).unwrap();
        assert_eq!(got.get("additionalProperties"), None);
        assert_eq!(got.pointer("/allOf/0/additionalProperties"), None);
        assert_eq!(got.pointer("/allOf/1/additionalProperties"), None);
        assert_eq!(got.pointer("/allOf/1/properties/b/additionalProperties"), Some(&json!(false)));
    }
    // A `$ref` beside properties is the same intersection: left open; its target is closed.
    let schema = json!({ "$ref": "#/$defs/base", "properties": { "extra": { "type": "integer" } },
        "$defs": { "base": { "properties": { "id": { "type": "integer" } } } } });
    let got = apply(&schema, Some(true), W).unwrap();
    assert_eq!(got.get("additionalProperties"), None);
    assert_eq!(got.pointer("/$defs/base/additionalProperties"), Some(&json!(false)));
}
