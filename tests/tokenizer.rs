//! The tokenizer against the cases HF `tokenizers` (Python) produced, and streaming decode.

mod common;

use common::fixtures;
use webmamba::Tokenizer;

fn tokenizer() -> Tokenizer {
    Tokenizer::from_bytes(fixtures::all()[0].tokenizer).unwrap()
}

dual_test! {
    async fn encode_and_decode_match_hf_tokenizers() {
        let tok = tokenizer();
        let cases: serde_json::Value = serde_json::from_str(fixtures::TOKENIZER_CASES).unwrap();
        for case in cases.as_array().unwrap() {
            let text = case["text"].as_str().unwrap();
            let special = case["add_special_tokens"].as_bool().unwrap();
            let want: Vec<u32> = case["ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
            assert_eq!(tok.encode(text, special).unwrap(), want, "encode {text:?}");
            assert_eq!(tok.decode(&want, true).unwrap(), case["decoded_skip_special"].as_str().unwrap());
            assert_eq!(tok.decode(&want, false).unwrap(), case["decoded_keep_special"].as_str().unwrap());
        }
        // Special tokens written in the text are single tokens.
        let eot = tok.token_to_id("<|endoftext|>").unwrap();
        assert!(tok.encode("<|user|>Hi<|endoftext|>", true).unwrap().ends_with(&[eot]));
    }

    async fn streaming_decode_never_splits_a_character() {
        let tok = tokenizer();
        for text in ["Zebra quokka 🦘!", "café — naïve señor, crème brûlée", "日本語のテキスト"] {
            let ids = tok.encode(text, false).unwrap();
            let mut stream = tok.stream(true);
            let mut pieces = Vec::new();
            for &id in &ids {
                if let Some(piece) = stream.step(&tok, id).unwrap() {
                    assert!(!piece.contains('\u{FFFD}'), "{text:?}: piece {piece:?} holds half a character");
                    pieces.push(piece);
                }
            }
            let rest = stream.finish(&tok).unwrap();
            assert_eq!(rest, "", "{text:?}: everything came out during the stream");
            assert_eq!(pieces.concat(), tok.decode(&ids, true).unwrap(), "{text:?}");
            assert_eq!(pieces.concat(), text);
            // Multi-byte characters unknown to this small vocabulary span several byte tokens,
            // so some steps must have held text back.
            if text != "café — naïve señor, crème brûlée" {
                assert!(pieces.len() < ids.len(), "{text:?}: expected a held-back step");
            }
        }
    }

    async fn bad_tokenizer_json_is_a_typed_error() {
        let err = Tokenizer::from_bytes(b"{\"not\": \"a tokenizer\"}").err().expect("invalid");
        assert_eq!(err.code(), "Tokenizer");
    }
}
