//! [`StateCache`]: which recurrent states are kept, under which keys, and which to evict. It is
//! bookkeeping only: the states themselves live in the engine's checkpoint slots (GPU buffers
//! for the GPU engine), addressed by slot id, so nothing here touches the device.
//!
//! Two kinds of entries:
//! - **block** entries: the state after `b · B` tokens (B = `block_size`), keyed by the chained
//!   key of those blocks; kept at every boundary (dense) or every k-th (sparse);
//! - **prompt-end** entries: the state after the last token of a prompt (any length) plus that
//!   position's logits, keyed by the chain key of its whole blocks and its tail tokens. Always
//!   kept (the vLLM v0.31.0rc2 fix); an identical resend hits one and prefills nothing.
//!
//! Eviction is LRU over entries no session pins; each live session pins its latest prompt-end.
//! Bytes in use (state slot + stored logits per entry) never exceed the budget.
//!
//! Callers pass a [`Prefix`] (tokens with their chain keys, made by [`StateCache::prefix`]); a
//! call pins and reserves through a [`Hold`] ([`StateCache::hold`]), which gives back whatever
//! the call did not turn into entries when it is dropped.

mod budget;
mod config;
mod hold;
pub(crate) mod keys;
#[cfg(test)]
mod page_tests;
pub(crate) mod pages;
mod prefix;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

use crate::error::{Error, Result};
pub use config::{CacheConfig, CacheStats, Retention};
pub(crate) use hold::Hold;
#[cfg(test)]
use hold::Reservation;
use keys::Key;
use pages::{PageId, Pages};
pub(crate) use prefix::Prefix;

/// Entry id (index into the entry table).
pub(crate) type EntryId = usize;

/// What an entry holds.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Kind {
    /// A block boundary state.
    Block,
    /// A prompt-end state: `tail` are the tokens after the last whole block, `logits` the
    /// logits at the last position.
    PromptEnd { tail: Vec<u32>, logits: Vec<f32> },
}

/// One cached state.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    /// Tokens of the prefix this state follows.
    pub(crate) len: usize,
    /// Engine slot holding the state.
    pub(crate) slot: usize,
    /// Chain key of the whole blocks of the prefix.
    pub(crate) key: Key,
    /// Block or prompt-end.
    pub(crate) kind: Kind,
    /// The key/value pages of its whole blocks, in order (a hybrid's, in pages mode
    /// ([`StateCache::use_pages`]); empty otherwise).
    pub(crate) pages: Vec<PageId>,
    last_used: u64,
    pins: usize,
}

impl Entry {
    /// Whether it is a prompt-end (with logits).
    pub(crate) fn logits(&self) -> Option<&[f32]> {
        match &self.kind {
            Kind::PromptEnd { logits, .. } => Some(logits),
            Kind::Block => None,
        }
    }
}

/// The cache's bookkeeping. See the module documentation.
pub(crate) struct StateCache {
    config: CacheConfig,
    slot_bytes: u64,
    logits_bytes: u64,
    /// Bytes a state grows by per token of history kept in its slot (a hybrid's attention
    /// caches: all of them, or in pages mode those after its whole pages; 0 for Mamba).
    per_token_bytes: u64,
    /// Pages mode: the key/value pages entries share ([`StateCache::use_pages`]).
    pages: Option<Pages>,
    /// Bytes of pages made for reservations not yet filled.
    pages_reserved: u64,
    entries: Vec<Option<Entry>>,
    blocks: HashMap<Key, EntryId>,
    ends: HashMap<Key, Vec<EntryId>>,
    free_slots: Vec<usize>,
    bytes_used: u64,
    /// Bytes of slots handed out by `reserve` and not yet inserted or released.
    bytes_reserved: u64,
    tick: u64,
    evictions: u64,
}

impl StateCache {
    /// A cache over `slots` (engine slot ids, each `slot_bytes`); prompt-end logits cost
    /// `logits_bytes`. The budget must hold two prompt-ends: a session's latest stays pinned
    /// while its next one is stored, so with room for one only a second turn would fail.
    pub(crate) fn new(
        config: CacheConfig,
        slots: Vec<usize>,
        slot_bytes: u64,
        logits_bytes: u64,
    ) -> Result<Self> {
        if config.block_size == 0 || matches!(config.retention, Retention::Sparse(0)) {
            return Err(Error::InvalidInput("block size and sparse interval must be at least 1".into()));
        }
        let minimum = 2 * (slot_bytes + logits_bytes);
        if config.budget_bytes < minimum || slots.len() < 2 {
            return Err(Error::CacheBudget {
                needed: minimum,
                budget: config.budget_bytes,
                reason: "the budget must hold two prompt-end checkpoints (a session's latest stays kept \
                         while its next one is stored)"
                    .into(),
            });
        }
        Ok(Self {
            config,
            slot_bytes,
            logits_bytes,
            per_token_bytes: 0,
            pages: None,
            pages_reserved: 0,
            entries: Vec::new(),
            blocks: HashMap::new(),
            ends: HashMap::new(),
            free_slots: slots.into_iter().rev().collect(),
            bytes_used: 0,
            bytes_reserved: 0,
            tick: 0,
            evictions: 0,
        })
    }

    /// Charges every entry `bytes` more per token of its history: the attention caches of a
    /// hybrid model's states grow with the position they were taken at.
    pub(crate) fn set_per_token_bytes(&mut self, bytes: u64) {
        self.per_token_bytes = bytes;
    }

    /// Pages mode: a hybrid's checkpoints keep in their slots the state and the rows of their
    /// partial last block only, and reference the pages of their whole blocks, shared with
    /// every checkpoint whose history passes through them ([`pages`]). Page bytes count once,
    /// against the same budget.
    pub(crate) fn use_pages(&mut self, pages: Pages) {
        self.pages = Some(pages);
    }

    /// The pages (pages mode).
    #[cfg(test)]
    pub(crate) fn pages(&self) -> Option<&Pages> {
        self.pages.as_ref()
    }

    /// Slots a budget can use: no more than fit in it as bare states.
    pub(crate) fn slots_for(config: &CacheConfig, slot_bytes: u64) -> usize {
        (config.budget_bytes / slot_bytes.max(1)) as usize
    }

    /// The settings.
    pub(crate) fn config(&self) -> &CacheConfig {
        &self.config
    }

    /// `tokens` with their chain keys, in the shared namespace or (with `salt`) a private one
    /// ([`keys::private_root`]).
    pub(crate) fn prefix(&self, tokens: Vec<u32>, salt: Option<&Key>) -> Prefix {
        let block = self.config.block_size;
        let root = salt.map_or_else(|| keys::root(block), |salt| keys::private_root(block, salt));
        Prefix::new(root, tokens, block)
    }

    /// A call's hold on the cache: its pins and reservations end with it.
    pub(crate) fn hold(&mut self) -> Hold<'_> {
        Hold::new(self)
    }

    /// Moves a session's lasting pin from its previous latest prompt-end to `new`.
    pub(crate) fn repin(&mut self, old: Option<EntryId>, new: Option<EntryId>) {
        if let Some(new) = new {
            self.pin(new, true);
        }
        if let Some(old) = old {
            self.pin(old, false);
        }
    }

    /// Counters.
    pub(crate) fn stats(&self) -> CacheStats {
        let page_bytes = self.pages.as_ref().map_or(0, Pages::bytes);
        CacheStats {
            entries: self.entries.iter().flatten().count(),
            bytes_used: self.bytes_used + page_bytes - self.pages_reserved,
            budget_bytes: self.config.budget_bytes,
            evictions: self.evictions,
            bytes_reserved: self.bytes_reserved + self.pages_reserved,
            page_bytes: page_bytes - self.pages_reserved,
            pages: self.pages.as_ref().map_or(0, Pages::len),
        }
    }

    /// An entry.
    pub(crate) fn entry(&self, id: EntryId) -> Option<&Entry> {
        self.entries.get(id).and_then(Option::as_ref)
    }

    /// The longest cached state for a prefix of `tokens` usable to continue them: the state
    /// after m < n tokens, or after all n tokens only from a prompt-end (whose logits make
    /// recomputing the last position unnecessary).
    pub(crate) fn lookup(&mut self, prefix: &Prefix) -> Option<EntryId> {
        let (tokens, keys) = (prefix.tokens(), prefix.keys());
        let n = tokens.len();
        let block = self.config.block_size;
        for b in (0..keys.len()).rev() {
            let mut best: Option<(usize, EntryId)> = None;
            for (id, e) in self.ends_at(&keys[b]) {
                if let Kind::PromptEnd { tail, .. } = &e.kind
                    && e.len <= n
                    && tokens[b * block..e.len] == tail[..]
                    && best.is_none_or(|(len, _)| e.len > len)
                {
                    best = Some((e.len, id));
                }
            }
            if best.is_none() && b > 0 && b * block < n {
                best = self.blocks.get(&keys[b]).map(|&id| (b * block, id));
            }
            if let Some((_, id)) = best {
                self.touch(id);
                return Some(id);
            }
        }
        None
    }

    /// Whether the block boundary after block `b` of a prefix with chain key `key` should be
    /// captured: retention keeps it and it is not cached yet.
    pub(crate) fn wants_block(&self, b: usize, key: &Key) -> bool {
        b > 0 && self.config.retention.keeps(b) && !self.blocks.contains_key(key)
    }

    /// Whether a prompt-end for exactly `prefix` is cached; returns it.
    pub(crate) fn find_end(&self, prefix: &Prefix) -> Option<EntryId> {
        let (tail, key) = (prefix.tail(), prefix.whole_blocks().1);
        self.ends_at(&key)
            .find(|(_, e)| matches!(&e.kind, Kind::PromptEnd { tail: t, .. } if t[..] == *tail))
            .map(|(id, _)| id)
    }

    /// The prompt-end entries indexed under `key` (an index entry without its entry is skipped:
    /// the index and the table change together, so there is none).
    fn ends_at(&self, key: &Key) -> impl Iterator<Item = (EntryId, &Entry)> {
        self.ends.get(key).into_iter().flatten().filter_map(|&id| Some((id, self.entries.get(id)?.as_ref()?)))
    }

    /// Records a block entry for the state after `len` tokens (chain key `key`) in `slot`
    /// (reserved with `reserve(false)`) over `pages`.
    fn insert_block(&mut self, key: Key, len: usize, slot: usize, pages: Vec<PageId>) -> EntryId {
        let id = self.insert(Entry { len, slot, key, kind: Kind::Block, pages, last_used: 0, pins: 0 });
        self.blocks.insert(key, id);
        id
    }

    /// Records a prompt-end entry for `prefix` in `slot` (reserved with `reserve(true)`) with
    /// its logits, over `pages`.
    fn insert_end(&mut self, prefix: &Prefix, slot: usize, logits: Vec<f32>, pages: Vec<PageId>) -> EntryId {
        let (tail, key) = (prefix.tail().to_vec(), prefix.whole_blocks().1);
        let kind = Kind::PromptEnd { tail, logits };
        let id = self.insert(Entry { len: prefix.len(), slot, key, kind, pages, last_used: 0, pins: 0 });
        self.ends.entry(key).or_default().push(id);
        id
    }

    /// Inserts an entry into a slot from `reserve` (its reserved bytes become used bytes).
    fn insert(&mut self, mut e: Entry) -> EntryId {
        let cost = self.entry_cost(&e);
        self.bytes_reserved -= cost;
        self.bytes_used += cost;
        self.tick += 1;
        e.last_used = self.tick;
        match self.entries.iter().position(Option::is_none) {
            Some(id) => {
                self.entries[id] = Some(e);
                id
            }
            None => {
                self.entries.push(Some(e));
                self.entries.len() - 1
            }
        }
    }

    fn remove(&mut self, id: EntryId) {
        let Some(e) = self.entries.get_mut(id).and_then(Option::take) else { return };
        self.bytes_used -= self.entry_cost(&e);
        self.free_slots.push(e.slot);
        self.release_pages(e.pages.iter().copied());
        match e.kind {
            Kind::Block => {
                self.blocks.remove(&e.key);
            }
            Kind::PromptEnd { .. } => {
                if let Some(ids) = self.ends.get_mut(&e.key) {
                    ids.retain(|&x| x != id);
                    if ids.is_empty() {
                        self.ends.remove(&e.key);
                    }
                }
            }
        }
    }

    /// Marks an entry as just used.
    pub(crate) fn touch(&mut self, id: EntryId) {
        self.tick += 1;
        if let Some(e) = self.entries[id].as_mut() {
            e.last_used = self.tick;
        }
    }

    /// Pins (`+1`) or unpins (`−1`) an entry: pinned entries are never evicted.
    fn pin(&mut self, id: EntryId, on: bool) {
        if let Some(e) = self.entries[id].as_mut() {
            e.pins = if on { e.pins + 1 } else { e.pins.saturating_sub(1) };
        }
    }

    /// Whether an entry is pinned.
    #[cfg(test)]
    pub(crate) fn is_pinned(&self, id: EntryId) -> bool {
        self.entry(id).is_some_and(|e| e.pins > 0)
    }

    /// Pages mode: the blocks of `prefix` (block b: positions b·B..(b+1)·B) whose key/value
    /// page is cached, ascending.
    pub(crate) fn pages_on(&self, prefix: &Prefix) -> Vec<usize> {
        let Some(pages) = &self.pages else { return Vec::new() };
        let whole = prefix.len() / self.config.block_size;
        (0..whole).filter(|&b| prefix.keys().get(b + 1).is_some_and(|k| pages.find(k).is_some())).collect()
    }

    /// Positions of every cached state on the path of `prefix` (block boundaries and
    /// prompt-ends that are prefixes of it), ascending.
    pub(crate) fn positions_on(&self, prefix: &Prefix) -> Vec<usize> {
        let (tokens, keys) = (prefix.tokens(), prefix.keys());
        let block = self.config.block_size;
        let mut out = Vec::new();
        for (b, key) in keys.iter().enumerate() {
            if b > 0 && self.blocks.contains_key(key) {
                out.push(b * block);
            }
            for (_, e) in self.ends_at(key) {
                if let Kind::PromptEnd { tail, .. } = &e.kind
                    && e.len <= tokens.len()
                    && tokens[b * block..e.len] == tail[..]
                {
                    out.push(e.len);
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}
