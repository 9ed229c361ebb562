//! JSON calls: `{"name": "…", "arguments": {…}}`, or a list of them, in one tagged block.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::ToolCall;

#[derive(Deserialize)]
struct RawCall<'a> {
    name: String,
    #[serde(borrow, alias = "parameters")]
    arguments: Option<&'a RawValue>,
}

/// The calls in one tagged block's JSON.
pub(super) fn calls_in(body: &str) -> Option<Vec<ToolCall>> {
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
