//! A sharded checkpoint: `model.safetensors.index.json`, then the shards. Input format: the
//! index JSON up to the first `\0` byte, then the shard files separated by [`SEP`]; the i-th
//! file is named after the i-th name of [`shard_names`] (extra files get made-up names, missing
//! ones are absent). Runs [`parse_index`], [`shard_names`], then [`Checkpoint::from_bytes`]
//! with the index and, when it opens, [`Checkpoint::weights`].
//! Checks: no panic; every accepted shard name is a plain file name.

#![no_main]

use libfuzzer_sys::fuzz_target;
use webmamba::Checkpoint;
use webmamba::model::{parse_index, shard_names};

/// The sharded fixture's config (state-spaces format): bounds every size.
const CONFIG: &[u8] = include_bytes!("../../tests/fixtures/original-sharded/config.json");
/// Separates the shard files in the input.
const SEP: &[u8] = b"--SHARD--";

fn split<'a>(mut rest: &'a [u8], sep: &[u8]) -> Vec<&'a [u8]> {
    let mut parts = Vec::new();
    while let Some(i) = rest.windows(sep.len()).position(|w| w == sep) {
        parts.push(&rest[..i]);
        rest = &rest[i + sep.len()..];
    }
    parts.push(rest);
    parts
}

fuzz_target!(|data: &[u8]| {
    let (index, shards) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], split(&data[i + 1..], SEP)),
        None => (data, Vec::new()),
    };
    let names = match parse_index(index) {
        Ok(map) => {
            let names = shard_names(&map);
            for n in &names {
                assert!(!n.is_empty() && !n.contains(['/', '\\']) && n != "..", "shard name {n:?}");
            }
            names
        }
        Err(_) => Vec::new(),
    };
    let files: Vec<(String, Vec<u8>)> = shards
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            let name = names.get(i).cloned().unwrap_or_else(|| format!("extra-{i}.safetensors"));
            (name, bytes.to_vec())
        })
        .collect();
    if let Ok(checkpoint) = Checkpoint::from_bytes(CONFIG, files, Some(index), None) {
        let _ = checkpoint.weights();
    }
});
