//! [`Pages`]: the key/value pages of hybrid checkpoints — which exist, under which keys, who
//! references them (the engines hold the rows: `gpu_model/kv_pages.rs`, `engine/cpu_pages.rs`;
//! see ARCHITECTURE.md, "Hybrid checkpoints: shared key/value pages").
//!
//! A page is the keys and values of every attention layer for one whole block of positions
//! (`[b·B, (b+1)·B)`, B the cache's block size). Those rows depend on every token up to the
//! block's end and on nothing after it, so the chained key after that block
//! ([`super::keys::chain`]'s element b + 1) names the page exactly: two histories that pass
//! through the same block share its page, in whichever session or checkpoint they are. A page
//! is written once, when it is made, and never changed (immutable); it is counted by reference
//! — each checkpoint whose history passes through it holds one — and freed when the last
//! reference goes. Bytes are charged once per page, however many checkpoints share it.
//!
//! Page ids are engine page-slot ids (where the rows live: GPU buffers or host vectors),
//! handed to [`Pages::new`] like the state cache's slots.

use std::collections::HashMap;

use super::keys::Key;

/// Engine page-slot id.
pub(crate) type PageId = usize;

#[derive(Clone, Debug)]
struct Page {
    key: Key,
    refs: usize,
}

/// Which pages exist, under which keys, and who still needs them. Bookkeeping only.
#[derive(Debug)]
pub(crate) struct Pages {
    page_bytes: u64,
    by_key: HashMap<Key, PageId>,
    /// Indexed by page id: the page held there, if any.
    pages: Vec<Option<Page>>,
    free: Vec<PageId>,
}

/// References counted as dropped by [`Pages::tally_drop`] (none is really dropped).
#[derive(Debug, Default)]
pub(crate) struct Tally(HashMap<PageId, usize>);

/// A reference taken by [`Pages::acquire`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Acquired {
    /// Where the page lives.
    pub(crate) id: PageId,
    /// Whether it was just made: its rows must be written before anything reads them (a
    /// failed write releases the reference, which frees it).
    pub(crate) fresh: bool,
}

impl Pages {
    /// Bookkeeping over the page slots `ids`, each holding `page_bytes`.
    pub(crate) fn new(page_bytes: u64, ids: Vec<PageId>) -> Self {
        let len = ids.iter().max().map_or(0, |m| m + 1);
        Self {
            page_bytes,
            by_key: HashMap::new(),
            pages: vec![None; len],
            free: ids.into_iter().rev().collect(),
        }
    }

    /// Bytes of one page.
    pub(crate) fn page_bytes(&self) -> u64 {
        self.page_bytes
    }

    /// Pages alive (referenced by something): the slots holding one, however they are named.
    pub(crate) fn len(&self) -> usize {
        self.pages.iter().filter(|p| p.is_some()).count()
    }

    /// Bytes of the pages alive: each counted once, however many references it has.
    pub(crate) fn bytes(&self) -> u64 {
        self.len() as u64 * self.page_bytes
    }

    /// Page slots not holding a page.
    pub(crate) fn free_slots(&self) -> usize {
        self.free.len()
    }

    /// The page named `key`, if it exists.
    pub(crate) fn find(&self, key: &Key) -> Option<PageId> {
        self.by_key.get(key).copied()
    }

    /// References held on page `id` (0: no page there).
    pub(crate) fn refs(&self, id: PageId) -> usize {
        self.pages.get(id).and_then(Option::as_ref).map_or(0, |p| p.refs)
    }

    /// A reference to the page named `key`: the existing one, or a fresh one in a free slot.
    /// `None` when it does not exist and no slot is free.
    pub(crate) fn acquire(&mut self, key: &Key) -> Option<Acquired> {
        if let Some(id) = self.find(key) {
            self.retain(id);
            return Some(Acquired { id, fresh: false });
        }
        let id = self.free.pop()?;
        self.pages[id] = Some(Page { key: *key, refs: 1 });
        self.by_key.insert(*key, id);
        Some(Acquired { id, fresh: true })
    }

    /// One more reference to page `id` (a checkpoint taking over a chain it extends).
    pub(crate) fn retain(&mut self, id: PageId) {
        if let Some(p) = self.pages.get_mut(id).and_then(Option::as_mut) {
            p.refs += 1;
        }
    }

    /// Drops a reference to page `id`; returns whether that freed it.
    pub(crate) fn release(&mut self, id: PageId) -> bool {
        let Some(slot) = self.pages.get_mut(id) else { return false };
        let Some(p) = slot.as_mut() else { return false };
        p.refs -= 1;
        if p.refs > 0 {
            return false;
        }
        let key = p.key;
        *slot = None;
        self.by_key.remove(&key);
        self.free.push(id);
        true
    }

    /// Counts one reference to each of `ids` (a page may appear more than once) as dropped in
    /// `tally`, without dropping it; returns how many pages that frees — those whose last
    /// reference it counts. Over a run of checkpoints: what evicting them all would give back
    /// (a page shared with a survivor frees nothing).
    pub(crate) fn tally_drop(&self, tally: &mut Tally, ids: &[PageId]) -> usize {
        let mut freed = 0;
        for &id in ids {
            let n = tally.0.entry(id).or_default();
            *n += 1;
            freed += usize::from(*n == self.refs(id));
        }
        freed
    }

    /// More page slots (the engine made more room).
    #[cfg(test)]
    pub(crate) fn add_slots(&mut self, ids: impl IntoIterator<Item = PageId>) {
        for id in ids {
            if id >= self.pages.len() {
                self.pages.resize(id + 1, None);
            }
            if self.pages[id].is_none() && !self.free.contains(&id) {
                self.free.push(id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::keys;

    fn chain(tokens: &[u32]) -> Vec<Key> {
        keys::chain(tokens, 4)
    }

    #[test]
    fn equal_histories_share_their_pages_and_bytes_count_once() {
        let mut pages = Pages::new(100, (0..8).collect());
        let a = chain(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        // Three checkpoints along one history: after 1, 2 and 3 blocks.
        let mut held = Vec::new();
        for b in 1..=3 {
            for key in &a[1..=b] {
                held.push(pages.acquire(key).unwrap());
            }
        }
        let fresh: Vec<_> = held.iter().filter(|a| a.fresh).map(|a| a.id).collect();
        assert_eq!(fresh.len(), 3, "each block's page is made once: {held:?}");
        assert_eq!((pages.len(), pages.bytes()), (3, 300));
        assert_eq!(pages.refs(held[0].id), 3, "block 0's page is in all three checkpoints");
        // Another history sharing the first block only.
        let b = chain(&[1, 2, 3, 4, 9, 9, 9, 9]);
        assert_eq!(pages.acquire(&b[1]), Some(Acquired { id: held[0].id, fresh: false }));
        assert!(pages.acquire(&b[2]).unwrap().fresh, "a different second block is a different page");
        assert_eq!((pages.len(), pages.bytes()), (4, 400));
    }

    #[test]
    fn a_page_is_freed_with_its_last_reference_and_its_slot_reused() {
        let mut pages = Pages::new(10, vec![0, 1]);
        let keys = chain(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 9]);
        let p = pages.acquire(&keys[1]).unwrap();
        pages.retain(p.id);
        let q = pages.acquire(&keys[2]).unwrap();
        assert_eq!(pages.acquire(&keys[3]), None, "no free slot");
        let mut tally = Tally::default();
        assert_eq!(pages.tally_drop(&mut tally, &[p.id]), 0, "one of two references frees nothing");
        assert_eq!(pages.tally_drop(&mut tally, &[p.id, q.id]), 2, "the second and q's only one do");
        assert_eq!(pages.tally_drop(&mut Tally::default(), &[p.id, p.id, q.id]), 2, "the same at once");
        assert_eq!(pages.len(), 2, "tally_drop drops nothing");
        assert!(!pages.release(p.id));
        assert!(pages.release(p.id));
        assert_eq!((pages.find(&keys[1]), pages.bytes()), (None, 10));
        let r = pages.acquire(&keys[3]).unwrap();
        assert_eq!(r, Acquired { id: p.id, fresh: true }, "the freed slot holds the new page");
        assert!(!pages.release(7), "no such slot");
    }

    #[test]
    fn namespaces_and_positions_name_different_pages() {
        let mut pages = Pages::new(1, (0..4).collect());
        let tokens = [5, 5, 5, 5, 5, 5, 5, 5];
        let shared = chain(&tokens);
        let private = keys::chain_from(keys::private_root(4, &[7; 32]), &tokens, 4);
        // The same tokens in block 0 and block 1 are different pages (different prefixes),
        // and an imported session's pages are its own.
        let ids: Vec<_> = [&shared[1], &shared[2], &private[1]].map(|k| pages.acquire(k).unwrap()).into();
        assert!(ids.iter().all(|a| a.fresh), "{ids:?}");
        pages.add_slots(4..6);
        assert_eq!(pages.free_slots(), 3);
    }
}
