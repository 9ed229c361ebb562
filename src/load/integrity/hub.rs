//! The Hugging Face Hub's digests: a model folder URL in the Hub's layout,
//! `<origin>/<org>/<name>/resolve/<revision>/[<subfolder>/]`, has a tree listing at
//! `<origin>/api/models/<org>/<name>/tree/<revision>[/<subfolder>]`: JSON entries
//! `{ type, oid, size, path, lfs: { oid, size, pointerSize } }`, whose `lfs.oid` is the SHA-256
//! of an LFS file (the weights; `oid` is a git blob's SHA-1, not used). The layout, not the host
//! name, decides: mirrors and test servers laid out like the Hub count too.

use std::collections::HashMap;

use super::sri::hex32;

/// The tree listing's URL for folder URL `base` (absolute, ending in `/`), when `base` has the
/// Hub's layout; `None` otherwise.
pub fn tree_url(base: &str) -> Option<String> {
    if base.contains(['?', '#']) {
        return None;
    }
    let (scheme, rest) = base.split_once("://")?;
    let (host, path) = rest.split_once('/')?;
    if host.is_empty() || !matches!(scheme, "http" | "https") {
        return None;
    }
    let segments: Vec<&str> = path.strip_suffix('/')?.split('/').collect();
    // The repository id is one segment (`gpt2`) or two (`org/name`); `datasets/…`, `spaces/…`
    // and `api/…` are not model folders.
    let at = (1..=2).find(|&i| segments.get(i) == Some(&"resolve"))?;
    let repo = &segments[..at];
    let revision = segments.get(at + 1)?;
    let sub = &segments[at + 2..];
    let plain = |s: &&str| !s.is_empty() && *s != "." && *s != "..";
    if !repo.iter().all(plain) || !plain(revision) || !sub.iter().all(plain) {
        return None;
    }
    if matches!(repo[0], "datasets" | "spaces" | "api") {
        return None;
    }
    let mut url = format!("{scheme}://{host}/api/models/{}/tree/{revision}", repo.join("/"));
    for s in sub {
        url.push('/');
        url.push_str(s);
    }
    Some(url)
}

/// The subfolder part of `base`'s Hub layout (`"sub/"`, or `""`): the listing's paths start
/// with it.
pub fn subfolder(base: &str) -> String {
    let path = base.split_once("://").and_then(|(_, r)| r.split_once('/')).map_or("", |(_, p)| p);
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    match (1..=2).find(|&i| segments.get(i) == Some(&"resolve")) {
        Some(at) if segments.len() > at + 2 => format!("{}/", segments[at + 2..].join("/")),
        _ => String::new(),
    }
}

/// The SHA-256 of each LFS file of a tree listing (`json`), by its name in the folder (the
/// listing's `path` less `subfolder`). Entries that are not LFS files, lie in deeper folders or
/// carry no 64-digit `lfs.oid` are left out; a listing that is not a JSON array is an error
/// (the reason, for a warning).
pub fn lfs_digests(json: &[u8], subfolder: &str) -> Result<HashMap<String, [u8; 32]>, String> {
    Ok(files(json, subfolder)?.into_iter().filter_map(|(name, oid)| Some((name, hex32(&oid?)?))).collect())
}

/// The names of the files a tree listing (`json`) has in `subfolder` itself (not deeper), in
/// its order: where a load chooses among them (a GGUF file by its quantization type).
pub fn file_names(json: &[u8], subfolder: &str) -> Result<Vec<String>, String> {
    Ok(files(json, subfolder)?.into_iter().map(|(name, _)| name).collect())
}

/// Each file entry of a listing in `subfolder` itself: its name there and its `lfs.oid`.
fn files(json: &[u8], subfolder: &str) -> Result<Vec<(String, Option<String>)>, String> {
    #[derive(serde::Deserialize)]
    struct Lfs {
        oid: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        #[serde(rename = "type")]
        kind: Option<String>,
        path: Option<String>,
        lfs: Option<Lfs>,
    }
    let entries: Vec<serde_json::Value> = serde_json::from_slice(json)
        .map_err(|e| format!("the listing is not a JSON array of entries: {e}"))?;
    let mut out = Vec::new();
    for value in entries {
        // An entry of another shape is skipped, not fatal: the listing is advisory.
        let Ok(entry) = serde_json::from_value::<Entry>(value) else { continue };
        if entry.kind.as_deref().is_some_and(|k| k != "file") {
            continue;
        }
        let Some(path) = entry.path else { continue };
        let Some(name) = path.strip_prefix(subfolder).filter(|n| !n.is_empty() && !n.contains('/')) else {
            continue;
        };
        out.push((name.to_string(), entry.lfs.and_then(|l| l.oid)));
    }
    Ok(out)
}
