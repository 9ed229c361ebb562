//! The integrity check's parsers and streaming hash. Input format: a mode byte, then the text
//! or bytes. Runs, on the rest of the input: `sri::parse` (the `integrity` option's values),
//! `sri::etag_sha256`, `hub::tree_url` and `hub::subfolder` (a folder URL), `hub::lfs_digests`
//! (a Hub tree listing), `sri::base64_decode`; then a `FileCheck` of the bytes fed in pieces cut
//! where the mode byte says, against their own one-shot SHA-256 (with a head of the first bytes).
//! Checks: no panic; a parsed SRI value's digests all have its algorithm's length; base64 that
//! decodes re-encodes to what decodes to the same bytes; a listed URL is an http(s) API URL;
//! the streamed check of the bytes against their own digest passes, and fails with `Integrity`
//! when one bit of the expectation is flipped.

#![no_main]

use libfuzzer_sys::fuzz_target;
use webmamba::load::integrity::sri::{base64_decode, base64_encode, etag_sha256, parse};
use webmamba::load::integrity::{Expected, FileCheck, Publisher, hub, sha256};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    if let Ok(expected) = parse(&text) {
        assert!(!expected.digests.is_empty());
        assert!(expected.digests.iter().all(|d| d.len() == expected.alg.digest_len()));
    }
    let _ = etag_sha256(&text);
    if let Some(url) = hub::tree_url(&text) {
        assert!(url.starts_with("http://") || url.starts_with("https://"), "{url}");
        assert!(url.contains("/api/models/"), "{url}");
        let _ = hub::subfolder(&text);
    }
    let _ = hub::lfs_digests(rest, "");
    if let Some(bytes) = base64_decode(&text) {
        assert_eq!(base64_decode(&base64_encode(&bytes)).as_deref(), Some(bytes.as_slice()));
    }
    // The streaming check, cut into pieces of 1..=16 bytes (from the mode byte).
    let digest = sha256(rest);
    let step = (mode as usize % 16) + 1;
    let run = |expect: [u8; 32]| {
        let mut check = FileCheck::new("f", vec![Expected::sha256(expect, Publisher::Option)]).unwrap();
        let head = (mode as usize / 16).min(rest.len());
        check.expect_head(head as u64, sha256(&rest[..head]));
        for piece in rest.chunks(step) {
            check.update(piece).unwrap();
        }
        check.finish()
    };
    run(digest).unwrap();
    let mut wrong = digest;
    wrong[mode as usize % 32] ^= 1;
    assert_eq!(run(wrong).unwrap_err().code(), "Integrity");
});
