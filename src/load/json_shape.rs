//! [`JsonShape`]: how many values a model folder's JSON file holds, counted in one pass without
//! building it. A folder's small files are somebody else's input: a 128 MiB `tokenizer.json`
//! of four million added tokens, or a `generation_config.json` whose `eos_token_id` is a list
//! of millions, parses into gigabytes of `serde_json::Value`s or `tokenizers` tables. The file
//! is first walked with a visitor that keeps nothing but counts (its strings still read through
//! serde_json, so invalid UTF-8 or a lone surrogate is an error here too), and refused with a
//! typed error naming the count before anything is built from it.

use serde::Deserializer;
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};

use crate::error::{Error, Result};

/// The most values (every number, string, list, map and map key counted once) a small JSON file
/// may hold: `tokenizer.json`'s (published ones: Qwen's ~0.9 M, Gemma's ~3 M), the others'.
pub(crate) const MAX_TOKENIZER_VALUES: u64 = 16 << 20;
/// See [`MAX_TOKENIZER_VALUES`]: config.json, the safetensors index, tokenizer_config.json,
/// generation_config.json (published ones: at most tens of thousands).
pub(crate) const MAX_SMALL_JSON_VALUES: u64 = 1 << 20;
/// The most tokens in `tokenizer.json`'s `model.vocab` (published: up to 262,144).
pub const MAX_VOCAB: u64 = 1 << 20;
/// The most merges in `model.merges` (published: up to ~0.5 M).
pub(crate) const MAX_MERGES: u64 = 1 << 20;
/// The most entries in `added_tokens` (published: up to a few thousand).
pub(crate) const MAX_ADDED_TOKENS: u64 = 1 << 17;

/// A JSON document's counts: all values, and the items of the lists or maps at the paths a
/// tokenizer grows with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JsonShape {
    /// Every value, a map's keys included.
    pub(crate) values: u64,
    /// Items of `model.vocab` (a map, or a list of pairs).
    pub vocab: u64,
    /// Items of `model.merges`.
    pub(crate) merges: u64,
    /// Items of `added_tokens`.
    pub(crate) added_tokens: u64,
}

/// Where in the document a value is.
#[derive(Clone, Copy, PartialEq)]
enum At {
    Root,
    Model,
    Vocab,
    Merges,
    AddedTokens,
    Other,
}

impl JsonShape {
    /// Counts `bytes`, JSON file `what`; stops with a `Config` error once `max_values` is passed.
    pub(crate) fn of(what: &str, bytes: &[u8], max_values: u64) -> Result<Self> {
        Self::counted(what, bytes, max_values).map_err(Error::Config)
    }

    /// [`JsonShape::of`] with the error's message, for callers with their own error kind.
    pub(crate) fn counted(what: &str, bytes: &[u8], max_values: u64) -> Result<Self, String> {
        let mut shape = JsonShape::default();
        let mut de = serde_json::Deserializer::from_slice(bytes);
        Seed { shape: &mut shape, at: At::Root, max: max_values }
            .deserialize(&mut de)
            .and_then(|()| de.end())
            .map_err(|e| match shape.values > max_values {
                true => {
                    format!("{what} holds more than {max_values} JSON values: refused before it is built")
                }
                false => format!("{what} is not valid JSON: {e}"),
            })?;
        Ok(shape)
    }

    /// Counts a `tokenizer.json` and refuses one larger than published tokenizers are by far
    /// ([`MAX_VOCAB`], [`MAX_MERGES`], [`MAX_ADDED_TOKENS`], [`MAX_TOKENIZER_VALUES`]): a
    /// `Tokenizer` error naming the count.
    pub fn check_tokenizer(bytes: &[u8]) -> Result<Self> {
        let shape = Self::counted("tokenizer.json", bytes, MAX_TOKENIZER_VALUES).map_err(Error::Tokenizer)?;
        for (what, n, max) in [
            ("model.vocab", shape.vocab, MAX_VOCAB),
            ("model.merges", shape.merges, MAX_MERGES),
            ("added_tokens", shape.added_tokens, MAX_ADDED_TOKENS),
        ] {
            if n > max {
                return Err(Error::Tokenizer(format!(
                    "tokenizer.json's {what} has {n} entries; at most {max} are accepted"
                )));
            }
        }
        Ok(shape)
    }
}

struct Seed<'s> {
    shape: &'s mut JsonShape,
    at: At,
    max: u64,
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, de: D) -> std::result::Result<(), D::Error> {
        de.deserialize_any(self)
    }
}

impl Seed<'_> {
    fn count<E: serde::de::Error>(&mut self) -> std::result::Result<(), E> {
        self.shape.values += 1;
        if self.shape.values > self.max { Err(E::custom("too many values")) } else { Ok(()) }
    }

    fn item<E: serde::de::Error>(&mut self) -> std::result::Result<(), E> {
        match self.at {
            At::Vocab => self.shape.vocab += 1,
            At::Merges => self.shape.merges += 1,
            At::AddedTokens => self.shape.added_tokens += 1,
            _ => {}
        }
        Ok(())
    }

    fn child(&mut self, at: At) -> Seed<'_> {
        Seed { shape: self.shape, at, max: self.max }
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: serde::de::Error>(mut self, _: bool) -> std::result::Result<(), E> {
        self.count()
    }
    fn visit_i64<E: serde::de::Error>(mut self, _: i64) -> std::result::Result<(), E> {
        self.count()
    }
    fn visit_u64<E: serde::de::Error>(mut self, _: u64) -> std::result::Result<(), E> {
        self.count()
    }
    fn visit_f64<E: serde::de::Error>(mut self, _: f64) -> std::result::Result<(), E> {
        self.count()
    }
    fn visit_str<E: serde::de::Error>(mut self, _: &str) -> std::result::Result<(), E> {
        self.count()
    }
    fn visit_unit<E: serde::de::Error>(mut self) -> std::result::Result<(), E> {
        self.count()
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> std::result::Result<(), A::Error> {
        self.count()?;
        while seq.next_element_seed(self.child(At::Other))?.is_some() {
            self.item()?;
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> std::result::Result<(), A::Error> {
        self.count()?;
        while let Some(key) = map.next_key::<KeyAt>()? {
            self.count()?;
            let at = match (self.at, key.0) {
                (At::Root, At::Model) | (At::Root, At::AddedTokens) => key.0,
                (At::Model, At::Vocab) | (At::Model, At::Merges) => key.0,
                _ => At::Other,
            };
            map.next_value_seed(self.child(at))?;
            self.item()?;
        }
        Ok(())
    }
}

/// A map key, read as the place it names (its text is checked, not kept).
struct KeyAt(At);

impl<'de> serde::Deserialize<'de> for KeyAt {
    fn deserialize<D: Deserializer<'de>>(de: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = KeyAt;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> std::result::Result<KeyAt, E> {
                Ok(KeyAt(match s {
                    "model" => At::Model,
                    "vocab" => At::Vocab,
                    "merges" => At::Merges,
                    "added_tokens" => At::AddedTokens,
                    _ => At::Other,
                }))
            }
        }
        de.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_values_and_the_tokenizer_tables() {
        let json = br#"{"added_tokens": [{"id": 0}, {"id": 1}], "model": {"vocab": {"a": 0, "b": 1, "c": 2},
            "merges": ["a b", "ab c"]}, "other": {"vocab": [1, 2, 3, 4, 5]}}"#;
        let shape = JsonShape::check_tokenizer(json).unwrap();
        assert_eq!((shape.vocab, shape.merges, shape.added_tokens), (3, 2, 2));
        // 1 root + 3 keys + list(1) + 2 maps(2) + 2 keys + 2 ids + model map(1) + 2 keys
        // + vocab map(1) + 3 keys + 3 ids + merges(1) + 2 + other map(1) + 1 key + list(1) + 5.
        assert_eq!(shape.values, 1 + 3 + 1 + 2 + 2 + 2 + 1 + 2 + 1 + 3 + 3 + 1 + 2 + 1 + 1 + 1 + 5);
    }

    #[test]
    fn refuses_too_many_and_bad_json_with_typed_errors() {
        let many = format!("[{}]", vec!["0"; 100].join(","));
        assert_eq!(JsonShape::of("x.json", many.as_bytes(), 100).unwrap_err().code(), "Config");
        assert!(JsonShape::of("x.json", many.as_bytes(), 101).is_ok());
        let err = JsonShape::of("x.json", br#"{"a": "\ud800"}"#, 100).unwrap_err();
        assert!(err.to_string().contains("not valid JSON"), "{err}");
        assert!(JsonShape::of("x.json", b"{} {}", 100).is_err(), "trailing data");
        let added =
            format!(r#"{{"added_tokens": [{}]}}"#, vec!["{}"; (MAX_ADDED_TOKENS + 1) as usize].join(","));
        let err = JsonShape::check_tokenizer(added.as_bytes()).unwrap_err();
        assert_eq!(err.code(), "Tokenizer");
        assert!(err.to_string().contains("added_tokens has 131073 entries"), "{err}");
    }
}
