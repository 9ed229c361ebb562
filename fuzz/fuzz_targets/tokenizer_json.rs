//! `tokenizer.json`: [`Tokenizer::from_bytes`]; when it loads, encodes fixed strings (with and
//! without special tokens), decodes the ids, streams them out one at a time
//! ([`webmamba::tokenizer::StreamDecoder`]) and decodes a few arbitrary ids.
//! Checks: no panic, hang or huge allocation. Errors are fine.

#![no_main]

use libfuzzer_sys::fuzz_target;
use webmamba::Tokenizer;

const TEXTS: &[&str] =
    &["", "Once upon a time", "  two  spaces\nand a newline", "héllo wörld 🦀 <|endoftext|>"];

fuzz_target!(|data: &[u8]| {
    let Ok(tokenizer) = Tokenizer::from_bytes(data) else { return };
    let vocab = tokenizer.vocab_size();
    let _ = tokenizer.token_to_id("<|endoftext|>");
    for text in TEXTS {
        for special in [false, true] {
            let Ok(ids) = tokenizer.encode(text, special) else { continue };
            let _ = tokenizer.decode(&ids, special);
            let mut stream = tokenizer.stream(special);
            for &id in &ids {
                if stream.step(&tokenizer, id).is_err() {
                    break;
                }
            }
            let _ = stream.finish(&tokenizer);
        }
    }
    let ids: Vec<u32> = (0..vocab.min(64) as u32).chain([vocab as u32, u32::MAX]).collect();
    let _ = tokenizer.decode(&ids, false);
    let mut stream = tokenizer.stream(true);
    for &id in &ids {
        let _ = stream.step(&tokenizer, id);
    }
    let _ = stream.finish(&tokenizer);
});
