//! Chained block keys: the key of block i covers the key of block i−1 and the block's tokens, so
//! one key names a whole prefix and equal prefixes get equal keys in every session (as vLLM's
//! block hashes do). blake3 makes collisions a non-issue.

/// A 32-byte blake3 digest.
pub(crate) type Key = [u8; 32];

/// The key of the empty prefix for block size `block`.
pub(crate) fn root(block: usize) -> Key {
    let mut h = blake3::Hasher::new();
    h.update(b"webmamba/prefix/v1");
    h.update(&(block as u64).to_le_bytes());
    *h.finalize().as_bytes()
}

/// The key after `tokens` (one block) following `parent`.
pub(crate) fn child(parent: &Key, tokens: &[u32]) -> Key {
    let mut h = blake3::Hasher::new();
    h.update(parent);
    for t in tokens {
        h.update(&t.to_le_bytes());
    }
    *h.finalize().as_bytes()
}

/// The root of a private namespace: keys chained from it match no other namespace's, so the
/// checkpoints of a session with an imported (unverified) state are found by that session only.
pub(crate) fn private_root(block: usize, salt: &Key) -> Key {
    let mut h = blake3::Hasher::new();
    h.update(b"webmamba/private/v1");
    h.update(&root(block));
    h.update(salt);
    *h.finalize().as_bytes()
}

/// Keys of every whole-block prefix of `tokens`: element b covers `tokens[..b * block]`
/// (element 0 is the root).
pub(crate) fn chain(tokens: &[u32], block: usize) -> Vec<Key> {
    chain_from(root(block), tokens, block)
}

/// Like [`chain`], from the root `root` (the shared one or a [`private_root`]).
pub(crate) fn chain_from(root: Key, tokens: &[u32], block: usize) -> Vec<Key> {
    let mut keys = Vec::with_capacity(tokens.len() / block + 1);
    keys.push(root);
    for chunk in tokens.chunks_exact(block) {
        let next = child(keys.last().expect("root"), chunk);
        keys.push(next);
    }
    keys
}

/// A key for an exact token sequence (any length): the chain key of its whole blocks extended
/// by its tail. Used as the "token prefix hash" of exported states.
pub(crate) fn exact(tokens: &[u32], block: usize) -> Key {
    let keys = chain(tokens, block);
    let whole = (keys.len() - 1) * block;
    let mut h = blake3::Hasher::new();
    h.update(b"exact");
    h.update(keys.last().expect("root"));
    h.update(&(tokens.len() as u64).to_le_bytes());
    for t in &tokens[whole..] {
        h.update(&t.to_le_bytes());
    }
    *h.finalize().as_bytes()
}
