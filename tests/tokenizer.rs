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

    // Found by `fuzz/` (tokenizer_json): a syntax error inside `decoder` made `tokenizers`
    // panic instead of failing.
    async fn bad_json_inside_the_decoder_is_a_typed_error() {
        let json = br#"{"version": "1.0", "added_tokens": [], "normalizer": null, "pre_tokenizer": null,
            "post_processor": null, "decoder": vull,
            "model": {"type": "WordLevel", "vocab": {"t0": 0}, "unk_token": "t0"}}"#;
        let err = Tokenizer::from_bytes(json).err().expect("invalid");
        assert_eq!(err.code(), "Tokenizer");
        // Valid syntax, but a key that is not UTF-8, and a lone surrogate.
        for bad in [&b"{\"t\xf9pe\": \"Fuse\"}"[..], br#"{"type": "Strip", "content": "\udc00"}"#] {
            let json = [&br#"{"version": "1.0", "added_tokens": [], "decoder": "#[..], bad, br#",
                "model": {"type": "WordLevel", "vocab": {"t0": 0}, "unk_token": "t0"}}"#]
                .concat();
            let err = Tokenizer::from_bytes(&json).err().expect("invalid");
            assert_eq!(err.code(), "Tokenizer");
        }
    }

    // A model folder is untrusted (issue 54): a tokenizer.json of millions of added tokens,
    // merges or vocabulary entries is refused, naming the count, before `tokenizers` builds
    // tables for them (the file itself is within the 128 MiB cap).
    async fn a_tokenizer_of_millions_of_entries_is_refused_before_it_is_built() {
        let added: Vec<String> = (0..200_000).map(|i| format!(r#"{{"id": {i}, "content": "<t{i}>", "special": true}}"#)).collect();
        let json = format!(
            r#"{{"version": "1.0", "added_tokens": [{}], "model": {{"type": "WordLevel", "vocab": {{"t0": 0}}, "unk_token": "t0"}}}}"#,
            added.join(",")
        );
        let err = Tokenizer::from_bytes(json.as_bytes()).err().expect("refused");
        assert_eq!(err.code(), "Tokenizer");
        assert!(err.to_string().contains("added_tokens has 200000 entries; at most 131072"), "{err}");
        let merges: Vec<String> = (0..1_100_000).map(|i| format!(r#""a{i} b""#)).collect();
        let json = format!(
            r#"{{"version": "1.0", "added_tokens": [], "model": {{"type": "BPE", "vocab": {{"a": 0, "b": 1}}, "merges": [{}]}}}}"#,
            merges.join(",")
        );
        let err = Tokenizer::from_bytes(json.as_bytes()).err().expect("refused");
        assert!(err.to_string().contains("model.merges has 1100000 entries"), "{err}");
        let vocab: Vec<String> = (0..1_100_000).map(|i| format!(r#""t{i}": {i}"#)).collect();
        let json = format!(
            r#"{{"version": "1.0", "added_tokens": [], "model": {{"type": "WordLevel", "vocab": {{{}}}, "unk_token": "t0"}}}}"#,
            vocab.join(",")
        );
        let err = Tokenizer::from_bytes(json.as_bytes()).err().expect("refused");
        assert!(err.to_string().contains("model.vocab has 1100000 entries"), "{err}");
        // The published tokenizer still loads (its tables counted, far below the limits).
        let shape = webmamba::load::json_shape::JsonShape::check_tokenizer(fixtures::all()[0].tokenizer).unwrap();
        assert!(shape.vocab > 0 && shape.vocab < webmamba::load::json_shape::MAX_VOCAB);
    }

    // Found by `fuzz/` (tokenizer_json): `tokenizers` loads a post-processor template that
    // names an undefined special token (or `$B` in the single template) and panics encoding.
    async fn broken_post_processor_template_is_a_typed_error() {
        let cls = r#"{"SpecialToken": {"id": "[CLS]", "type_id": 0}}"#;
        let (a, b) = (r#"{"Sequence": {"id": "A", "type_id": 0}}"#, r#"{"Sequence": {"id": "B", "type_id": 1}}"#);
        let specials = r#"{"[CLS]": {"id": "[CLS]", "ids": [0], "tokens": ["t0"]}}"#;
        for (single, specials) in [
            (format!("[{cls}, {a}]"), "{}".to_string()),
            (format!("[{a}, {b}]"), specials.to_string()),
            (format!("[{cls}, {a}]"), specials.replace("[0]", "[0, 0]")),
        ] {
            let json = format!(
                r#"{{"version": "1.0", "added_tokens": [], "pre_tokenizer": {{"type": "WhitespaceSplit"}},
                "post_processor": {{"type": "Sequence", "processors": [{{"type": "TemplateProcessing",
                    "single": {single}, "pair": [{a}, {b}], "special_tokens": {specials}}}]}},
                "model": {{"type": "WordLevel", "vocab": {{"t0": 0}}, "unk_token": "t0"}}}}"#
            );
            let err = Tokenizer::from_bytes(json.as_bytes()).err().expect(&json);
            assert_eq!(err.code(), "Tokenizer", "{json}");
        }
        // The same with everything defined loads and adds the special token.
        let json = format!(
            r#"{{"version": "1.0", "added_tokens": [], "pre_tokenizer": {{"type": "WhitespaceSplit"}},
            "post_processor": {{"type": "TemplateProcessing", "single": [{cls}, {a}], "pair": [{a}, {b}],
                "special_tokens": {specials}}},
            "model": {{"type": "WordLevel", "vocab": {{"t0": 0, "x": 1}}, "unk_token": "t0"}}}}"#
        );
        let tokenizer = Tokenizer::from_bytes(json.as_bytes()).unwrap();
        assert_eq!(tokenizer.encode("x", true).unwrap(), [0, 1]);
    }
}
