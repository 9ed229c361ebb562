//! The tokenizer built from a GGUF file's metadata (`webmamba::load::gguf::tokenizer`) against
//! the HF `tokenizer.json` the file was converted from, loaded with the `tokenizers` crate
//! directly: the same ids over `fixtures/gguf/multilingual.txt` (emoji, CJK, Arabic, Cyrillic,
//! code with tabs and whitespace runs, numbers, text the vocabulary only has bytes for), with
//! and without special tokens, and the same text back, for a byte-level BPE vocabulary and a
//! SentencePiece one — both files made by llama.cpp's converter (`convert_hf_to_gguf.py
//! --vocab-only`, tools/fixtures/gguf_fixtures.py); the SentencePiece one also against
//! SentencePiece's own ids (vocab-spm.sentencepiece.json, tools/fixtures/gguf_spm_reference.py),
//! which it follows where HF's tokenizer.json does not (text starting with a space, where HF's
//! Metaspace adds no "▁"; SentencePiece and llama.cpp do). Also llama.cpp's own tokenizer test
//! vectors (models/ggml-vocab-NAME.gguf with the HF tokenizer's ids in .gguf.out) when its
//! source is unpacked under target/bench (tools/fixtures/gguf.sh --setup), and the malformed
//! metadata the builder must refuse by name. Native only (the fixtures are read from disk).
#![cfg(not(target_arch = "wasm32"))]

use std::path::{Path, PathBuf};

use webmamba::load::gguf::tokenizer::{GgufTokenizer, from_metadata};
use webmamba::load::gguf::{Limits, Metadata, Parsed, Value, parse};
use webmamba::{Error, Tokenizer};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf").join(name)
}

fn metadata(path: &Path) -> Metadata {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let name = path.file_name().unwrap().to_str().unwrap();
    // No file size: a --vocab-only file has no tensors and ends before the aligned start of
    // its (empty) data section, which the reader refuses when given the size.
    match parse(name, &bytes, None, Limits::default()).expect("header") {
        Parsed::Done(h) => h.metadata,
        Parsed::NeedMore(n) => panic!("{name}: header needs {n} bytes"),
    }
}

fn built(m: &Metadata) -> (GgufTokenizer, Tokenizer) {
    let files = from_metadata(m).expect("tokenizer from metadata");
    let tok =
        Tokenizer::from_bytes(files.tokenizer_json.as_deref().expect("a tokenizer")).expect("tokenizer.json");
    (files, tok)
}

fn text() -> String {
    std::fs::read_to_string(fixture("multilingual.txt")).expect("multilingual.txt")
}

/// The pieces compared: the whole text, its lines with their newline, its lines without.
fn pieces(text: &str) -> Vec<&str> {
    let mut pieces: Vec<&str> = vec![text];
    pieces.extend(text.split_inclusive('\n'));
    pieces.extend(text.split('\n'));
    pieces
}

fn show(name: &str, piece: &str, special: bool, got: &[u32], want: &[u32]) -> String {
    let first = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
    format!(
        "{name}: ids differ (add_special_tokens {special}) at {first} for {piece:?}:\n  ours {:?}\n  HF   {:?}",
        &got[first.saturating_sub(3)..(first + 8).min(got.len())],
        &want[first.saturating_sub(3)..(first + 8).min(want.len())],
    )
}

/// Compares `ours` with `reference` over [`pieces`] of `text`: the ids (also with the special
/// tokens added when `with_special`: the file says whether to add BOS and EOS; without the keys
/// llama.cpp's defaults hold, which need not be the folder's), the reference's ids decoded by
/// both (with and without special tokens), and our own ids decoded back to the piece. Returns
/// the ids compared and the pieces whose ids differ (every other check panics).
fn compare(
    name: &str,
    ours: &Tokenizer,
    reference: &tokenizers::Tokenizer,
    text: &str,
    with_special: bool,
) -> (usize, Vec<String>) {
    let (mut checked, mut differing) = (0, Vec::new());
    for piece in pieces(text) {
        for special in [false, true].into_iter().filter(|&s| !s || with_special) {
            let want = reference.encode(piece, special).unwrap().get_ids().to_vec();
            let got = ours.encode(piece, special).unwrap();
            if got != want {
                differing.push(show(name, piece, special, &got, &want));
            }
            for skip in [false, true] {
                let want_text = reference.decode(&want, skip).unwrap();
                assert_eq!(
                    ours.decode(&want, skip).unwrap(),
                    want_text,
                    "{name}: decode of HF's ids for {piece:?}"
                );
            }
            if !special {
                assert_eq!(ours.decode(&got, false).unwrap(), piece, "{name}: round trip of {piece:?}");
            }
            checked += got.len();
        }
    }
    (checked, differing)
}

/// [`compare`], every piece the same.
fn same_as_reference(
    name: &str,
    ours: &Tokenizer,
    reference: &tokenizers::Tokenizer,
    text: &str,
    with_special: bool,
) -> usize {
    let (checked, differing) = compare(name, ours, reference, text, with_special);
    assert!(differing.is_empty(), "{} pieces differ; the first: {}", differing.len(), differing[0]);
    checked
}

fn vocab_fixture(name: &str) -> (Metadata, tokenizers::Tokenizer) {
    let m = metadata(&fixture(&format!("{name}.gguf")));
    let reference = tokenizers::Tokenizer::from_file(fixture(&format!("{name}.tokenizer.json"))).unwrap();
    (m, reference)
}

#[test]
fn multilingual_text_is_long_and_varied() {
    let t = text();
    assert!(t.len() >= 10 * 1024, "{} bytes", t.len());
    for (what, probe) in
        [("emoji", '🦙'), ("CJK", '語'), ("Arabic", 'ع'), ("Cyrillic", 'Ж'), ("tab", '\t'), ("digit", '7')]
    {
        assert!(t.contains(probe), "no {what}");
    }
    assert!(t.contains("        ") && t.contains("\n\n\n"), "whitespace runs");
}

#[test]
fn bpe_vocabulary_tokenizes_as_its_tokenizer_json() {
    let (m, reference) = vocab_fixture("vocab-bpe");
    assert_eq!(m.str("tokenizer.ggml.model").unwrap(), "gpt2");
    let (_, ours) = built(&m);
    let t = text();
    assert!(m.get("tokenizer.ggml.add_bos_token").is_some(), "the converter wrote add_bos_token");
    let n = same_as_reference("vocab-bpe", &ours, &reference, &t, true);
    // Byte-level: every text decodes back exactly.
    let ids = ours.encode(&t, false).unwrap();
    assert_eq!(ours.decode(&ids, false).unwrap(), t);
    eprintln!("vocab-bpe: {n} ids compared, {} for the whole text", ids.len());
}

/// SentencePiece's own ids for the pieces of the text (tools/fixtures/gguf_spm_reference.py).
fn sentencepiece_ids() -> std::collections::HashMap<String, Vec<u32>> {
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("vocab-spm.sentencepiece.json")).unwrap()).unwrap();
    let ids =
        |v: &serde_json::Value| v.as_array().unwrap().iter().map(|i| i.as_u64().unwrap() as u32).collect();
    json["pieces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_str().unwrap().to_string(), ids(&p[1])))
        .collect()
}

/// A SentencePiece BPE vocabulary (byte fallback): the same ids as SentencePiece itself on
/// every piece, and as the folder's tokenizer.json on every piece but those that start with a
/// space — where HF's Metaspace (prepend_scheme "first") adds no "▁" because the text already
/// starts with one, and SentencePiece and llama.cpp (whose tokenizer webmamba builds) do.
#[test]
fn spm_vocabulary_tokenizes_as_its_tokenizer_json() {
    let (m, reference) = vocab_fixture("vocab-spm");
    assert_eq!(m.str("tokenizer.ggml.model").unwrap(), "llama");
    let (_, ours) = built(&m);
    let t = text();
    let sp = sentencepiece_ids();
    for piece in pieces(&t) {
        let want = sp.get(piece).unwrap_or_else(|| panic!("no SentencePiece ids for {piece:?}"));
        let got = ours.encode(piece, false).unwrap();
        assert!(&got == want, "{}", show("vocab-spm vs SentencePiece", piece, false, &got, want));
    }
    // This folder's tokenizer adds no BOS and says nothing of it, so the converter wrote no
    // add_bos_token: llama.cpp then adds BOS to a SentencePiece vocabulary, and so do we.
    let stated = m.get("tokenizer.ggml.add_bos_token").is_some();
    let (n, differing) = compare("vocab-spm", &ours, &reference, &t, stated);
    let leading_space = pieces(&t).iter().filter(|p| p.starts_with(' ')).count();
    for d in &differing {
        assert!(
            d.contains("for \" "),
            "differs from tokenizer.json on a piece not starting with a space: {d}"
        );
    }
    let ids = ours.encode(&t, false).unwrap();
    if !stated {
        let bos = m.get("tokenizer.ggml.bos_token_id").and_then(Value::as_i64).unwrap() as u32;
        assert_eq!(ours.encode(&t, true).unwrap(), [&[bos], &ids[..]].concat(), "BOS first, as llama.cpp");
    }
    // The text needs byte fallback (characters the vocabulary has no piece for).
    let bytes = ids.iter().filter(|&&i| {
        let piece = reference.id_to_token(i).unwrap_or_default();
        piece.starts_with("<0x") && piece.ends_with('>')
    });
    assert!(bytes.count() > 100, "the text exercises byte fallback");
    eprintln!(
        "vocab-spm: {} pieces as SentencePiece; {n} ids compared with tokenizer.json, {} of {leading_space} \
         pieces starting with a space differ from it (HF's Metaspace), none other",
        pieces(&t).len(),
        differing.len()
    );
}

#[test]
fn chat_and_special_tokens_from_metadata() {
    for name in ["vocab-bpe", "vocab-spm"] {
        let (m, reference) = vocab_fixture(name);
        let (files, ours) = built(&m);
        let config: serde_json::Value = serde_json::from_slice(&files.tokenizer_config_json).unwrap();
        for key in ["bos_token", "eos_token"] {
            let Some(text) = config.get(key).and_then(|v| v.as_str()) else { continue };
            assert_eq!(ours.token_to_id(text), reference.token_to_id(text), "{name}: {key} {text:?}");
        }
        let chat = webmamba::chat::ChatConfig::from_files(
            Some(&files.tokenizer_config_json),
            None,
            files.generation_config_json.as_deref(),
            None,
        )
        .unwrap();
        if let Some(t) = m.get("tokenizer.chat_template").and_then(Value::as_str) {
            assert_eq!(chat.template(false), Some(t), "{name}: chat template");
        }
        let eos = m.get("tokenizer.ggml.eos_token_id").and_then(Value::as_i64);
        if let Some(eos) = eos {
            assert!(chat.end_ids(|t| ours.token_to_id(t)).contains(&(eos as u32)), "{name}: eos ends a turn");
        }
    }
}

/// The GGUF model fixtures carry their folder's tokenizer (tools/fixtures/gguf_fixtures.py's
/// byte-level BPE, make_fixtures' as in tests/fixtures/tiny-f32): `Checkpoint::from_gguf_bytes`
/// builds it, and chat ends turns on its eos.
#[test]
fn checkpoint_from_gguf_has_the_tokenizer() {
    let dir = fixture("");
    let mut models: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "gguf"))
        .filter(|p| !p.file_name().unwrap().to_str().unwrap().starts_with("vocab-"))
        .filter(|p| {
            let reference = std::fs::read_to_string(p.with_extension("reference.json")).unwrap_or_default();
            reference.contains("\"tokenizer\": \"bpe\"")
        })
        .collect();
    models.sort();
    assert!(!models.is_empty(), "no GGUF model fixture with the BPE tokenizer in {}", dir.display());
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-f32/tokenizer.json");
    let reference = tokenizers::Tokenizer::from_file(folder).unwrap();
    let mut opened = 0;
    for path in &models {
        let name = path.file_name().unwrap().to_str().unwrap();
        let ck = match webmamba::Checkpoint::from_gguf_bytes(name, std::fs::read(path).unwrap()) {
            Ok(ck) => ck,
            Err(Error::UnsupportedModel(_)) => continue,
            Err(e) => panic!("{name}: {e}"),
        };
        opened += 1;
        let ours = Tokenizer::from_bytes(ck.tokenizer_json.as_deref().expect("tokenizer")).unwrap();
        same_as_reference(name, &ours, &reference, &text(), true);
        let eos = metadata(path).get("tokenizer.ggml.eos_token_id").and_then(Value::as_i64).unwrap() as u32;
        assert!(ck.chat.end_ids(|t| ours.token_to_id(t)).contains(&eos), "{name}: eos ends a turn");
    }
    assert!(opened > 0, "no GGUF model fixture webmamba opens");
}

/// llama.cpp's tokenizer tests: models/ggml-vocab-NAME.gguf (made by its converter from the HF
/// tokenizer) and the HF tokenizer's ids for each text of .gguf.inp in .gguf.out.
#[test]
fn llama_cpp_vocab_vectors() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/bench/llama-cpp-python-src/llama_cpp_python-0.3.36/vendor/llama.cpp/models");
    if !dir.is_dir() {
        eprintln!("skipped: {} is not unpacked (tools/fixtures/gguf.sh --setup)", dir.display());
        return;
    }
    let names = [
        "gpt-2",
        "llama-bpe",
        "qwen2",
        "qwen35",
        "mpt",
        "starcoder",
        "refact",
        "falcon",
        "command-r",
        "deepseek-llm",
        "deepseek-coder",
        "llama-spm",
        "phi-3",
    ];
    let mut failed = Vec::new();
    for name in names {
        let path = dir.join(format!("ggml-vocab-{name}.gguf"));
        let (Ok(inp), Ok(out)) = (
            std::fs::read_to_string(path.with_extension("gguf.inp")),
            std::fs::read_to_string(path.with_extension("gguf.out")),
        ) else {
            eprintln!("{name}: no test vectors");
            continue;
        };
        let (_, ours) = built(&metadata(&path));
        let texts: Vec<&str> = inp.split("\n__ggml_vocab_test__\n").collect();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(texts.len(), lines.len() + 1, "{name}: .inp and .out disagree");
        let mut bad = 0;
        for (text, line) in texts.iter().zip(&lines) {
            let want: Vec<u32> = line.split_whitespace().map(|i| i.parse().unwrap()).collect();
            let got = ours.encode(text, false).unwrap();
            if got != want {
                bad += 1;
                eprintln!("{name}: {text:?}\n  ours {got:?}\n  HF   {want:?}");
            }
        }
        eprintln!("{name}: {} of {} texts as HF", lines.len() - bad, lines.len());
        if bad > 0 {
            failed.push(name);
        }
    }
    assert!(failed.is_empty(), "differ from HF: {failed:?}");
}

fn set(m: &mut Metadata, key: &str, v: Value) {
    m.values.insert(key.into(), v);
}

fn refused(m: &Metadata, words: &[&str]) {
    match from_metadata(m) {
        Err(e @ Error::Gguf { .. }) => {
            let msg = e.to_string();
            for w in words {
                assert!(msg.contains(w), "{msg:?} does not say {w:?}");
            }
        }
        Err(e) => panic!("not a Gguf error: {e}"),
        Ok(_) => panic!("accepted; should refuse: {words:?}"),
    }
}

#[test]
fn malformed_metadata_is_refused_by_name() {
    let (bpe, _) = vocab_fixture("vocab-bpe");
    let (spm, _) = vocab_fixture("vocab-spm");
    let n = bpe.get("tokenizer.ggml.tokens").and_then(Value::as_array).unwrap().len();

    let mut m = bpe.clone();
    set(&mut m, "tokenizer.ggml.pre", Value::Str("no-such-pre".into()));
    refused(&m, &["tokenizer.ggml.pre", "no-such-pre"]);

    let mut m = bpe.clone();
    set(&mut m, "tokenizer.ggml.model", Value::Str("rwkv".into()));
    refused(&m, &["tokenizer.ggml.model", "rwkv"]);

    let mut m = bpe.clone();
    set(&mut m, "tokenizer.ggml.token_type", Value::Array(vec![Value::Int(1); n - 1]));
    refused(&m, &["tokenizer.ggml.token_type", "values for"]);

    let mut m = bpe.clone();
    set(&mut m, "tokenizer.ggml.token_type", Value::Array(vec![Value::Int(9); n]));
    refused(&m, &["tokenizer.ggml.token_type[0]"]);

    let mut m = spm.clone();
    let k = spm.get("tokenizer.ggml.tokens").and_then(Value::as_array).unwrap().len();
    set(&mut m, "tokenizer.ggml.scores", Value::Array(vec![Value::F32(0.0); k + 1]));
    refused(&m, &["tokenizer.ggml.scores"]);

    let mut m = spm.clone();
    set(&mut m, "tokenizer.ggml.scores", Value::Array(vec![Value::F32(f32::NAN); k]));
    refused(&m, &["tokenizer.ggml.scores[0]", "finite"]);

    for bad in ["nospace", " leading", "Ġ", "zzzq zzzr"] {
        let mut m = bpe.clone();
        set(&mut m, "tokenizer.ggml.merges", Value::Array(vec![Value::Str(bad.into())]));
        refused(&m, &["tokenizer.ggml.merges[0]"]);
    }

    let mut m = bpe.clone();
    m.values.remove("tokenizer.ggml.merges");
    refused(&m, &["tokenizer.ggml.merges"]);

    for key in
        ["tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id"]
    {
        let mut m = bpe.clone();
        set(&mut m, key, Value::Uint(n as u64));
        refused(&m, &[key]);
    }

    let mut m = bpe.clone();
    set(&mut m, "tokenizer.ggml.tokens", Value::Array(vec![]));
    refused(&m, &["tokenizer.ggml.tokens"]);

    let mut m = bpe.clone();
    set(&mut m, "tokenizer.ggml.tokens", Value::Array(vec![Value::Uint(1); n]));
    refused(&m, &["tokenizer.ggml.tokens[0]"]);

    let mut m = bpe.clone();
    set(&mut m, "tokenizer.chat_template", Value::Uint(1));
    refused(&m, &["tokenizer.chat_template"]);

    let mut m = bpe.clone();
    set(&mut m, "tokenizer.chat_templates", Value::Array(vec![Value::Str("tool_use".into())]));
    refused(&m, &["tokenizer.chat_template.tool_use"]);

    // No tokenizer at all: no tokenizer.json, the rest still made.
    let mut m = bpe.clone();
    m.values.retain(|k, _| !k.starts_with("tokenizer."));
    let files = from_metadata(&m).unwrap();
    assert!(files.tokenizer_json.is_none());
}

#[test]
fn named_chat_templates_and_sampling_defaults() {
    let (mut m, _) = vocab_fixture("vocab-bpe");
    set(&mut m, "tokenizer.chat_template", Value::Str("{{ messages }}".into()));
    set(&mut m, "tokenizer.chat_templates", Value::Array(vec![Value::Str("tool_use".into())]));
    set(&mut m, "tokenizer.chat_template.tool_use", Value::Str("{{ tools }}".into()));
    set(&mut m, "general.sampling.temp", Value::F32(0.5));
    set(&mut m, "general.sampling.top_k", Value::Int(20));
    let files = from_metadata(&m).unwrap();
    let chat = webmamba::chat::ChatConfig::from_files(
        Some(&files.tokenizer_config_json),
        None,
        files.generation_config_json.as_deref(),
        None,
    )
    .unwrap();
    assert_eq!(chat.template(false), Some("{{ messages }}"));
    assert_eq!(chat.template(true), Some("{{ tools }}"));
    assert_eq!(chat.generation.get("temperature").and_then(|v| v.as_f64()), Some(0.5));
    assert_eq!(chat.generation.get("top_k").and_then(|v| v.as_i64()), Some(20));
}
