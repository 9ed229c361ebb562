//! [`Tokenizer`]: a checkpoint's `tokenizer.json`, through Hugging Face's `tokenizers` crate
//! (which builds for wasm32), plus [`StreamDecoder`] for streaming text out one token at a time
//! without ever emitting half a UTF-8 character.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::load::json_shape::JsonShape;

/// A loaded `tokenizer.json`.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
}

fn tok_err(e: impl std::fmt::Display) -> Error {
    Error::Tokenizer(e.to_string())
}

impl Tokenizer {
    /// Parses `tokenizer.json` bytes.
    pub fn from_bytes(json: &[u8]) -> Result<Self> {
        // `tokenizers` 0.23 panics (`expect("Helper")` in its decoder deserializer) on any JSON
        // error inside the `decoder` value (bad syntax, invalid UTF-8, a lone surrogate): read
        // the whole document first (skipping values does not check strings), so bad bytes are
        // an error — counting its values and tables without building it, so a file of millions
        // of added tokens or merges is refused before `tokenizers` builds them.
        JsonShape::check_tokenizer(json)?;
        let inner = tokenizers::Tokenizer::from_bytes(json).map_err(tok_err)?;
        if let Some(processor) = inner.get_post_processor() {
            check_post_processor(&serde_json::to_value(processor).map_err(tok_err)?)?;
        }
        Ok(Self { inner })
    }

    /// Number of tokens, including added special tokens.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// Token ids of `text`. Special tokens written in the text (e.g. `<|endoftext|>`) become
    /// their ids; `add_special_tokens` also applies the tokenizer's post-processor (BOS/EOS
    /// templates, if it has any).
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        self.inner.encode(text, add_special_tokens).map(|e| e.get_ids().to_vec()).map_err(tok_err)
    }

    /// Text of `ids`; `skip_special_tokens` drops special tokens from the output.
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String> {
        self.inner.decode(ids, skip_special_tokens).map_err(tok_err)
    }

    /// The id of a token string, if it is in the vocabulary (e.g. `"<|endoftext|>"`).
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// A decoder for streaming output (see [`StreamDecoder`]).
    pub fn stream(&self, skip_special_tokens: bool) -> StreamDecoder {
        StreamDecoder { skip_special_tokens, ids: Vec::new(), prefix: String::new(), prefix_index: 0 }
    }
}

/// Refuses what `tokenizers` 0.23 loads without checking and then panics on when encoding: a
/// `TemplateProcessing` (also inside a `Sequence`) whose templates name a special token it
/// does not define, whose special token has more ids than tokens (or fewer), or whose
/// single-sequence template uses `$B`. `processor` is the loaded post-processor, serialized.
fn check_post_processor(processor: &Value) -> Result<()> {
    let fail = |why: String| Err(Error::Tokenizer(format!("invalid TemplateProcessing: {why}")));
    match processor.get("type").and_then(Value::as_str) {
        Some("Sequence") => {
            for p in processor.get("processors").and_then(Value::as_array).into_iter().flatten() {
                check_post_processor(p)?;
            }
        }
        Some("TemplateProcessing") => {
            let specials = processor.get("special_tokens").and_then(Value::as_object);
            for (id, token) in specials.into_iter().flatten() {
                let len = |key: &str| token.get(key).and_then(Value::as_array).map(Vec::len);
                if len("ids") != len("tokens") {
                    return fail(format!("special token {id:?} does not have as many ids as tokens"));
                }
            }
            for which in ["single", "pair"] {
                for piece in processor.get(which).and_then(Value::as_array).into_iter().flatten() {
                    let special = piece.pointer("/SpecialToken/id").and_then(Value::as_str);
                    if let Some(id) = special.filter(|id| !specials.is_some_and(|s| s.contains_key(*id))) {
                        return fail(format!("the {which} template uses special token {id:?}, not defined"));
                    }
                    if which == "single" && piece.pointer("/Sequence/id").and_then(Value::as_str) == Some("B")
                    {
                        return fail("the single template uses the second sequence $B".into());
                    }
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Turns a stream of token ids into a stream of text pieces. A token that ends in the middle of
/// a multi-byte character yields nothing until the character is complete, so every piece is
/// valid UTF-8 and the pieces concatenate to the full decode. Owns its state (unlike the
/// `tokenizers` crate's `DecodeStream`, which borrows the tokenizer) so a session can keep one.
#[derive(Clone, Debug)]
pub struct StreamDecoder {
    skip_special_tokens: bool,
    ids: Vec<u32>,
    prefix: String,
    prefix_index: usize,
}

impl StreamDecoder {
    /// Feeds one token; returns the new text it completes, if any.
    pub fn step(&mut self, tokenizer: &Tokenizer, id: u32) -> Result<Option<String>> {
        tokenizers::tokenizer::step_decode_stream(
            &tokenizer.inner,
            vec![id],
            self.skip_special_tokens,
            &mut self.ids,
            &mut self.prefix,
            &mut self.prefix_index,
        )
        .map_err(tok_err)
    }

    /// Ends the stream: returns whatever text is still held back (bytes that never completed a
    /// character come out as U+FFFD).
    pub fn finish(&mut self, tokenizer: &Tokenizer) -> Result<String> {
        let all = tokenizer.decode(&self.ids, self.skip_special_tokens)?;
        let rest = all.strip_prefix(self.prefix.as_str()).unwrap_or(&all).to_string();
        self.ids.clear();
        self.prefix.clear();
        self.prefix_index = 0;
        Ok(rest)
    }
}
