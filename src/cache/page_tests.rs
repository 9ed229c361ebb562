//! Unit tests of pages mode ([`StateCache::use_pages`]): checkpoints of one history share its
//! key/value pages, bytes count each page once, eviction frees a page with its last
//! reference, and a dropped hold gives back the pages it made.

use super::*;

const SLOT: u64 = 100;
const LOGITS: u64 = 10;
const PAGE: u64 = 40;
const BLOCK: usize = 4;
/// Bytes a slot keeps per token after its whole blocks.
const ROW: u64 = 2;

fn cache(budget: u64, slots: usize, pages: usize) -> StateCache {
    let config = CacheConfig { block_size: BLOCK, retention: Retention::Dense, budget_bytes: budget };
    let mut c = StateCache::new(config, (0..slots).collect(), SLOT, LOGITS).unwrap();
    c.set_per_token_bytes(ROW); // in pages mode charged for the rows after the whole blocks only
    c.use_pages(Pages::new(PAGE, (0..pages).collect()));
    c
}

/// `n` tokens: a shared start, then (from `split` on) tokens of session `s`.
fn tokens(n: usize, split: usize, s: u32) -> Vec<u32> {
    (0..n as u32).map(|i| if (i as usize) < split { i + 1 } else { 1000 * (s + 1) + i }).collect()
}

/// Stores block entries and the prompt-end of `t` as a prefill would, pinning the prompt-end.
fn prefill(c: &mut StateCache, t: Vec<u32>) -> Result<EntryId> {
    let p = c.prefix(t, None);
    let mut hold = c.hold();
    let end = hold.reserve(true, p.len(), p.keys())?.expect("a prompt-end is never optional");
    assert_eq!(end.pages().len(), p.len() / BLOCK, "a page per whole block");
    for (b, key) in p.keys().iter().enumerate().filter(|(b, _)| b * BLOCK < p.len()) {
        if hold.cache().wants_block(b, key)
            && let Some(r) = hold.reserve(false, b * BLOCK, p.keys())?
        {
            let ids = |r: &Reservation| r.pages().iter().map(|a| a.id).collect::<Vec<_>>();
            assert_eq!(ids(&r), ids(&end)[..b], "a block's pages are its prompt-end's first ones");
            assert!(r.pages().iter().all(|a| !a.fresh), "made once, by the prompt-end's reservation");
            hold.insert_block(r, *key, b * BLOCK);
        }
    }
    let id = hold.insert_end(end, &p, vec![0.5; 3]);
    drop(hold);
    c.repin(None, Some(id));
    Ok(id)
}

/// The prompt-end entry of exactly `t`, if cached (entry ids are reused: look it up).
fn end_of(c: &StateCache, t: Vec<u32>) -> Option<EntryId> {
    c.find_end(&c.prefix(t, None))
}

fn pages(c: &StateCache) -> usize {
    c.pages().unwrap().len()
}

#[test]
fn sessions_over_one_prefix_hold_one_copy_of_its_pages() {
    let mut c = cache(100_000, 64, 64);
    for s in 0..8 {
        prefill(&mut c, tokens(18, 16, s)).unwrap(); // 16 shared tokens, 2 of its own
    }
    let stats = c.stats();
    assert_eq!((stats.pages, stats.page_bytes), (4, 4 * PAGE), "the shared 4 blocks: 4 pages, once");
    // 8 prompt-ends (tails of 2 tokens live in their slots) + blocks at 4, 8, 12, 16 (once).
    assert_eq!(stats.entries, 8 + 4);
    assert_eq!(stats.bytes_used, 8 * (SLOT + LOGITS + 2 * ROW) + 4 * SLOT + 4 * PAGE);
    let first = c.prefix(tokens(16, 16, 0), None);
    let ids: Vec<_> = (1..=4).map(|b| c.pages().unwrap().find(&first.keys()[b]).unwrap()).collect();
    // Block b's page: in every prompt-end and in the blocks at and after b + 1.
    let refs: Vec<_> = ids.iter().map(|&id| c.pages().unwrap().refs(id)).collect();
    assert_eq!(refs, vec![8 + 4, 8 + 3, 8 + 2, 8 + 1]);
}

#[test]
fn eviction_frees_a_page_with_its_last_reference() {
    // Room for 2 prompt-ends, 2 blocks and 3 pages: a second 12-token history evicts the first
    // one's blocks, whose pages the first prompt-end (pinned) still holds.
    let budget = 2 * (SLOT + LOGITS) + 2 * SLOT + 6 * PAGE;
    let mut c = cache(budget, 16, 16);
    let a = prefill(&mut c, tokens(12, 12, 0)).unwrap();
    assert_eq!((c.stats().entries, pages(&c)), (3, 3), "prompt-end, blocks at 4 and 8; 3 pages");
    prefill(&mut c, tokens(12, 0, 1)).unwrap();
    let stats = c.stats();
    assert!(stats.bytes_used <= budget, "{stats:?}");
    assert_eq!(pages(&c), 6, "the first history's pages stay with its pinned prompt-end");
    assert!(stats.evictions >= 1);
    // Unpinned, the first prompt-end goes with its pages once room is needed again.
    c.repin(Some(a), None);
    prefill(&mut c, tokens(12, 0, 2)).unwrap();
    assert_eq!(end_of(&c, tokens(12, 12, 0)), None, "the LRU unpinned prompt-end was evicted");
    assert_eq!(pages(&c), 6, "its 3 pages freed, the new history's 3 made");
    assert!(c.stats().bytes_used <= budget);
}

#[test]
fn a_shared_page_frees_nothing_so_a_victim_is_weighed_by_its_slot() {
    // Prompt-ends only (no block boundary is kept), three over the same 8 tokens: room for
    // those three (tails of 1, 1 and 2 rows) and their 2 shared pages, and 4 bytes more.
    let mut c = cache(3 * (SLOT + LOGITS) + 4 * ROW + 2 * PAGE + 4, 16, 16);
    c.config.retention = Retention::Sparse(1000);
    let a = prefill(&mut c, tokens(9, 8, 0)).unwrap();
    c.repin(Some(a), None);
    prefill(&mut c, tokens(9, 8, 1)).unwrap();
    prefill(&mut c, tokens(10, 8, 2)).unwrap();
    assert_eq!((pages(&c), c.stats().entries), (2, 3), "the 2 shared pages, once");
    // A fourth with a block of its own needs a slot and a page: evicting the unpinned one
    // frees its slot only (its pages stay with the others), so it does not fit.
    let before = c.stats();
    let e = prefill(&mut c, tokens(13, 8, 3)).unwrap_err();
    assert!(matches!(e, Error::CacheBudget { .. }), "{e}");
    assert_eq!(c.stats(), before, "nothing evicted");
    // One sharing every page needs the slot only (and 3 rows): the unpinned one goes, the
    // pages stay.
    prefill(&mut c, tokens(11, 8, 3)).unwrap();
    assert_eq!(end_of(&c, tokens(9, 8, 0)), None, "the LRU unpinned prompt-end was evicted");
    assert!(end_of(&c, tokens(9, 8, 1)).is_some());
    assert_eq!((pages(&c), c.stats().evictions), (2, 1));
}

#[test]
fn a_prompt_end_without_room_for_its_pages_fails_and_changes_nothing() {
    let budget = 2 * (SLOT + LOGITS) + 3 * PAGE;
    let mut c = cache(budget, 16, 16);
    prefill(&mut c, tokens(8, 8, 0)).unwrap(); // 2 pages (its blocks do not fit)
    let before = c.stats();
    let e = prefill(&mut c, tokens(8, 0, 1)).unwrap_err(); // 2 more pages: 1 too many
    assert!(matches!(e, Error::CacheBudget { .. }), "{e}");
    assert_eq!(c.stats(), before, "nothing evicted, no page kept, nothing reserved");
    assert_eq!(pages(&c), 2);
}

#[test]
fn a_dropped_hold_gives_back_the_pages_it_made() {
    let mut c = cache(100_000, 16, 16);
    prefill(&mut c, tokens(8, 8, 0)).unwrap();
    let before = c.stats();
    let p = c.prefix(tokens(16, 8, 0), None); // its first 2 blocks exist, 2 are new
    let mut hold = c.hold();
    let r = hold.reserve(true, 16, p.keys()).unwrap().unwrap();
    let fresh: Vec<bool> = r.pages().iter().map(|a| a.fresh).collect();
    assert_eq!(fresh, vec![false, false, true, true]);
    assert_eq!(hold.cache().stats().bytes_reserved, SLOT + LOGITS + 2 * PAGE);
    drop(hold);
    assert_eq!(c.stats(), before);
    assert_eq!(pages(&c), 2);
}
