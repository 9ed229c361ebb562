//! [`Hold`]: what one call holds in the cache while it runs — the entries it resumes from or
//! reuses (pinned, so making room cannot evict them) and the slots it reserved for new
//! checkpoints ([`Reservation`]). Dropping the hold gives all of it back: an error anywhere in
//! the call, a `?` included, releases what the call took; a reservation filled by an insert is
//! the call's result and stays.

use crate::cache::keys::Key;
use crate::cache::pages::Acquired;
use crate::cache::{EntryId, Prefix, StateCache};
use crate::error::Result;

/// A slot reserved for one new checkpoint (a block or a prompt-end). Filled by
/// [`Hold::insert_block`] / [`Hold::insert_end`]; released with its hold otherwise.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Reservation {
    slot: usize,
    prompt_end: bool,
    /// Tokens of history of the state it will hold.
    len: usize,
    /// Pages mode: the pages of its whole blocks, in order.
    pages: Vec<Acquired>,
}

impl Reservation {
    /// The engine slot to write the state into.
    pub(crate) fn slot(&self) -> usize {
        self.slot
    }

    /// Pages mode: the page of each whole block before the state (element b: positions
    /// `b·B..(b+1)·B`); those `fresh` must be written before the entry is inserted.
    #[cfg(test)]
    pub(crate) fn pages(&self) -> &[Acquired] {
        &self.pages
    }

    /// Pages mode: `(page, b)` for each page it made, block b's: what must be written (from
    /// the live caches: `Engine::save_pages`) before it is inserted.
    pub(crate) fn fresh_pages(&self) -> Vec<(usize, usize)> {
        self.pages.iter().enumerate().filter(|(_, a)| a.fresh).map(|(b, a)| (a.id, b)).collect()
    }
}

/// A call's pins and reservations; see the module documentation.
pub(crate) struct Hold<'a> {
    cache: &'a mut StateCache,
    pins: Vec<EntryId>,
    /// (slot, prompt_end, tokens, pages) of every reservation not yet filled.
    open: Vec<(usize, bool, usize, Vec<Acquired>)>,
}

impl<'a> Hold<'a> {
    pub(super) fn new(cache: &'a mut StateCache) -> Self {
        Self { cache, pins: Vec::new(), open: Vec::new() }
    }

    /// The cache (lookups).
    pub(crate) fn cache(&mut self) -> &mut StateCache {
        self.cache
    }

    /// Keeps entry `id` from eviction until the hold ends.
    pub(crate) fn pin(&mut self, id: EntryId) {
        self.cache.pin(id, true);
        self.pins.push(id);
    }

    /// A slot for a new entry holding the state after the first `len` tokens of a prefix with
    /// chain keys `keys` ([`Prefix::keys`]; pages mode references its blocks' pages), evicting
    /// least recently used unpinned entries to make room: a block is optional (`Ok(None)`
    /// without room), a prompt-end is not (`CacheBudget`).
    pub(crate) fn reserve(
        &mut self,
        prompt_end: bool,
        len: usize,
        keys: &[Key],
    ) -> Result<Option<Reservation>> {
        let got = self.cache.reserve(prompt_end, len, keys)?;
        Ok(got.map(|(slot, pages)| {
            self.open.push((slot, prompt_end, len, pages.clone()));
            Reservation { slot, prompt_end, len, pages }
        }))
    }

    /// Records the block entry for the state after `len` tokens (chain key `key`) written
    /// into `r`'s slot.
    pub(crate) fn insert_block(&mut self, r: Reservation, key: Key, len: usize) -> EntryId {
        debug_assert!(!r.prompt_end && r.len == len, "a block's reservation holds it");
        self.filled(&r);
        self.cache.insert_block(key, len, r.slot, r.pages.iter().map(|a| a.id).collect())
    }

    /// Records the prompt-end entry for `prefix` written into `r`'s slot, with its logits.
    pub(crate) fn insert_end(&mut self, r: Reservation, prefix: &Prefix, logits: Vec<f32>) -> EntryId {
        debug_assert!(r.prompt_end && r.len == prefix.len(), "a prompt-end's reservation holds it");
        self.filled(&r);
        self.cache.insert_end(prefix, r.slot, logits, r.pages.iter().map(|a| a.id).collect())
    }

    fn filled(&mut self, r: &Reservation) {
        self.open.retain(|(slot, ..)| *slot != r.slot);
        self.cache.pages_filled(&r.pages);
    }
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        for (slot, prompt_end, len, pages) in std::mem::take(&mut self.open) {
            self.cache.release(slot, prompt_end, len, &pages);
        }
        for &id in &self.pins {
            self.cache.pin(id, false);
        }
    }
}
