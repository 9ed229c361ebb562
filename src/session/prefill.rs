//! [`Runtime::ensure`]: making a session's live state the state after a wanted prefix, from
//! the cheapest start (the live state, the longest cached checkpoint, or zeros), prefilling only
//! the rest in one forward pass that writes the checkpoints retention asks for.

use crate::cache::EntryId;
use crate::cpu::Logits;
use crate::error::{Error, Result};
use crate::session::{Done, Outcome, Runtime, SessionId};

/// Where an operation starts from.
enum Start {
    Live,
    Cached(EntryId),
    Zero,
}

impl Runtime {
    /// Makes the session's history `target` and its live state the state after it, with the
    /// logits of its last position. Fails before changing anything when the tokens are bad or
    /// the cache cannot keep the prompt-end checkpoint.
    pub async fn ensure(&mut self, id: SessionId, target: &[u32]) -> Result<Outcome> {
        self.engine.config().check_ids(target)?;
        self.activate(id)?;
        let block = self.cache.config().block_size;
        let n = target.len();
        if n == 0 {
            self.session_mut(id)?.salt = None;
        }
        let keys = self.chain(id, target)?;
        let s = self.session(id)?;
        let live_len =
            (s.live_valid && target.starts_with(&s.history) && (s.history.len() < n || s.logits.is_some()))
                .then_some(s.history.len());
        if live_len == Some(n) {
            return Ok(Outcome::default());
        }
        if n == 0 {
            self.engine.reset();
            self.commit(
                id,
                Done { history: Vec::new(), keys, logits: None, end: None, prefilled: 0, missed: false },
            )?;
            return Ok(Outcome::default());
        }
        let hit = self.cache.lookup(target, &keys);
        let hit = match hit {
            Some(h) => {
                Some((h, self.cache.entry(h).ok_or_else(|| internal("a looked-up entry is gone"))?.len))
            }
            None => None,
        };
        let (start, from) = match (live_len, hit) {
            (Some(l), Some((h, len))) if len > l => (len, Start::Cached(h)),
            (Some(l), _) => (l, Start::Live),
            (None, Some((h, len))) => (len, Start::Cached(h)),
            (None, None) => (0, Start::Zero),
        };

        // Room for the prompt-end first: if it cannot be kept, fail before touching anything.
        // The entry we resume from is pinned meanwhile so making room cannot evict it.
        let existing_end = self.cache.find_end(target, &keys);
        let held: Vec<EntryId> = existing_end
            .into_iter()
            .chain(match from {
                Start::Cached(h) => Some(h),
                _ => None,
            })
            .collect();
        for &h in &held {
            self.cache.pin(h, true);
        }
        let end_slot = match existing_end {
            Some(_) => Ok(None),
            None => self.cache.reserve(true),
        };
        let restored = match (&end_slot, &from) {
            (Err(_), _) => Ok(()),
            (Ok(_), Start::Cached(h)) => match self.cache.entry(*h) {
                Some(e) => self.engine.load_state(e.slot),
                None => Err(internal("a pinned entry is gone")),
            },
            (Ok(_), Start::Zero) => {
                self.engine.reset();
                Ok(())
            }
            (Ok(_), Start::Live) => Ok(()),
        };
        let end_slot = match end_slot {
            Ok(slot) => slot,
            Err(e) => {
                for &h in &held {
                    self.cache.pin(h, false);
                }
                return Err(e);
            }
        };
        if let Err(e) = restored {
            self.abandon(id, end_slot, &[], &held);
            return Err(e);
        }

        let logits = if start == n {
            // A hit as long as the target is its prompt-end, which keeps its logits.
            let kept = existing_end.and_then(|h| self.cache.entry(h)).and_then(|e| e.logits());
            match kept {
                Some(logits) => logits.to_vec(),
                None => {
                    self.abandon(id, end_slot, &[], &held);
                    return Err(internal("a full-length hit without prompt-end logits"));
                }
            }
        } else {
            // Block boundaries strictly inside (start, n) that retention wants and lack.
            let mut captures = Vec::new();
            for (b, key) in keys.iter().enumerate().skip(start / block + 1) {
                if b * block >= n {
                    break;
                }
                if self.cache.wants_block(b, key)
                    && let Some(slot) = self.cache.reserve(false)?
                {
                    captures.push((b * block - start - 1, slot, b));
                }
            }
            let plan: Vec<(usize, usize)> = captures.iter().map(|&(p, slot, _)| (p, slot)).collect();
            match self.engine.forward_capturing(&target[start..], Logits::Last, &plan).await {
                Ok(logits) => {
                    for (_, slot, b) in captures {
                        self.cache.insert_block(keys[b], b * block, slot);
                    }
                    logits
                }
                Err(e) => {
                    let slots: Vec<usize> = captures.iter().map(|c| c.1).collect();
                    self.abandon(id, end_slot, &slots, &held);
                    return Err(e);
                }
            }
        };

        let end = match (existing_end, end_slot) {
            (Some(e), _) => {
                self.cache.touch(e);
                e
            }
            (None, Some(slot)) => {
                if let Err(e) = self.engine.save_state(slot) {
                    self.abandon(id, Some(slot), &[], &held);
                    return Err(e);
                }
                self.cache.insert_end(target, &keys, slot, logits.clone())
            }
            (None, None) => {
                self.abandon(id, None, &[], &held);
                return Err(internal("no prompt-end slot was reserved"));
            }
        };
        for &h in &held {
            self.cache.pin(h, false);
        }
        let resumed_from = matches!(from, Start::Cached(_)).then_some(start);
        let missed = matches!(from, Start::Zero);
        let done = Done {
            history: target.to_vec(),
            keys,
            logits: Some(logits),
            end: Some(end),
            prefilled: n - start,
            missed,
        };
        self.commit(id, done)?;
        let s = self.session_mut(id)?;
        if resumed_from.is_some() {
            s.hits += 1;
        }
        Ok(Outcome { prefilled: n - start, resumed_from })
    }

    /// Records a finished operation on the session: history, logits, pin, counters.
    pub(super) fn commit(&mut self, id: SessionId, done: Done) -> Result<()> {
        let Done { history, keys, logits, end, prefilled, missed } = done;
        let Some(s) = self.sessions.get_mut(&id.0) else {
            return Err(internal("the session ended during its call"));
        };
        if let Some(e) = end {
            self.cache.pin(e, true);
        }
        let old = std::mem::replace(&mut s.pinned, end);
        s.history = history;
        s.keys = keys;
        s.logits = logits;
        s.live_valid = true;
        s.prefilled += prefilled as u64;
        s.misses += missed as u64;
        if let Some(o) = old {
            self.cache.pin(o, false);
        }
        Ok(())
    }

    /// After a failed forward: give back reserved slots and mark the live state unknown (the
    /// history stays; the next call rebuilds the state from the cache or from zeros).
    fn abandon(&mut self, id: SessionId, end_slot: Option<usize>, block_slots: &[usize], held: &[EntryId]) {
        if let Some(slot) = end_slot {
            self.cache.release(slot, true);
        }
        for &slot in block_slots {
            self.cache.release(slot, false);
        }
        for &h in held {
            self.cache.pin(h, false);
        }
        if let Some(s) = self.sessions.get_mut(&id.0) {
            s.live_valid = false;
        }
    }
}

/// A broken invariant of the cache bookkeeping, as an error instead of a panic.
fn internal(what: &str) -> Error {
    Error::Internal(format!("state cache: {what}"))
}
