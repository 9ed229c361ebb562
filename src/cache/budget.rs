//! The byte budget: what an entry costs, and making room for a new one — evicting least
//! recently used unpinned entries, weighed by what their eviction really gives back (in pages
//! mode a page shared with a survivor frees nothing).

use super::keys::Key;
use super::pages::{Acquired, PageId, Pages, Tally};
use super::{Entry, EntryId, Kind, StateCache};
use crate::error::{Error, Result};

impl StateCache {
    /// What an entry's slot costs: its state with the key/value rows it keeps (a hybrid's: all
    /// `len` of them, or in pages mode those after its whole pages) and a prompt-end's logits.
    /// Pages are counted apart, once each.
    pub(super) fn cost(&self, prompt_end: bool, len: usize) -> u64 {
        let rows = if self.pages.is_some() { len % self.config.block_size } else { len };
        let state = self.slot_bytes.saturating_add(self.per_token_bytes.saturating_mul(rows as u64));
        state + if prompt_end { self.logits_bytes } else { 0 }
    }

    pub(super) fn entry_cost(&self, e: &Entry) -> u64 {
        self.cost(matches!(e.kind, Kind::PromptEnd { .. }), e.len)
    }

    /// Bytes committed: entries, open reservations and every page alive.
    fn committed(&self) -> u64 {
        self.bytes_used + self.bytes_reserved + self.pages.as_ref().map_or(0, Pages::bytes)
    }

    /// Makes room for and returns a slot for a new entry holding the state after `len` tokens
    /// of a prefix whose chain keys are `keys` (element b: after b blocks), evicting least
    /// recently used unpinned entries; in pages mode also a reference to each page of its
    /// whole blocks, in order — existing pages shared, missing ones made (`fresh`: to be
    /// written). A block entry is optional: `Ok(None)` when no room can be made. A prompt-end
    /// is not: [`Error::CacheBudget`] then. Nothing is evicted or kept on failure.
    pub(super) fn reserve(
        &mut self,
        prompt_end: bool,
        len: usize,
        keys: &[Key],
    ) -> Result<Option<(usize, Vec<Acquired>)>> {
        let wanted: &[Key] = match self.pages {
            Some(_) => keys.get(1..=len / self.config.block_size).ok_or_else(|| {
                Error::Internal(format!(
                    "state cache: {} chain keys for a state after {len} tokens",
                    keys.len()
                ))
            })?,
            None => &[],
        };
        // Pages that exist are referenced first, so that making room cannot free them.
        let mut got: Vec<Option<Acquired>> = Vec::with_capacity(wanted.len());
        if let Some(pages) = self.pages.as_mut() {
            for key in wanted {
                got.push(pages.find(key).map(|id| {
                    pages.retain(id);
                    Acquired { id, fresh: false }
                }));
            }
        }
        let missing = got.iter().filter(|a| a.is_none()).count();
        let page_bytes = self.pages.as_ref().map_or(0, Pages::page_bytes);
        let cost = self.cost(prompt_end, len) + missing as u64 * page_bytes;
        let budget = self.config.budget_bytes;
        let mut victims: Vec<(u64, EntryId)> = self
            .entries
            .iter()
            .enumerate()
            .filter_map(|(id, e)| e.as_ref().filter(|e| e.pins == 0).map(|e| (e.last_used, id)))
            .collect();
        victims.sort_unstable();
        // How many victims the new entry needs (bytes, a free slot, free page slots), counted
        // before evicting anything.
        let (mut bytes, mut slots, mut needed) = (self.committed(), self.free_slots.len(), 0);
        let mut free_pages = self.pages.as_ref().map_or(0, Pages::free_slots);
        let mut tally = Tally::default();
        while bytes + cost > budget || slots == 0 || free_pages < missing {
            let Some(&(_, id)) = victims.get(needed) else {
                let held = self.committed();
                self.release_pages(got.iter().flatten().map(|a| a.id));
                if !prompt_end {
                    return Ok(None);
                }
                return Err(Error::CacheBudget {
                    needed: cost,
                    budget,
                    reason: format!(
                        "{held} bytes are held by checkpoints pinned by live sessions (their latest prompt ends), \
                         the key/value pages they use, or reservations of this call"
                    ),
                });
            };
            let e = self.entries[id]
                .as_ref()
                .ok_or_else(|| Error::Internal("state cache: a victim is gone".into()))?;
            bytes -= self.entry_cost(e);
            if let Some(pages) = &self.pages {
                let freed = pages.tally_drop(&mut tally, &e.pages);
                (bytes, free_pages) = (bytes - freed as u64 * page_bytes, free_pages + freed);
            }
            slots += 1;
            needed += 1;
        }
        for &(_, id) in &victims[..needed] {
            self.remove(id);
            self.evictions += 1;
        }
        let slot = self
            .free_slots
            .pop()
            .ok_or_else(|| Error::Internal("state cache: no free slot after making room".into()))?;
        let mut acquired = Vec::with_capacity(got.len());
        for (a, key) in got.into_iter().zip(wanted) {
            let a =
                match a {
                    Some(a) => a,
                    None => self.pages.as_mut().and_then(|p| p.acquire(key)).ok_or_else(|| {
                        Error::Internal("state cache: no free page after making room".into())
                    })?,
                };
            acquired.push(a);
        }
        self.bytes_reserved += self.cost(prompt_end, len);
        self.pages_reserved += missing as u64 * page_bytes;
        Ok(Some((slot, acquired)))
    }

    /// Gives back a slot and pages from [`StateCache::reserve`] that ended up unused.
    pub(super) fn release(&mut self, slot: usize, prompt_end: bool, len: usize, pages: &[Acquired]) {
        self.bytes_reserved -= self.cost(prompt_end, len);
        self.free_slots.push(slot);
        self.pages_filled(pages);
        self.release_pages(pages.iter().map(|a| a.id));
    }

    /// The fresh pages of a reservation now belong to an entry (or are given back): no longer
    /// counted as reserved.
    pub(super) fn pages_filled(&mut self, pages: &[Acquired]) {
        let page_bytes = self.pages.as_ref().map_or(0, Pages::page_bytes);
        self.pages_reserved -= pages.iter().filter(|a| a.fresh).count() as u64 * page_bytes;
    }

    /// Drops one reference to each of `ids` (a page goes with its last one).
    pub(super) fn release_pages(&mut self, ids: impl IntoIterator<Item = PageId>) {
        if let Some(p) = self.pages.as_mut() {
            for id in ids {
                p.release(id);
            }
        }
    }
}
