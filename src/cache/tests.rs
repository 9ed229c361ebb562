//! Unit tests of the cache's bookkeeping alone (no engine): lookup, retention, pins, LRU
//! eviction, the byte budget and what a dropped [`Hold`] gives back.

use super::*;

/// Bytes of a state slot and of a prompt-end's logits in these tests.
const SLOT: u64 = 100;
const LOGITS: u64 = 10;
const END: u64 = SLOT + LOGITS;

fn cache(block: usize, retention: Retention, budget: u64, slots: usize) -> StateCache {
    let config = CacheConfig { block_size: block, retention, budget_bytes: budget };
    StateCache::new(config, (0..slots).collect(), SLOT, LOGITS).unwrap()
}

fn tokens(n: usize) -> Vec<u32> {
    (0..n as u32).map(|i| i * 7 + 1).collect()
}

/// The length of the state `lookup` finds for `t` (in the namespace of `salt`).
fn found(c: &mut StateCache, t: &[u32], salt: Option<&Key>) -> Option<usize> {
    let p = c.prefix(t.to_vec(), salt);
    c.lookup(&p).and_then(|id| c.entry(id)).map(|e| e.len)
}

/// Stores block entries for every boundary strictly inside `p` that retention wants, as a
/// prefill would (the state after all of `p` is its prompt-end's).
fn store_blocks(c: &mut StateCache, p: &Prefix) {
    let block = c.config().block_size;
    let mut hold = c.hold();
    for (b, key) in p.keys().iter().enumerate().filter(|(b, _)| b * block < p.len()) {
        if hold.cache().wants_block(b, key)
            && let Some(r) = hold.reserve(false, b * block, p.keys()).unwrap()
        {
            hold.insert_block(r, *key, b * block);
        }
    }
}

/// Stores the prompt-end of `t` and pins it as a session's latest would be.
fn store_end(c: &mut StateCache, t: Vec<u32>) -> EntryId {
    let p = c.prefix(t, None);
    let mut hold = c.hold();
    let r = hold.reserve(true, p.len(), p.keys()).unwrap().unwrap();
    let id = hold.insert_end(r, &p, vec![0.5; 3]);
    drop(hold);
    c.repin(None, Some(id));
    id
}

#[test]
fn lookup_returns_the_longest_usable_state() {
    let mut c = cache(4, Retention::Dense, 10_000, 32);
    let t = tokens(12);
    let full = c.prefix(t.clone(), None);
    store_blocks(&mut c, &full); // 4, 8 (12 is the end of the tokens: never a block here)
    let end = store_end(&mut c, t[..10].to_vec());
    let ten = c.prefix(t[..10].to_vec(), None);

    assert_eq!(found(&mut c, &t, None), Some(10), "the prompt-end at 10 beats the block at 8");
    assert_eq!(c.lookup(&ten), Some(end), "an exact prompt-end: nothing to prefill");
    // A block is used only strictly inside the tokens (its logits are not kept).
    assert_eq!(found(&mut c, &t[..8], None), Some(4));
    // A prompt-end whose tail differs is not on the path.
    let mut other = t[..10].to_vec();
    other[9] += 1;
    assert_eq!(found(&mut c, &other, None), Some(8));
    assert_eq!(found(&mut c, &t[..3], None), None);
    // Another namespace (an imported session's) sees none of it.
    assert_eq!(found(&mut c, &t, Some(&[9; 32])), None);
    assert_eq!(c.positions_on(&full), vec![4, 8, 10]);
}

#[test]
fn retention_decides_which_boundaries_are_wanted() {
    assert!(Retention::Dense.keeps(1) && Retention::Dense.keeps(7));
    assert!(!Retention::Sparse(2).keeps(1) && Retention::Sparse(2).keeps(2) && Retention::Sparse(3).keeps(6));
    let mut c = cache(2, Retention::Sparse(2), 10_000, 32);
    let p = c.prefix(tokens(9), None);
    store_blocks(&mut c, &p);
    assert_eq!(c.positions_on(&p), vec![4, 8], "every 2nd boundary of blocks of 2");
    assert!(!c.wants_block(0, &p.keys()[0]), "the empty prefix is never a block");
    assert!(!c.wants_block(2, &p.keys()[2]), "already cached");
    assert!(c.wants_block(2, &[1; 32]) && !c.wants_block(3, &[1; 32]));
}

#[test]
fn eviction_takes_the_least_recently_used_unpinned_entry() {
    // Room for one prompt-end and two blocks (320 ≤ 330), not three blocks and an end.
    let mut c = cache(2, Retention::Dense, END + 2 * SLOT + 10, 8);
    let p = c.prefix(tokens(6), None); // boundaries 2 and 4
    store_blocks(&mut c, &p);
    let end = store_end(&mut c, tokens(5));
    assert_eq!((c.stats().entries, c.stats().bytes_used), (3, END + 2 * SLOT));
    // Using the block at 2 makes the one at 4 the least recently used.
    let three = c.prefix(tokens(3), None);
    let two = c.lookup(&three).unwrap();
    let longer = c.prefix(tokens(8), None); // wants the boundary at 6
    store_blocks(&mut c, &longer);
    assert_eq!(c.positions_on(&longer), vec![2, 5, 6], "4 was evicted; the pinned end stayed");
    assert!(c.entry(two).is_some() && c.is_pinned(end) && c.stats().evictions == 1);
    assert!(c.stats().bytes_used <= c.config().budget_bytes);
}

#[test]
fn a_prompt_end_without_room_is_a_budget_error_and_evicts_nothing() {
    let mut c = cache(4, Retention::Dense, 2 * END, 8);
    let a = store_end(&mut c, tokens(3));
    let b = store_end(&mut c, tokens(5));
    let before = c.stats();
    let mut hold = c.hold();
    let e = hold.reserve(true, 0, &[]).unwrap_err();
    assert_eq!(e.code(), "CacheBudget", "{e}");
    assert_eq!(hold.reserve(false, 0, &[]).unwrap(), None, "a block is optional: no room, no error");
    drop(hold);
    assert_eq!(c.stats(), before);
    assert!(c.entry(a).is_some() && c.entry(b).is_some());
    // Unpinned, the older one makes room.
    c.repin(Some(a), None);
    let mut hold = c.hold();
    assert!(hold.reserve(true, 0, &[]).unwrap().is_some());
    drop(hold);
    assert!(c.entry(a).is_none() && c.entry(b).is_some());
}

#[test]
fn a_dropped_hold_gives_back_what_it_did_not_fill() {
    let mut c = cache(4, Retention::Dense, 4 * END, 4);
    let end = store_end(&mut c, tokens(3));
    c.repin(Some(end), None);
    let mut hold = c.hold();
    hold.pin(end);
    let r = hold.reserve(true, 0, &[]).unwrap().unwrap();
    let kept = hold.reserve(false, 4, &[]).unwrap().unwrap();
    let key = [3; 32];
    let block = hold.insert_block(kept, key, 4);
    assert!(hold.cache().is_pinned(end));
    assert_eq!(hold.cache().stats().bytes_reserved, END);
    let _ = r; // an error path: the prompt-end never gets written
    drop(hold);
    let s = c.stats();
    assert_eq!((s.bytes_reserved, s.bytes_used, s.entries), (0, END + SLOT, 2));
    assert!(!c.is_pinned(end) && c.entry(block).is_some());
    // Every slot is usable again: two more prompt-ends fit (4 slots, 4·END budget).
    let more: Vec<_> = (6..8).map(|n| store_end(&mut c, tokens(n))).collect();
    assert_eq!(c.stats().entries, 4, "{more:?}");
}

#[test]
fn settings_that_cannot_work_are_refused() {
    let config = |block_size, retention, budget_bytes| CacheConfig { block_size, retention, budget_bytes };
    let new = |c, slots: usize| StateCache::new(c, (0..slots).collect(), SLOT, LOGITS);
    assert_eq!(new(config(0, Retention::Dense, 1000), 4).err().map(|e| e.code()), Some("InvalidInput"));
    assert_eq!(new(config(4, Retention::Sparse(0), 1000), 4).err().map(|e| e.code()), Some("InvalidInput"));
    // One prompt-end's worth: a session's latest stays pinned while its next is stored.
    assert_eq!(new(config(4, Retention::Dense, END), 4).err().map(|e| e.code()), Some("CacheBudget"));
    assert_eq!(new(config(4, Retention::Dense, 2 * END), 1).err().map(|e| e.code()), Some("CacheBudget"));
    assert!(new(config(4, Retention::Dense, 2 * END), 2).is_ok());
    assert_eq!(StateCache::slots_for(&config(4, Retention::Dense, 1000), SLOT), 10);
}

#[test]
fn a_prefix_chains_its_keys_as_it_grows() {
    let c = cache(3, Retention::Dense, 10_000, 4);
    let t = tokens(7);
    let mut grown = c.prefix(Vec::new(), None);
    let boundaries: Vec<bool> = t.iter().map(|&x| grown.push(x)).collect();
    assert_eq!(boundaries, [false, false, true, false, false, true, false]);
    assert_eq!(grown, c.prefix(t.clone(), None));
    assert_eq!((grown.whole_blocks().0, grown.tail()), (2, &t[6..]));
    assert_eq!(grown.keys(), &keys::chain(&t, 3)[..]);
}

#[test]
fn a_hybrid_entry_costs_its_attention_caches_too() {
    // 2 bytes more per token of history: a block at 8 costs SLOT + 16, a prompt-end of 10
    // tokens SLOT + 20 + LOGITS.
    let mut c = cache(4, Retention::Dense, 1_000, 8);
    c.set_per_token_bytes(2);
    let t = tokens(10);
    let p = c.prefix(t.clone(), None);
    store_blocks(&mut c, &p); // 4 and 8
    assert_eq!(c.stats().bytes_used, 2 * SLOT + 2 * (4 + 8));
    store_end(&mut c, t);
    assert_eq!(c.stats().bytes_used, 3 * SLOT + 2 * (4 + 8 + 10) + LOGITS);
    // 300 bytes hold three bare states, not three with their caches (108 + 116 + 124): the
    // block at 12 evicts the oldest.
    let mut small = cache(4, Retention::Dense, 300, 8);
    small.set_per_token_bytes(2);
    let p = small.prefix(tokens(13), None);
    store_blocks(&mut small, &p);
    assert_eq!(small.positions_on(&p), vec![8, 12]);
    assert_eq!((small.stats().bytes_used, small.stats().evictions), (116 + 124, 1));
}
