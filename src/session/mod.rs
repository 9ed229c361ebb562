//! [`Runtime`]: one model ([`Engine`]), one shared [`StateCache`], and any number of sessions.
//!
//! A session is a token history and a live recurrent state. Every operation first makes the
//! live state the state after the wanted prefix ([`Runtime::ensure`]), from the cheapest start:
//! the session's own live state when the prefix extends the history, else the longest cached
//! checkpoint of the prefix (copied into the live state — cache entries are never mutated), else
//! zeros; only the rest is prefilled, in one forward pass that also writes the block-boundary
//! checkpoints retention asks for. The prompt-end state is then stored with its logits and
//! pinned as the session's latest, so the next turn, a regenerate or an identical resend start
//! from it.
//!
//! Sessions share the engine's single working state: the active session's live state is in it;
//! switching sessions parks it in the session's own slot.

mod export;

use std::collections::HashMap;

use crate::cache::keys::{self, Key};
use crate::cache::{CacheConfig, CacheStats, EntryId, StateCache};
use crate::cpu::{Logits, State};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::sampling::Sampler;

/// Most checkpoint slots a cache gets (tiny models with large budgets would otherwise ask for
/// hundreds of thousands).
const MAX_SLOTS: usize = 16_384;

/// A session's handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SessionId(pub u64);

/// What an operation did to get to its prefix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Tokens run through the model.
    pub prefilled: usize,
    /// Length of the prefix whose cached checkpoint was restored, if one was.
    pub resumed_from: Option<usize>,
}

/// A session's counters and the checkpoints on its history.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Tokens run through the model for this session (prefill and decode).
    pub tokens_prefilled: u64,
    /// Operations that restored a cached checkpoint.
    pub hits: u64,
    /// Operations that found no checkpoint and started from zeros.
    pub misses: u64,
    /// Positions of cached states on this session's history (block boundaries, prompt-ends).
    pub checkpoints: Vec<usize>,
    /// Bytes one such checkpoint takes (the whole state, f32).
    pub checkpoint_bytes: u64,
}

/// Options of [`Runtime::generate`].
#[derive(Clone, Copy, Debug)]
pub struct GenerateOptions {
    /// Most tokens to generate.
    pub max_tokens: usize,
    /// Stop after the model's end-of-text token (it is kept in the history).
    pub stop_at_eos: bool,
}

struct Session {
    history: Vec<u32>,
    /// `keys::chain(history)`.
    keys: Vec<Key>,
    /// Where the live state is parked while another session is active.
    live_slot: usize,
    /// Whether the live state is the state after `history` (false after a failed call).
    live_valid: bool,
    /// Logits after the last token of `history`.
    logits: Option<Vec<f32>>,
    /// The session's latest prompt-end entry (pinned).
    pinned: Option<EntryId>,
    prefilled: u64,
    hits: u64,
    misses: u64,
}

/// A model, its checkpoint cache and its sessions.
pub struct Runtime {
    engine: Engine,
    cache: StateCache,
    sessions: HashMap<u64, Session>,
    free_live_slots: Vec<usize>,
    next_id: u64,
    /// The session whose live state is the engine's working state.
    active: Option<u64>,
}

/// What a finished operation leaves in its session.
struct Done {
    history: Vec<u32>,
    keys: Vec<Key>,
    logits: Option<Vec<f32>>,
    /// The prompt-end entry to pin as the session's latest.
    end: Option<EntryId>,
    prefilled: usize,
    missed: bool,
}

/// Where an operation starts from.
enum Start {
    Live,
    Cached(EntryId),
    Zero,
}

impl Runtime {
    /// A runtime over `engine` with a checkpoint cache configured by `cache` (its slots are
    /// allocated now, on the GPU for a GPU engine).
    pub fn new(mut engine: Engine, cache: CacheConfig) -> Result<Self> {
        let c = engine.config();
        let slot_bytes = State::bytes(c) as u64;
        let logits_bytes = 4 * c.vocab_size as u64;
        let n = StateCache::slots_for(&cache, slot_bytes).min(MAX_SLOTS);
        let slots = if n > 0 { engine.add_slots(n)?.collect() } else { Vec::new() };
        let cache = StateCache::new(cache, slots, slot_bytes, logits_bytes)?;
        Ok(Self {
            engine,
            cache,
            sessions: HashMap::new(),
            free_live_slots: Vec::new(),
            next_id: 1,
            active: None,
        })
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Cache counters.
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }

    /// The cache settings.
    pub fn cache_config(&self) -> &CacheConfig {
        self.cache.config()
    }

    /// Opens a session with an empty history.
    pub fn new_session(&mut self) -> Result<SessionId> {
        let live_slot = match self.free_live_slots.pop() {
            Some(s) => s,
            None => self.engine.add_slots(1)?.start,
        };
        let id = self.next_id;
        self.next_id += 1;
        let keys = vec![keys::root(self.cache.config().block_size)];
        let s = Session {
            history: Vec::new(),
            keys,
            live_slot,
            live_valid: false,
            logits: None,
            pinned: None,
            prefilled: 0,
            hits: 0,
            misses: 0,
        };
        self.sessions.insert(id, s);
        Ok(SessionId(id))
    }

    /// Closes a session: its pinned checkpoint becomes evictable, its slot reusable.
    pub fn close_session(&mut self, id: SessionId) -> Result<()> {
        let s = self.sessions.remove(&id.0).ok_or(Error::NoSession(id.0))?;
        if let Some(p) = s.pinned {
            self.cache.pin(p, false);
        }
        self.free_live_slots.push(s.live_slot);
        if self.active == Some(id.0) {
            self.active = None;
        }
        Ok(())
    }

    fn session(&self, id: SessionId) -> Result<&Session> {
        self.sessions.get(&id.0).ok_or(Error::NoSession(id.0))
    }

    fn session_mut(&mut self, id: SessionId) -> Result<&mut Session> {
        self.sessions.get_mut(&id.0).ok_or(Error::NoSession(id.0))
    }

    /// The session's tokens so far.
    pub fn history(&self, id: SessionId) -> Result<&[u32]> {
        Ok(&self.session(id)?.history)
    }

    /// Logits after the session's last token, if known.
    pub fn logits(&self, id: SessionId) -> Result<Option<&[f32]>> {
        Ok(self.session(id)?.logits.as_deref())
    }

    /// The session's counters and checkpoints.
    pub fn stats(&self, id: SessionId) -> Result<SessionStats> {
        let s = self.session(id)?;
        Ok(SessionStats {
            tokens_prefilled: s.prefilled,
            hits: s.hits,
            misses: s.misses,
            checkpoints: self.cache.positions_on(&s.history, &s.keys),
            checkpoint_bytes: State::bytes(self.engine.config()) as u64,
        })
    }

    /// Makes `id`'s live state the engine's working state.
    fn activate(&mut self, id: SessionId) -> Result<()> {
        if self.active == Some(id.0) {
            return Ok(());
        }
        if let Some(a) = self.active.and_then(|a| self.sessions.get(&a))
            && a.live_valid
        {
            self.engine.save_state(a.live_slot)?;
        }
        let s = self.session(id)?;
        if s.live_valid {
            self.engine.load_state(s.live_slot)?;
        }
        self.active = Some(id.0);
        Ok(())
    }

    /// Feeds `tokens` after the session's history.
    pub async fn append(&mut self, id: SessionId, tokens: &[u32]) -> Result<Outcome> {
        let mut target = self.session(id)?.history.clone();
        target.extend_from_slice(tokens);
        self.ensure(id, &target).await
    }

    /// Truncates the history to `len` tokens and restores the state there (from the nearest
    /// checkpoint at or before it, re-prefilling only the rest).
    pub async fn rewind(&mut self, id: SessionId, len: usize) -> Result<Outcome> {
        let history = &self.session(id)?.history;
        if len > history.len() {
            return Err(Error::InvalidInput(format!(
                "cannot rewind to {len}: the history has {}",
                history.len()
            )));
        }
        let target = history[..len].to_vec();
        self.ensure(id, &target).await
    }

    /// Replaces the history with `tokens` (an edited prompt), resuming from the longest cached
    /// prefix of them.
    pub async fn edit(&mut self, id: SessionId, tokens: &[u32]) -> Result<Outcome> {
        self.ensure(id, tokens).await
    }

    /// Makes the session's history `target` and its live state the state after it, with the
    /// logits of its last position. Fails before changing anything when the tokens are bad or
    /// the cache cannot keep the prompt-end checkpoint.
    pub async fn ensure(&mut self, id: SessionId, target: &[u32]) -> Result<Outcome> {
        self.engine.config().check_ids(target)?;
        self.activate(id)?;
        let block = self.cache.config().block_size;
        let keys = keys::chain(target, block);
        let n = target.len();
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
            );
            return Ok(Outcome::default());
        }
        let hit = self.cache.lookup(target, &keys);
        let hit_len = hit.map(|h| self.cache.entry(h).expect("looked-up entry").len);
        let (start, from) = match (live_len, hit_len) {
            (Some(l), Some(h)) if h > l => (h, Start::Cached(hit.expect("hit"))),
            (Some(l), _) => (l, Start::Live),
            (None, Some(h)) => (h, Start::Cached(hit.expect("hit"))),
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
            (Ok(_), Start::Cached(h)) => self.engine.load_state(self.cache.entry(*h).expect("pinned").slot),
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
            let h = existing_end.expect("a full-length hit is a prompt-end");
            self.cache.entry(h).and_then(|e| e.logits()).expect("prompt-end logits").to_vec()
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
                self.engine.save_state(slot)?;
                self.cache.insert_end(target, &keys, slot, logits.clone())
            }
            (None, None) => unreachable!("a prompt-end slot was reserved"),
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
        self.commit(id, done);
        let s = self.session_mut(id)?;
        if resumed_from.is_some() {
            s.hits += 1;
        }
        Ok(Outcome { prefilled: n - start, resumed_from })
    }

    /// Records a finished operation on the session: history, logits, pin, counters.
    fn commit(&mut self, id: SessionId, done: Done) {
        let Done { history, keys, logits, end, prefilled, missed } = done;
        if let Some(e) = end {
            self.cache.pin(e, true);
        }
        let s = self.sessions.get_mut(&id.0).expect("checked session");
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

    /// Generates up to `options.max_tokens` tokens after the history. Each token is fed to the
    /// model before `on_token` sees it; `on_token` returning `false` stops between steps, with
    /// the state at the last emitted token, so a later call continues exactly as an
    /// uninterrupted run would (with the same sampler).
    pub async fn generate(
        &mut self,
        id: SessionId,
        sampler: &mut Sampler,
        options: GenerateOptions,
        mut on_token: impl FnMut(u32) -> bool,
    ) -> Result<Vec<u32>> {
        let s = self.session(id)?;
        if s.history.is_empty() {
            return Err(Error::InvalidInput("generate needs a prompt: append tokens first".into()));
        }
        if !(s.live_valid && s.logits.is_some()) || self.active != Some(id.0) {
            let history = s.history.clone();
            self.ensure(id, &history).await?;
        }
        let block = self.cache.config().block_size;
        let eos = self.engine.config().eos_token_id;
        let mut out = Vec::new();
        while out.len() < options.max_tokens {
            let logits = self.session(id)?.logits.as_deref().expect("ensured logits");
            let token = sampler.sample(logits)?;
            let fed = self.engine.forward(&[token], Logits::Last).await;
            let s = self.session_mut(id)?;
            let logits = match fed {
                Ok(l) => l,
                Err(e) => {
                    s.live_valid = false;
                    return Err(e);
                }
            };
            s.history.push(token);
            s.logits = Some(logits);
            s.prefilled += 1;
            if s.history.len().is_multiple_of(block) {
                let next = keys::child(s.keys.last().expect("root"), &s.history[s.history.len() - block..]);
                s.keys.push(next);
                self.capture_boundary(id)?;
            }
            out.push(token);
            if (options.stop_at_eos && Some(token) == eos) || !on_token(token) {
                break;
            }
            crate::platform::yield_now().await;
        }
        self.store_end(id)?;
        Ok(out)
    }

    /// During decode: keep the block boundary just reached if retention wants it and there is
    /// room (best effort).
    fn capture_boundary(&mut self, id: SessionId) -> Result<()> {
        let s = self.session(id)?;
        let b = s.keys.len() - 1;
        let (key, len) = (s.keys[b], s.history.len());
        if self.cache.wants_block(b, &key)
            && let Some(slot) = self.cache.reserve(false)?
        {
            self.engine.save_state(slot)?;
            self.cache.insert_block(key, len, slot);
        }
        Ok(())
    }

    /// After generating: keep the end of the history as the session's latest prompt-end, if the
    /// budget allows (best effort: the previous one stays pinned otherwise).
    fn store_end(&mut self, id: SessionId) -> Result<()> {
        let s = self.session(id)?;
        if self.cache.find_end(&s.history, &s.keys).is_some() {
            return Ok(());
        }
        let Ok(Some(slot)) = self.cache.reserve(true) else { return Ok(()) };
        self.engine.save_state(slot)?;
        let s = self.sessions.get(&id.0).ok_or(Error::NoSession(id.0))?;
        let logits = s.logits.clone().expect("logits after generating");
        let end = self.cache.insert_end(&s.history, &s.keys, slot, logits);
        self.cache.pin(end, true);
        let s = self.session_mut(id)?;
        if let Some(old) = s.pinned.replace(end) {
            self.cache.pin(old, false);
        }
        Ok(())
    }
}
