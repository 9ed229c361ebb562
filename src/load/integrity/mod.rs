//! Verified downloads: every file a load reads is hashed as its bytes stream past (SHA-2, no
//! second pass, no copy) and checked against every digest known for it, so a damaged download,
//! a damaged offline-cache entry or a file that is not the published one fails the load with
//! [`Error::Integrity`] naming the file.
//!
//! Where a digest comes from (a [`Publisher`]):
//! - the caller's `integrity` load option, SRI syntax per file name (`Integrity`, [`sri`]);
//! - the Hugging Face Hub's SHA-256 of an LFS file: its tree listing's `lfs.oid` ([`hub`]), or
//!   the `ETag` / `X-Linked-Etag` of a response, where the page can read it ([`sri::etag_sha256`]).
//!
//! A file with no digest is read as before, unhashed (nothing to compare with costs nothing).

pub mod hub;
pub mod sri;

#[cfg(any(target_arch = "wasm32", test))]
use std::collections::BTreeMap;

use sha2::Digest as _;

use crate::error::{Error, Result};

/// A hash function of the SHA-2 family, as SRI names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Algorithm {
    Sha256,
    Sha384,
    Sha512,
}

impl Algorithm {
    /// SRI's name: `sha256`, `sha384` or `sha512`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Algorithm::Sha256 => "sha256",
            Algorithm::Sha384 => "sha384",
            Algorithm::Sha512 => "sha512",
        }
    }

    /// The algorithm SRI calls `name`.
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        [Algorithm::Sha256, Algorithm::Sha384, Algorithm::Sha512].into_iter().find(|a| a.name() == name)
    }

    /// Bytes of a digest.
    pub fn digest_len(self) -> usize {
        match self {
            Algorithm::Sha256 => 32,
            Algorithm::Sha384 => 48,
            Algorithm::Sha512 => 64,
        }
    }
}

/// Who said what a file's digest is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Publisher {
    /// The caller's `integrity` load option.
    Option,
    /// The Hub's tree listing (`lfs.oid` of an LFS file).
    HubListing,
    /// The response's `ETag` or `X-Linked-Etag` (a Hub-layout URL's LFS file).
    ETag,
}

impl Publisher {
    fn describe(self) -> &'static str {
        match self {
            Publisher::Option => "the integrity option",
            Publisher::HubListing => "the Hub's file listing (lfs.oid)",
            Publisher::ETag => "the server's ETag",
        }
    }
}

/// What one publisher says a file hashes to: any one of `digests` (all of `alg`) matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expected {
    pub alg: Algorithm,
    /// Each `alg.digest_len()` bytes.
    pub digests: Vec<Vec<u8>>,
    pub(crate) from: Publisher,
}

impl Expected {
    /// A SHA-256 from a host.
    pub fn sha256(digest: [u8; 32], from: Publisher) -> Self {
        Expected { alg: Algorithm::Sha256, digests: vec![digest.to_vec()], from }
    }

    /// "sha256-… (the Hub's file listing (lfs.oid))".
    fn describe(&self) -> String {
        let sri: Vec<String> = self.digests.iter().map(|d| sri::to_sri(self.alg, d)).collect();
        format!("{} ({})", sri.join(" or "), self.from.describe())
    }
}

/// The `integrity` load option, parsed: for each file name, the caller's [`Expected`].
#[cfg(any(target_arch = "wasm32", test))]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Integrity {
    files: BTreeMap<String, Expected>,
}

/// The most entries `integrity` may have (a model folder has a handful of files).
#[cfg(any(target_arch = "wasm32", test))]
pub(crate) const MAX_INTEGRITY_ENTRIES: usize = 1024;

#[cfg(any(target_arch = "wasm32", test))]
impl Integrity {
    /// `(file name, SRI metadata)` pairs (`{ 'model.safetensors': 'sha256-…' }`); every name must
    /// be a plain file name and every value valid SRI of a supported algorithm ([`sri::parse`]),
    /// else `InvalidInput` naming the entry.
    pub(crate) fn parse(entries: impl IntoIterator<Item = (String, String)>) -> Result<Self> {
        let mut files = BTreeMap::new();
        for (name, value) in entries {
            if files.len() == MAX_INTEGRITY_ENTRIES {
                return Err(Error::InvalidInput(format!(
                    "options.integrity has more than {MAX_INTEGRITY_ENTRIES} entries"
                )));
            }
            let at = format!("options.integrity[{name:?}]");
            crate::model::check_file_name(&name)
                .map_err(|why| Error::InvalidInput(format!("{at}: the key {why}")))?;
            let expected = sri::parse(&value).map_err(|why| Error::InvalidInput(format!("{at}: {why}")))?;
            files.insert(name, expected);
        }
        Ok(Integrity { files })
    }

    /// No entries.
    #[cfg(target_arch = "wasm32")]
    pub(crate) fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// What the caller expects of file `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Expected> {
        self.files.get(name)
    }

    /// Fails (`InvalidInput`) when an entry names a file that is not among `read`, the files the
    /// load read: a misspelt name would otherwise check nothing.
    pub(crate) fn check_names<'a>(&self, read: impl IntoIterator<Item = &'a str> + Clone) -> Result<()> {
        match self.files.keys().find(|k| !read.clone().into_iter().any(|r| r == k.as_str())) {
            None => Ok(()),
            Some(k) => {
                let read: Vec<&str> = read.into_iter().collect();
                Err(Error::InvalidInput(format!(
                    "options.integrity names {k:?}, which this load does not read (it read: {})",
                    read.join(", ")
                )))
            }
        }
    }

    /// Checks a file the caller passed whole (`Model.load`'s bytes) against its entry, if any.
    pub(crate) fn verify(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let Some(mut check) = FileCheck::new(name, self.get(name).into_iter().cloned().collect()) else {
            return Ok(());
        };
        check.update(bytes)?;
        check.finish()
    }
}

/// One running SHA-2 state.
#[derive(Clone)]
enum Hasher {
    Sha256(sha2::Sha256),
    Sha384(sha2::Sha384),
    Sha512(sha2::Sha512),
}

impl Hasher {
    fn new(alg: Algorithm) -> Self {
        match alg {
            Algorithm::Sha256 => Hasher::Sha256(sha2::Sha256::new()),
            Algorithm::Sha384 => Hasher::Sha384(sha2::Sha384::new()),
            Algorithm::Sha512 => Hasher::Sha512(sha2::Sha512::new()),
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        match self {
            Hasher::Sha256(h) => h.update(bytes),
            Hasher::Sha384(h) => h.update(bytes),
            Hasher::Sha512(h) => h.update(bytes),
        }
    }

    fn finish(self) -> Vec<u8> {
        match self {
            Hasher::Sha256(h) => h.finalize().to_vec(),
            Hasher::Sha384(h) => h.finalize().to_vec(),
            Hasher::Sha512(h) => h.finalize().to_vec(),
        }
    }
}

/// Running hashes of one byte stream, one per algorithm (what a [`FileCheck`] keeps, or what
/// another thread keeps for it: the browser's hashing worker, `js/hash-worker.js`).
#[derive(Clone, Default)]
pub(crate) struct Hashers(Vec<(Algorithm, Hasher)>);

impl Hashers {
    /// One hash per algorithm of `algs` (duplicates once).
    pub(crate) fn new(algs: &[Algorithm]) -> Self {
        let mut algs = algs.to_vec();
        algs.sort();
        algs.dedup();
        Hashers(algs.into_iter().map(|a| (a, Hasher::new(a))).collect())
    }

    /// The algorithms, in order.
    #[cfg(any(target_arch = "wasm32", test))]
    pub(crate) fn algorithms(&self) -> Vec<Algorithm> {
        self.0.iter().map(|(a, _)| *a).collect()
    }

    /// The next bytes of the stream.
    pub(crate) fn update(&mut self, bytes: &[u8]) {
        for (_, h) in &mut self.0 {
            h.update(bytes);
        }
    }

    /// Each algorithm's digest of everything given.
    pub(crate) fn finish(self) -> Vec<(Algorithm, Vec<u8>)> {
        self.0.into_iter().map(|(a, h)| (a, h.finish())).collect()
    }
}

/// The SHA-256 of `bytes` (a header as first read, to compare with the verified stream's).
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    sha2::Sha256::digest(bytes).into()
}

/// One file's check as its bytes stream past, from its first byte: one hasher per algorithm
/// any publisher used, and optionally the SHA-256 its first bytes had when they were read
/// apart (a header fetched with a Range request), so what the layout was built from is the
/// verified file's own header.
pub struct FileCheck {
    file: String,
    expected: Vec<Expected>,
    /// The whole file's hashes, kept here unless [`Self::hash_elsewhere`] handed them away.
    hashers: Hashers,
    /// (its length, the SHA-256 first seen, the running hash of the stream's first bytes).
    head: Option<(u64, [u8; 32], sha2::Sha256)>,
    read: u64,
}

impl FileCheck {
    /// A check of file `file` against `expected`; `None` when nothing is expected of it.
    pub fn new(file: &str, expected: Vec<Expected>) -> Option<Self> {
        if expected.is_empty() {
            return None;
        }
        let algs: Vec<Algorithm> = expected.iter().map(|e| e.alg).collect();
        let hashers = Hashers::new(&algs);
        Some(FileCheck { file: file.into(), expected, hashers, head: None, read: 0 })
    }

    /// Also requires the file's first `len` bytes to hash to `sha256` (what they did when read
    /// before, apart from this stream).
    pub fn expect_head(&mut self, len: u64, sha256: [u8; 32]) {
        self.head = Some((len, sha256, sha2::Sha256::new()));
    }

    /// The next bytes of the file. Fails as soon as the first bytes differ from the head
    /// expected ([`Self::expect_head`]), before anything after them is used.
    pub fn update(&mut self, bytes: &[u8]) -> Result<()> {
        self.hashers.update(bytes);
        let start = self.read;
        self.read += bytes.len() as u64;
        if let Some((len, want, h)) = &mut self.head
            && start < *len
        {
            let take = ((*len - start) as usize).min(bytes.len());
            h.update(&bytes[..take]);
            if start + take as u64 == *len {
                let got: [u8; 32] = h.clone().finalize().into();
                if got != *want {
                    return Err(Error::Integrity {
                        file: self.file.clone(),
                        expected: format!(
                            "the {len}-byte header read first ({})",
                            sri::to_sri(Algorithm::Sha256, want)
                        ),
                        got: format!(
                            "another header in the whole file ({})",
                            sri::to_sri(Algorithm::Sha256, &got)
                        ),
                    });
                }
                self.head = None;
            }
        }
        Ok(())
    }

    /// Ends the check once the whole file went through [`Self::update`]: `Integrity` unless
    /// every publisher's digest (any one of its values) matches.
    pub fn finish(mut self) -> Result<()> {
        let got = std::mem::take(&mut self.hashers).finish();
        self.finish_with(&got)
    }

    /// The algorithms the whole file must be hashed with, which this check stops hashing
    /// itself: the caller hashes every byte it gives [`Self::update`] elsewhere (another
    /// thread) and ends the check with [`Self::finish_with`]. The head check stays here, so a
    /// changed header still fails before anything after it is used.
    #[cfg(any(target_arch = "wasm32", test))]
    pub(crate) fn hash_elsewhere(&mut self) -> Vec<Algorithm> {
        std::mem::take(&mut self.hashers).algorithms()
    }

    /// [`Self::finish`] with the whole file's digests computed elsewhere: `Integrity` unless
    /// every publisher's digest matches its algorithm's digest in `got` (an algorithm missing
    /// from `got` is a digest that matches nothing).
    pub(crate) fn finish_with(self, got: &[(Algorithm, Vec<u8>)]) -> Result<()> {
        for e in &self.expected {
            let digest = got.iter().find(|(a, _)| *a == e.alg).map(|(_, d)| d);
            if !digest.is_some_and(|digest| e.digests.contains(digest)) {
                return Err(Error::Integrity {
                    file: self.file,
                    expected: e.describe(),
                    got: digest
                        .map_or_else(|| format!("no {} digest", e.alg.name()), |d| sri::to_sri(e.alg, d)),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
