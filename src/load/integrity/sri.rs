//! The digests' text forms: Subresource Integrity metadata (`sha256-<base64>`, as `<script
//! integrity>` and WebLLM take them), base64, and the Hub's hex SHA-256 in an `ETag`.
//!
//! SRI here is strict where the W3C's is lenient: an unknown algorithm or a malformed token is
//! an error naming it (a browser ignores the token, which would silently check nothing). As in
//! the W3C's rules, a value may list several tokens; only the strongest algorithm's count, and
//! any one of its digests matches.

use super::{Algorithm, Expected, Publisher};
use base64::Engine as _;
use base64::alphabet;
use base64::engine::general_purpose::STANDARD as BASE64_STANDARD;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

/// Longest `integrity` value accepted (a few digests of the longest algorithm).
pub(crate) const MAX_SRI_CHARS: usize = 4096;

/// Parses SRI metadata (`"sha256-<base64>"`, optionally several whitespace-separated tokens)
/// into what the caller expects; the error says what is wrong, for an `InvalidInput`.
pub fn parse(value: &str) -> Result<Expected, String> {
    if value.len() > MAX_SRI_CHARS {
        return Err(format!("{} characters; at most {MAX_SRI_CHARS}", value.len()));
    }
    let mut tokens = Vec::new();
    for token in value.split_ascii_whitespace() {
        let (alg, digest) = token.split_once('-').ok_or_else(|| {
            format!("{token:?} is not SRI: expected <algorithm>-<base64 digest>, e.g. sha256-…")
        })?;
        let alg = Algorithm::from_name(alg)
            .ok_or_else(|| format!("algorithm {alg:?} is not supported (sha256, sha384 or sha512)"))?;
        if digest.contains('?') {
            return Err(format!("{token:?}: SRI options (after '?') are not supported"));
        }
        let bytes = base64_decode(digest).ok_or_else(|| format!("{token:?}: the digest is not base64"))?;
        if bytes.len() != alg.digest_len() {
            return Err(format!(
                "{token:?}: a {} digest is {} bytes, this one {}",
                alg.name(),
                alg.digest_len(),
                bytes.len()
            ));
        }
        tokens.push((alg, bytes));
    }
    let strongest = tokens.iter().map(|(a, _)| *a).max().ok_or("no digest (expected sha256-<base64>)")?;
    let digests = tokens.into_iter().filter(|(a, _)| *a == strongest).map(|(_, d)| d).collect();
    Ok(Expected { alg: strongest, digests, from: Publisher::Option })
}

/// `<alg>-<base64 digest>`.
pub(crate) fn to_sri(alg: Algorithm, digest: &[u8]) -> String {
    format!("{}-{}", alg.name(), base64_encode(digest))
}

/// Standard base64 with padding.
pub fn base64_encode(bytes: &[u8]) -> String {
    BASE64_STANDARD.encode(bytes)
}

/// Base64, the standard alphabet or the URL-safe one (`-`, `_`), padding optional but, when
/// present, exactly what the length needs; `None` for anything else (stray characters, a
/// length no encoding has, set bits past the last byte, the two alphabets mixed).
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let padding = if text.ends_with('=') {
        DecodePaddingMode::RequireCanonical
    } else {
        DecodePaddingMode::RequireNone
    };
    let config = GeneralPurposeConfig::new().with_decode_padding_mode(padding);
    [GeneralPurpose::new(&alphabet::STANDARD, config), GeneralPurpose::new(&alphabet::URL_SAFE, config)]
        .iter()
        .find_map(|engine| engine.decode(text).ok())
}

/// The SHA-256 an `ETag` / `X-Linked-Etag` value carries: 64 hex digits, quoted or bare. A weak
/// ETag (`W/"…"`) guarantees no bytes, and a 40-digit one is a git blob's SHA-1 (the Hub's
/// small, non-LFS files): neither is a SHA-256, `None`.
pub fn etag_sha256(value: &str) -> Option<[u8; 32]> {
    let v = value.trim();
    let v = v.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(v);
    hex32(v)
}

/// Exactly 64 hex digits, as 32 bytes.
pub(crate) fn hex32(text: &str) -> Option<[u8; 32]> {
    let bytes = text.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        let digit = |c: u8| (c as char).to_digit(16);
        out[i] = (digit(pair[0])? << 4 | digit(pair[1])?) as u8;
    }
    Some(out)
}
