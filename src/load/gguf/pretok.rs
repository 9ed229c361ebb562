//! llama.cpp's pre-tokenizer names (`tokenizer.ggml.pre`, which the converter picks by hashing
//! how the HF tokenizer splits a probe text) mapped back to the HF `normalizer` and
//! `pre_tokenizer` of the tokenizers those names stand for — llama.cpp's `llm_tokenizer_bpe`
//! (src/llama-vocab.cpp) gives each name its regexes; here each is written as the HF
//! `tokenizer.json` of the family writes it (the original regex, with `(?i:…)` where llama.cpp
//! spells the case out). A name not in the table is refused by name: a GGUF whose text would
//! be split differently from the model's training is worse than no tokenizer.

use serde_json::{Value as Json, json};

/// GPT-2's regex, as llama.cpp writes it for the names it treats as GPT-2 (HF's ByteLevel
/// pre-tokenizer has the same regex with a trailing `|\s+`, which matches the same pieces).
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";

/// Llama 3's regex (tokenizer.json's, also Falcon3's, Falcon-H1's, LFM2's).
const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Qwen2's regex (Llama 3's with single digits).
const QWEN2: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Qwen3.5's regex (Qwen2's with combining marks kept in words).
const QWEN35: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// DeepSeek's letter, punctuation and CJK classes (llama.cpp's, code points escaped: some of
/// its Greek ranges end in code points that NFC would rewrite into other ones).
const DEEPSEEK_LETTERS: &str = r"\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+";
const DEEPSEEK_PUNCT: &str =
    r"\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+";
const DEEPSEEK_CJK: &str = r"[\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+";

/// What a byte-level BPE vocabulary needs besides its merges.
pub(crate) struct PreTokenizer {
    /// HF `normalizer` (`null` for none).
    pub normalizer: Json,
    /// HF `pre_tokenizer`.
    pub pre_tokenizer: Json,
    /// A word that is itself a token is taken whole, merges aside (llama.cpp's
    /// `ignore_merges`, HF's BPE `ignore_merges`).
    pub ignore_merges: bool,
    /// llama.cpp adds BOS by default for this name (when the file has no `add_bos_token`).
    pub add_bos: bool,
}

fn split(regex: &str) -> Json {
    json!({"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": false})
}

fn byte_level(use_regex: bool) -> Json {
    json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": use_regex})
}

fn sequence(pretokenizers: Vec<Json>) -> Json {
    json!({"type": "Sequence", "pretokenizers": pretokenizers})
}

/// The pre-tokenizer names [`for_name`] knows, for error messages and docs.
pub(crate) const KNOWN: &[&str] = &[
    "default",
    "gpt-2",
    "phi-2",
    "gigachat",
    "a.x-4.0",
    "mellum",
    "jais",
    "trillion",
    "granite-docling",
    "exaone4",
    "mpt",
    "olmo",
    "llama3",
    "llama-v3",
    "llama-bpe",
    "falcon3",
    "falcon-h1",
    "pixtral",
    "midm-2.0",
    "lfm2",
    "jina-v5-nano",
    "dbrx",
    "smaug-bpe",
    "qwen2",
    "deepseek-r1-qwen",
    "megrez",
    "stablelm2",
    "qwen35",
    "starcoder",
    "refact",
    "command-r",
    "smollm",
    "codeshell",
    "exaone",
    "minerva-7b",
    "falcon",
    "deepseek-llm",
    "deepseek-coder",
];

/// The HF pieces for llama.cpp's pre-tokenizer `name` (`""`: a file without the key, which
/// llama.cpp reads as `"default"`), or `None` for a name not in [`KNOWN`].
pub(crate) fn for_name(name: &str) -> Option<PreTokenizer> {
    let nfc = || json!({"type": "NFC"});
    let plain = |pre_tokenizer| PreTokenizer {
        normalizer: Json::Null,
        pre_tokenizer,
        ignore_merges: false,
        add_bos: false,
    };
    Some(match name {
        // llama.cpp's fallback regexes, one Split each (llama.cpp splits by each in turn,
        // keeping what a regex does not match as pieces of their own, as `Isolated` does).
        "" | "default" => plain(sequence(vec![
            split(r"[\p{P}\$\+<=>\^~\|]+"),
            split(GPT2),
            split(r"\p{N}+"),
            split("[0-9][0-9][0-9]"),
            byte_level(false),
        ])),
        "gpt-2" | "phi-2" | "gigachat" | "a.x-4.0" | "mellum" | "jais" | "trillion" | "granite-docling"
        | "exaone4" | "olmo" => plain(byte_level(true)),
        // GPT-NeoX's tokenizer (MPT's; llama.cpp's built-in vocabulary for Mamba): GPT-2's
        // split after NFC.
        "mpt" => PreTokenizer { normalizer: nfc(), ..plain(byte_level(true)) },
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0" | "lfm2"
        | "jina-v5-nano" => PreTokenizer {
            ignore_merges: true,
            add_bos: true,
            ..plain(sequence(vec![split(LLAMA3), byte_level(false)]))
        },
        "dbrx" | "smaug-bpe" => plain(sequence(vec![split(LLAMA3), byte_level(false)])),
        // Qwen2's tokenizer normalizes to NFC first (llama.cpp does not: the same on NFC text).
        "qwen2" => {
            PreTokenizer { normalizer: nfc(), ..plain(sequence(vec![split(QWEN2), byte_level(false)])) }
        }
        "deepseek-r1-qwen" | "megrez" | "stablelm2" => plain(sequence(vec![split(QWEN2), byte_level(false)])),
        // Qwen3.5's does not (its regex keeps combining marks with their letters instead).
        "qwen35" => plain(sequence(vec![split(QWEN35), byte_level(false)])),
        "starcoder" | "refact" | "command-r" | "smollm" | "codeshell" | "exaone" | "minerva-7b" => {
            plain(sequence(vec![json!({"type": "Digits", "individual_digits": true}), byte_level(true)]))
        }
        // Falcon's (also Falcon-Mamba's): punctuation runs, GPT-2, digit runs cut in threes.
        "falcon" => plain(sequence(vec![
            json!({"type": "Punctuation", "behavior": "Contiguous"}),
            byte_level(true),
            json!({"type": "Digits", "individual_digits": false}),
            split("[0-9][0-9][0-9]"),
        ])),
        "deepseek-llm" => plain(sequence(vec![
            split(r"[\r\n]"),
            split(DEEPSEEK_LETTERS),
            split(DEEPSEEK_PUNCT),
            split(r"\s+$"),
            split(DEEPSEEK_CJK),
            split(r"\p{N}+"),
            byte_level(false),
        ])),
        "deepseek-coder" => plain(sequence(vec![
            split(r"[\r\n]"),
            split(r"\s?\p{L}+"),
            split(r"\s?\p{P}+"),
            split(DEEPSEEK_CJK),
            json!({"type": "Digits", "individual_digits": true}),
            byte_level(false),
        ])),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::gguf::value::{Metadata, Value};

    /// Every name in [`KNOWN`] maps to pieces `tokenizers` loads and runs (its regexes compile);
    /// no other name does.
    #[test]
    fn every_known_name_builds_a_tokenizer() {
        let strs = |v: &[&str]| Value::Array(v.iter().map(|s| Value::Str(s.to_string())).collect());
        for name in KNOWN.iter().copied().chain([""]) {
            assert!(for_name(name).is_some(), "{name}");
            let mut m = Metadata { file: "t.gguf".into(), ..Default::default() };
            m.values.insert("tokenizer.ggml.model".into(), Value::Str("gpt2".into()));
            m.values.insert("tokenizer.ggml.tokens".into(), strs(&["a", "b", "ab", "\u{120}", "1"]));
            m.values.insert("tokenizer.ggml.merges".into(), strs(&["a b"]));
            if !name.is_empty() {
                m.values.insert("tokenizer.ggml.pre".into(), Value::Str(name.into()));
            }
            let files = crate::load::gguf::tokenizer::from_metadata(&m).unwrap();
            let tok = crate::Tokenizer::from_bytes(&files.tokenizer_json.unwrap()).unwrap();
            assert_eq!(tok.encode("ab", false).unwrap(), [2], "{name}");
            tok.encode("ab ab 1234 'll — テスト\n\n  \t x", false).unwrap();
        }
        for name in ["gpt2", "llama", "qwen3", "GPT-2", "unknown"] {
            assert!(for_name(name).is_none(), "{name}");
        }
    }
}
