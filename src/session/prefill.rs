//! [`Runtime::ensure`]: making a session's live state the state after a wanted prefix, from
//! the cheapest start (the live state, the longest cached checkpoint, or zeros), prefilling only
//! the rest in one forward pass that writes the checkpoints retention asks for.

use crate::cache::{EntryId, Hold, Prefix};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::model::Logits;
use crate::session::{Done, Outcome, Runtime, SessionId, finite};

impl Runtime {
    /// Makes the session's history `target` and its live state the state after it, with the
    /// logits of its last position. Fails before changing anything when the tokens are bad or
    /// the cache cannot keep the prompt-end checkpoint. Logits that are not finite are
    /// [`Error::NonFiniteOutput`] after the history became `target` (see `session/finite.rs`).
    pub(crate) async fn ensure(&mut self, id: SessionId, target: &[u32]) -> Result<Outcome> {
        self.engine.config().check_ids(target)?;
        self.activate(id)?;
        let n = target.len();
        if n == 0 {
            self.session_mut(id)?.salt = None;
        }
        let prefix = self.prefix(id, target.to_vec())?;
        let s = self.session(id)?;
        let history = s.history.tokens();
        let live_len =
            (s.live_valid && target.starts_with(history) && (history.len() < n || s.logits.is_some()))
                .then_some(history.len());
        if live_len == Some(n) {
            self.check_logits(id)?;
            return Ok(Outcome::default());
        }
        if n == 0 {
            self.engine.reset();
            let done = Done { history: prefix, logits: None, end: None, prefilled: 0, missed: false };
            self.commit(id, done)?;
            return Ok(Outcome::default());
        }
        // A longer checkpoint in the store than the live state or the memory cache holds?
        let stored = match &self.store {
            Some(_) => {
                let cached =
                    self.cache.lookup(&prefix).and_then(|h| self.cache.entry(h)).map_or(0, |e| e.len);
                self.look_in_store(target, live_len.unwrap_or(0).max(cached)).await
            }
            None => None,
        };
        let stored = stored.and_then(|s| self.engine.write_state(&s.state).ok().map(|()| (s.len, s.logits)));
        let restored = stored.is_some();
        let mut hold = self.cache.hold();
        let ran = prefill(&mut self.engine, &mut hold, &prefix, live_len, stored).await;
        drop(hold); // gives back what the call pinned and did not fill
        let (logits, end, from, blocks) = match ran {
            Ok(done) => done,
            Err((e, touched)) => {
                // A state restored from the store replaced the live one already.
                if (touched || restored)
                    && let Some(s) = self.sessions.get_mut(&id.0)
                {
                    // The history stays; the next call rebuilds the state from the cache or zeros.
                    s.live_valid = false;
                }
                return Err(e);
            }
        };
        let (start, resumed_from) = match from {
            Start::Live(l) => (l, None),
            Start::Cached(_, len) | Start::Stored(len) => (len, Some(len)),
            Start::Zero => (0, None),
        };
        let missed = matches!(from, Start::Zero);
        // Non-finite logits kept no prompt-end: the previous one stays the session's pin.
        let end = end.or(self.session(id)?.pinned);
        let done = Done { history: prefix, logits: Some(logits), end, prefilled: n - start, missed };
        self.commit(id, done)?;
        if resumed_from.is_some() {
            self.session_mut(id)?.hits += 1;
        }
        if restored {
            self.session_mut(id)?.store_hits += 1;
        }
        self.check_logits(id)?;
        if n > start {
            self.persist(id, &blocks).await;
        }
        Ok(Outcome { prefilled: n - start, resumed_from })
    }
}

/// Where an operation starts from: the live state after that many tokens, a cached entry (and
/// its length), a stored checkpoint (its length; already the working state), or zeros.
#[derive(Clone, Copy)]
enum Start {
    Live(usize),
    Cached(EntryId, usize),
    Stored(usize),
    Zero,
}

/// What [`prefill`] returns: the last position's logits, the prompt-end entry, where it started
/// and the block checkpoints it made (position, slot).
type Prefilled = (Vec<f32>, Option<EntryId>, Start, Vec<(usize, usize)>);

/// The prefill of `prefix` behind [`Runtime::ensure`] (at least one token): from the cheapest
/// start (`live_len`: how much of it the live state already covers), keeping the block
/// checkpoints retention asks for and the prompt-end. Returns the last position's logits, the
/// prompt-end entry (none when the logits are not finite: then nothing is kept) and where it
/// started; on failure the error and whether the engine's working state was touched. Whatever
/// it pinned or reserved goes back with `hold`. `stored`: the working state is already a
/// stored checkpoint's (its length, and a prompt-end's logits), longer than anything cached.
async fn prefill(
    engine: &mut Engine,
    hold: &mut Hold<'_>,
    prefix: &Prefix,
    live_len: Option<usize>,
    stored: Option<(usize, Option<Vec<f32>>)>,
) -> std::result::Result<Prefilled, (Error, bool)> {
    let (n, block) = (prefix.len(), hold.cache().config().block_size);
    let hit = hold.cache().lookup(prefix);
    let hit = match hit {
        Some(h) => {
            Some((h, hold.cache().entry(h).ok_or((internal("a looked-up entry is gone"), false))?.len))
        }
        None => None,
    };
    let (stored_len, stored_logits) = stored.map_or((None, None), |(len, logits)| (Some(len), logits));
    let from = match (stored_len, live_len, hit) {
        (Some(len), ..) => Start::Stored(len),
        (None, Some(l), Some((h, len))) if len > l => Start::Cached(h, len),
        (None, Some(l), _) => Start::Live(l),
        (None, None, Some((h, len))) => Start::Cached(h, len),
        (None, None, None) => Start::Zero,
    };
    // Room for the prompt-end first: if it cannot be kept, fail before touching anything. The
    // entry we resume from (and an existing prompt-end) stay pinned so making room cannot evict
    // them.
    let existing_end = hold.cache().find_end(prefix);
    existing_end.into_iter().for_each(|e| hold.pin(e));
    let start = match from {
        Start::Cached(h, len) => {
            hold.pin(h);
            len
        }
        Start::Live(l) | Start::Stored(l) => l,
        Start::Zero => 0,
    };
    let end_slot = match existing_end {
        Some(_) => None,
        None => Some(
            hold.reserve(true, n, prefix.keys())
                .map_err(|e| (e, false))?
                .ok_or((internal("no prompt-end slot"), false))?,
        ),
    };
    let touched = |e| (e, true);
    match from {
        Start::Cached(h, _) => {
            let e = hold.cache().entry(h).ok_or((internal("a pinned entry is gone"), false))?;
            let (slot, pages) = (e.slot, e.pages.clone());
            engine.load_checkpoint(slot, &pages).map_err(touched)?;
        }
        Start::Zero => engine.reset(),
        Start::Live(_) | Start::Stored(_) => {}
    }
    let mut blocks = Vec::new();

    let logits = if start == n {
        // A hit as long as the target is its prompt-end, which keeps its logits.
        let kept = existing_end.and_then(|h| hold.cache().entry(h)).and_then(|e| e.logits());
        let kept = kept.map(<[f32]>::to_vec).or(stored_logits);
        kept.ok_or((internal("a full-length hit without prompt-end logits"), true))?
    } else {
        // Block boundaries strictly inside (start, n) that retention wants and lack.
        let mut captures = Vec::new();
        for (b, key) in prefix.keys().iter().enumerate().skip(start / block + 1) {
            if b * block >= n {
                break;
            }
            if hold.cache().wants_block(b, key)
                && let Some(r) = hold.reserve(false, b * block, prefix.keys()).map_err(touched)?
            {
                captures.push((b * block - start - 1, r, b));
            }
        }
        let plan: Vec<(usize, usize)> = captures.iter().map(|(p, r, _)| (*p, r.slot())).collect();
        let logits = engine
            .forward_capturing(&prefix.tokens()[start..], Logits::Last, &plan)
            .await
            .map_err(touched)?;
        if !finite::all(&logits) {
            // The overflow may have begun before any capture: keep none (the hold frees them).
            return Ok((logits, None, from, Vec::new()));
        }
        // The key/value pages the new checkpoints made, from the live caches (final by now).
        let fresh: Vec<(usize, usize)> =
            captures.iter().map(|(_, r, _)| r).chain(&end_slot).flat_map(|r| r.fresh_pages()).collect();
        engine.save_pages(&fresh).map_err(touched)?;
        for (_, r, b) in captures {
            blocks.push((b * block, r.slot()));
            hold.insert_block(r, prefix.keys()[b], b * block);
        }
        logits
    };

    let end = match (existing_end, end_slot) {
        (Some(e), _) => {
            hold.cache().touch(e);
            e
        }
        (None, Some(r)) => {
            engine.save_checkpoint(r.slot()).map_err(touched)?;
            hold.insert_end(r, prefix, logits.clone())
        }
        (None, None) => return Err((internal("no prompt-end slot was reserved"), true)),
    };
    Ok((logits, Some(end), from, blocks))
}

/// A broken invariant of the cache bookkeeping, as an error instead of a panic.
fn internal(what: &str) -> Error {
    Error::Internal(format!("state cache: {what}"))
}
