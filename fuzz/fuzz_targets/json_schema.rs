//! Structured output's formats, compiled for the tiny fixture's tokenizer
//! ([`Grammars::constraint`]). Input: a mode byte, then the format's text. Mode bits 0–1: the
//! kind — a JSON schema with `strict` absent, `true` or `false` (`Format::JsonSchema`; text that
//! is not JSON becomes a regex), or a regex (`Format::Regex`). A schema goes through the
//! `strict` rewrite, the recursion check and llguidance; a format it accepts is then walked for
//! up to 16 tokens, each the lowest the mask allows.
//!
//! Checks: no panic; every error — refused when compiled, or at a mask or a token mid-walk — is
//! `InvalidInput` whose message is one line under 300 characters with none of the engine's
//! internal state (its parser statistics, token dump, grammar dump).

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use webmamba::Error;
use webmamba::chat::constraint::{Format, Grammars};

const TOKENIZER: &[u8] = include_bytes!("../../tests/fixtures/tiny-f32/tokenizer.json");

fn grammars() -> &'static Grammars {
    static GRAMMARS: OnceLock<Grammars> = OnceLock::new();
    GRAMMARS.get_or_init(|| Grammars::new(TOKENIZER, 300, 0).unwrap())
}

/// An error a page's developer reads: typed, short, one line, no engine state.
fn check(e: &Error, input: &str) {
    let message = e.to_string();
    assert_eq!(e.code(), "InvalidInput", "{input:?}: {message}");
    assert!(message.chars().count() < 300, "{input:?}: {} characters: {message}", message.chars().count());
    for internal in ["\n", "<state>", "Parser:", "Tokens:", "compute_time", "grm_prefix", "NoExtension"] {
        assert!(!message.contains(internal), "{input:?}: {internal:?} in {message:?}");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    let format = match (mode & 3, serde_json::from_str::<serde_json::Value>(&text)) {
        (3, _) | (_, Err(_)) => Format::Regex(text.to_string()),
        (kind, Ok(schema)) => Format::JsonSchema { schema, strict: [None, Some(true), Some(false)][kind as usize] },
    };
    let mut constraint = match grammars().constraint(&format) {
        Ok(c) => c,
        Err(e) => return check(&e, &text),
    };
    for _ in 0..16 {
        if constraint.is_stopped() {
            return;
        }
        let mask = match constraint.allowed() {
            Ok(m) => m,
            Err(e) => return check(&e, &text),
        };
        let Some(token) = mask.words.iter().enumerate().find(|(_, w)| **w != 0).map(|(i, w)| 32 * i as u32 + w.trailing_zeros())
        else {
            return;
        };
        if let Err(e) = constraint.commit(token) {
            return check(&e, &text);
        }
    }
});
