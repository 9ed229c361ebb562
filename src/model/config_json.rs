//! Reading `config.json` into a [`Config`]: Python's non-finite numbers made readable, then
//! the registry of model types (`config_formats.rs`) turns it into the shared parts and the
//! block list, checked.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::load::json_shape::{JsonShape, MAX_SMALL_JSON_VALUES};
use crate::model::config::Config;
use crate::model::config_formats;

impl Config {
    /// Parses `config.json` bytes in any known format and checks the result.
    pub fn from_json(bytes: &[u8]) -> Result<Self> {
        // HF writes an unbounded `time_step_limit` as Python's bare `Infinity` (not JSON).
        let bytes = quote_non_finite(bytes);
        JsonShape::of("config.json", &bytes, MAX_SMALL_JSON_VALUES)?;
        let value: Value = serde_json::from_slice(&bytes)
            .map_err(|e| Error::Config(format!("config.json is not valid JSON: {e}")))?;
        // A GGUF file's config (`load::gguf::arch_hybrid`): its tensors as llama.cpp stores them.
        let llama_cpp = value.get(crate::load::gguf::arch_common::LLAMA_CPP_TENSORS).is_some();
        let mut config = config_formats::parse(value)?;
        if llama_cpp {
            crate::load::gguf::arch_hybrid::llama_cpp_tensors(&mut config);
        }
        Ok(config)
    }
}

/// `bytes` with every bare `Infinity`, `-Infinity` and `NaN` outside strings (what Python's
/// `json.dumps` writes for non-finite floats, and JSON does not allow) turned into a string
/// (`"Infinity"`...), which the fields that accept them read back.
fn quote_non_finite(bytes: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    const WORDS: [&[u8]; 3] = [b"-Infinity", b"Infinity", b"NaN"];
    let (mut out, mut in_string, mut escaped, mut i) = (Vec::new(), false, false, 0);
    let mut changed = false;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            (escaped, in_string) = match (escaped, b) {
                (true, _) => (false, true),
                (false, b'\\') => (true, true),
                (false, b'"') => (false, false),
                _ => (false, true),
            };
        } else if b == b'"' {
            in_string = true;
        } else if let Some(word) = WORDS.iter().find(|w| bytes[i..].starts_with(w)) {
            out.push(b'"');
            out.extend_from_slice(word);
            out.push(b'"');
            i += word.len();
            changed = true;
            continue;
        }
        out.push(b);
        i += 1;
    }
    if changed { std::borrow::Cow::Owned(out) } else { std::borrow::Cow::Borrowed(bytes) }
}
