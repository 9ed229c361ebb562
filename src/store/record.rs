//! One stored record as bytes: a checkpoint (the state at a position, with a prompt-end's
//! logits) or a key/value page, checked whole when read back.
//!
//! Format, little-endian (a sibling of the export format, `session/export.rs`: the same field
//! conventions, its own magic and version):
//! ```text
//! magic  "WMRECORD"                     8 bytes
//! version u32 = 1
//! kind u8                               0 = checkpoint, 1 = page
//! store fingerprint                     32 bytes  (the model's fingerprint and how the engine
//!                                                  computes: `Store::fingerprint`)
//! key                                   32 bytes  (checkpoint: its cache key; page: the chain
//!                                                  key after its block)
//! position u64                          (checkpoint: tokens before it; page: its block's end)
//! n_logits u64, logits f32 × n_logits   (a prompt-end's V logits; 0 otherwise)
//! n_values u64, values f32 × n_values   (checkpoint: the fixed state regions, then its tail
//!                                        rows; page: its rows)
//! checksum                              32 bytes  (blake3 of everything before it)
//! ```
//! Reading a record checks all of it against what was asked for; any difference is a [`Miss`]
//! (the caller deletes the record and computes instead), never a wrong state.

use crate::cache::keys::Key;

const MAGIC: &[u8; 8] = b"WMRECORD";
const VERSION: u32 = 1;
/// Bytes before the logits: magic, version, kind, fingerprint, key, position.
const HEAD: usize = 8 + 4 + 1 + 32 + 32 + 8;

/// What a record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    /// A state at a position (a block or a prompt-end checkpoint).
    Checkpoint,
    /// One block of every attention layer's keys and values.
    Page,
}

impl Kind {
    fn byte(self) -> u8 {
        match self {
            Kind::Checkpoint => 0,
            Kind::Page => 1,
        }
    }

    /// The prefix of its records' names.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Checkpoint => "ckpt",
            Kind::Page => "page",
        }
    }
}

/// A decoded record.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Record {
    /// Checkpoint or page.
    pub(crate) kind: Kind,
    /// `Store::fingerprint` of the runtime that wrote it.
    pub(crate) fingerprint: Key,
    /// The cache key (checkpoint) or chain key (page) it is stored under.
    pub(crate) key: Key,
    /// Tokens before the checkpoint; a page's block end.
    pub(crate) position: u64,
    /// A prompt-end's logits (V), else empty.
    pub(crate) logits: Vec<f32>,
    /// The state's or the page's values.
    pub(crate) values: Vec<f32>,
}

/// Why stored bytes are not the record asked for. Each is a miss: the record is deleted and the
/// tokens are computed instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Miss {
    /// Fewer bytes than the fields say (a half-written or cut record).
    Truncated,
    /// Not a record, or a version this build does not read.
    Format(String),
    /// The checksum does not match: the bytes were damaged.
    Damaged,
    /// Written by another model (or another backend or number format).
    Foreign,
    /// Another kind, key or position than the name promised.
    Mismatch(String),
}

impl std::fmt::Display for Miss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Miss::Truncated => write!(f, "the record is cut short"),
            Miss::Format(why) => write!(f, "not a record this build reads: {why}"),
            Miss::Damaged => write!(f, "the record is damaged (its checksum does not match)"),
            Miss::Foreign => write!(f, "the record was written by another model or engine"),
            Miss::Mismatch(why) => write!(f, "the record is not the one asked for: {why}"),
        }
    }
}

impl Record {
    /// The record as bytes (see the module documentation).
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEAD + 16 + 4 * (self.logits.len() + self.values.len()) + 32);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.push(self.kind.byte());
        out.extend_from_slice(&self.fingerprint);
        out.extend_from_slice(&self.key);
        out.extend_from_slice(&self.position.to_le_bytes());
        for words in [&self.logits, &self.values] {
            out.extend_from_slice(&(words.len() as u64).to_le_bytes());
            for w in words.iter() {
                out.extend_from_slice(&w.to_le_bytes());
            }
        }
        let checksum = blake3::hash(&out);
        out.extend_from_slice(checksum.as_bytes());
        out
    }

    /// Reads `bytes` as the `kind` record `key` of `fingerprint`: anything else is a [`Miss`].
    pub(crate) fn from_bytes(bytes: &[u8], kind: Kind, fingerprint: &Key, key: &Key) -> Result<Record, Miss> {
        if bytes.len() < 8 || &bytes[..8] != MAGIC {
            return Err(if MAGIC.starts_with(bytes) {
                Miss::Truncated
            } else {
                Miss::Format("no WMRECORD magic".into())
            });
        }
        if bytes.len() < HEAD + 16 + 32 {
            return Err(Miss::Truncated);
        }
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
        if version != VERSION {
            return Err(Miss::Format(format!("version {version}, this build reads {VERSION}")));
        }
        // Lengths first: a cut record is Truncated, not Damaged.
        let n_logits = u64_at(HEAD);
        let values_at = (n_logits.checked_mul(4).and_then(|b| b.checked_add(HEAD as u64 + 8)))
            .filter(|&at| at + 8 <= bytes.len() as u64)
            .ok_or(Miss::Truncated)? as usize;
        let n_values = u64_at(values_at);
        let end = (n_values.checked_mul(4).and_then(|b| b.checked_add(values_at as u64 + 8)))
            .filter(|&end| end + 32 <= bytes.len() as u64)
            .ok_or(Miss::Truncated)? as usize;
        if bytes.len() != end + 32 {
            return Err(Miss::Damaged);
        }
        if blake3::hash(&bytes[..end]).as_bytes() != &bytes[end..] {
            return Err(Miss::Damaged);
        }
        if &bytes[13..45] != fingerprint {
            return Err(Miss::Foreign);
        }
        if bytes[12] != kind.byte() {
            return Err(Miss::Mismatch(format!("kind {} where {} was asked for", bytes[12], kind.byte())));
        }
        if &bytes[45..77] != key {
            return Err(Miss::Mismatch("another key".into()));
        }
        let floats = |from: usize, n: u64| -> Vec<f32> {
            bytes[from..from + 4 * n as usize]
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect()
        };
        Ok(Record {
            kind,
            fingerprint: *fingerprint,
            key: *key,
            position: u64_at(77),
            logits: floats(HEAD + 8, n_logits),
            values: floats(values_at + 8, n_values),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        Record {
            kind: Kind::Checkpoint,
            fingerprint: [7; 32],
            key: [9; 32],
            position: 48,
            logits: vec![0.5, -1.0, 2.0],
            values: (0..40).map(|i| i as f32 * 0.25).collect(),
        }
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let r = record();
        assert_eq!(Record::from_bytes(&r.to_bytes(), r.kind, &r.fingerprint, &r.key), Ok(r));
    }

    #[test]
    fn every_cut_is_truncated_and_every_flipped_byte_a_miss() {
        let r = record();
        let bytes = r.to_bytes();
        for n in 0..bytes.len() {
            let got = Record::from_bytes(&bytes[..n], r.kind, &r.fingerprint, &r.key);
            assert!(matches!(got, Err(Miss::Truncated) | Err(Miss::Damaged)), "cut at {n}: {got:?}");
        }
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(Record::from_bytes(&bad, r.kind, &r.fingerprint, &r.key).is_err(), "byte {i} flipped");
        }
    }

    #[test]
    fn another_model_kind_or_key_is_a_miss() {
        let r = record();
        let bytes = r.to_bytes();
        assert_eq!(Record::from_bytes(&bytes, r.kind, &[8; 32], &r.key), Err(Miss::Foreign));
        assert!(matches!(
            Record::from_bytes(&bytes, Kind::Page, &r.fingerprint, &r.key),
            Err(Miss::Mismatch(_))
        ));
        assert!(matches!(
            Record::from_bytes(&bytes, r.kind, &r.fingerprint, &[0; 32]),
            Err(Miss::Mismatch(_))
        ));
        assert!(matches!(
            Record::from_bytes(b"WMSTATE\0...", r.kind, &r.fingerprint, &r.key),
            Err(Miss::Format(_))
        ));
    }
}
