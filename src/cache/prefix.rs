//! [`Prefix`]: a token sequence together with the chained keys of its whole blocks, so the two
//! cannot disagree: the cache builds it ([`crate::cache::StateCache::prefix`]) and every lookup
//! and insert takes it whole.

use crate::cache::keys::{self, Key};

/// Tokens and `keys::chain_from(root, tokens, block)`, kept in step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Prefix {
    tokens: Vec<u32>,
    /// Element b covers `tokens[..b · block]`; element 0 is the root (never empty).
    keys: Vec<Key>,
    block: usize,
}

impl Prefix {
    /// `tokens` chained from `root` in blocks of `block` (≥ 1) tokens.
    pub(crate) fn new(root: Key, tokens: Vec<u32>, block: usize) -> Self {
        let keys = keys::chain_from(root, &tokens, block);
        Self { tokens, keys, block }
    }

    /// The tokens.
    pub(crate) fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// The chain keys: element b covers the first b whole blocks (element 0: the root).
    pub(crate) fn keys(&self) -> &[Key] {
        &self.keys
    }

    /// Tokens in it.
    pub(crate) fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether it has no tokens.
    pub(crate) fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Appends a token, chaining the next key when it completes a block; returns whether it did.
    pub(crate) fn push(&mut self, token: u32) -> bool {
        self.tokens.push(token);
        if !self.tokens.len().is_multiple_of(self.block) {
            return false;
        }
        let parent = self.keys[self.keys.len() - 1];
        self.keys.push(keys::child(&parent, &self.tokens[self.tokens.len() - self.block..]));
        true
    }

    /// The number of whole blocks and the key covering them.
    pub(crate) fn whole_blocks(&self) -> (usize, Key) {
        let b = self.keys.len() - 1;
        (b, self.keys[b])
    }

    /// The tokens after the last whole block.
    pub(crate) fn tail(&self) -> &[u32] {
        &self.tokens[(self.keys.len() - 1) * self.block..]
    }
}
