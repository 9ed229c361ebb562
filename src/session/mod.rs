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
//!
//! Decoding after the history is one loop (`decode.rs`), whose tokens the device may pick where
//! the engine can (`greedy.rs`, `top.rs`); [`Generation`] (`generation.rs`) turns it into text.

mod ahead;
mod decode;
mod export;
mod finite;
mod fork;
mod generation;
mod greedy;
mod prefill;
mod store_io;
mod top;

pub use decode::{Decoding, Pace};
pub use generation::{Generation, Piece};
pub use greedy::GREEDY_BATCH;

use std::collections::HashMap;

use crate::cache::keys::Key;
use crate::cache::pages::Pages;
use crate::cache::{CacheConfig, CacheStats, EntryId, Prefix, StateCache};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::model::State;

/// Most checkpoint slots a cache gets (tiny models with large budgets would otherwise ask for
/// hundreds of thousands).
const MAX_SLOTS: usize = 16_384;

/// Most key/value pages a hybrid's cache gets (a page is one block of positions: 65,536 of
/// 64 are four million positions of history).
const MAX_PAGES: usize = 65_536;

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
    pub(crate) misses: u64,
    /// Positions of cached states on this session's history (block boundaries, prompt-ends).
    pub checkpoints: Vec<usize>,
    /// Bytes one such checkpoint takes (the whole state, f32).
    pub(crate) checkpoint_bytes: u64,
    /// A hybrid's: the blocks of this session's history (block b: positions b·B..(b+1)·B)
    /// whose key/value page is cached (shared with every history through it).
    pub(crate) pages: Vec<usize>,
    /// Operations that resumed from a checkpoint read from the persistent store.
    pub store_hits: u64,
}

/// Options of [`Runtime::generate`] and [`Generation`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenerateOptions {
    /// Most tokens to generate.
    pub max_tokens: usize,
    /// Stop after the model's end-of-text token (it is kept in the history).
    pub stop_at_eos: bool,
}

impl GenerateOptions {
    /// Tokens generated when a caller does not say (the JS API and the CLI alike).
    pub const DEFAULT_MAX_TOKENS: usize = 64;
}

impl Default for GenerateOptions {
    fn default() -> Self {
        Self { max_tokens: Self::DEFAULT_MAX_TOKENS, stop_at_eos: true }
    }
}

struct Session {
    /// The tokens so far with their chain keys (from the shared root or the session's private
    /// one).
    history: Prefix,
    /// Set by importing a state: the session's checkpoints live in a namespace of their own
    /// (`keys::private_root`), so a state nobody here computed is never resumed by another
    /// session. Cleared when the history is emptied.
    salt: Option<Key>,
    /// Where the live state is parked while another session is active (when it is not its
    /// latest prompt-end: see `parked_at`).
    live_slot: usize,
    /// Parked as its pinned prompt-end entry, which is the state after `history` (no copy:
    /// for a hybrid, its key/value pages stay shared).
    parked_at: Option<EntryId>,
    /// Whether the live state is the state after `history` (false after a failed call).
    live_valid: bool,
    /// Logits after the last token of `history`.
    logits: Option<Vec<f32>>,
    /// The session's latest prompt-end entry (pinned).
    pinned: Option<EntryId>,
    prefilled: u64,
    hits: u64,
    misses: u64,
    store_hits: u64,
}

/// A model, its checkpoint cache and its sessions.
pub struct Runtime {
    engine: Engine,
    cache: StateCache,
    sessions: HashMap<u64, Session>,
    free_live_slots: Vec<usize>,
    next_id: u64,
    /// Makes each import's private namespace unique.
    next_salt: u64,
    /// The session whose live state is the engine's working state.
    active: Option<u64>,
    /// Greedy steps per device submit (see [`Runtime::set_greedy_batch`]).
    greedy_batch: usize,
    /// The persistent tier under the cache (`session/store_io.rs`), if set.
    store: Option<crate::store::Store>,
    /// Tokens that end a generation with `stop_at_eos` (see [`Runtime::set_end_tokens`]).
    end_tokens: Vec<u32>,
}

/// What a finished operation leaves in its session.
struct Done {
    history: Prefix,
    logits: Option<Vec<f32>>,
    /// The prompt-end entry to pin as the session's latest.
    end: Option<EntryId>,
    prefilled: usize,
    missed: bool,
}

impl Runtime {
    /// A runtime over `engine` with a checkpoint cache configured by `cache` (its slots are
    /// allocated now, on the GPU for a GPU engine).
    pub fn new(mut engine: Engine, cache: CacheConfig) -> Result<Self> {
        let c = engine.config();
        let slot_bytes = State::bytes(c) as u64;
        let logits_bytes = 4 * c.vocab_size as u64;
        // A hybrid's checkpoints keep the key/value rows before them, in the caches' format.
        let per_token_bytes = (engine.kv_value_bytes() * c.state_layout().per_token_floats()) as u64;
        let n = StateCache::slots_for(&cache, slot_bytes).min(MAX_SLOTS);
        let slots = if n > 0 { engine.add_slots(n)?.collect() } else { Vec::new() };
        let config = cache;
        let mut cache = StateCache::new(config, slots, slot_bytes, logits_bytes)?;
        cache.set_per_token_bytes(per_token_bytes);
        if per_token_bytes > 0 {
            // Pages mode: a checkpoint keeps the rows of its partial last block, and shares the
            // pages of its whole blocks.
            let page_bytes = per_token_bytes * config.block_size as u64;
            let n = (config.budget_bytes / page_bytes).min(MAX_PAGES as u64) as usize;
            let ids = engine.enable_pages(config.block_size, n)?;
            cache.use_pages(Pages::new(page_bytes, ids.collect()));
        }
        Ok(Self {
            end_tokens: engine.config().eos_token_id.into_iter().collect(),
            engine,
            cache,
            sessions: HashMap::new(),
            free_live_slots: Vec::new(),
            next_id: 1,
            next_salt: 0,
            active: None,
            greedy_batch: GREEDY_BATCH,
            store: None,
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

    /// Sets the tokens that end a generation (with `stop_at_eos`): by default config.json's
    /// `eos_token_id`; a chat model's loader sets every end-of-turn id its files name
    /// ([`crate::chat::ChatConfig::end_ids`]: generation_config's list, the eos token's).
    pub fn set_end_tokens(&mut self, ids: Vec<u32>) {
        self.end_tokens = ids;
    }

    /// The tokens that end a generation.
    pub fn end_tokens(&self) -> &[u32] {
        &self.end_tokens
    }

    /// Opens a session with an empty history.
    pub fn new_session(&mut self) -> Result<SessionId> {
        let live_slot = match self.free_live_slots.pop() {
            Some(s) => s,
            None => self.engine.add_slots(1)?.start,
        };
        let id = self.next_id;
        self.next_id += 1;
        let s = Session {
            history: self.cache.prefix(Vec::new(), None),
            salt: None,
            live_slot,
            parked_at: None,
            live_valid: false,
            logits: None,
            pinned: None,
            prefilled: 0,
            hits: 0,
            misses: 0,
            store_hits: 0,
        };
        self.sessions.insert(id, s);
        Ok(SessionId(id))
    }

    /// Closes a session: its pinned checkpoint becomes evictable, its slot reusable.
    pub fn close_session(&mut self, id: SessionId) -> Result<()> {
        let s = self.sessions.remove(&id.0).ok_or(Error::NoSession(id.0))?;
        self.cache.repin(s.pinned, None);
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
        Ok(self.session(id)?.history.tokens())
    }

    /// Logits after the session's last token, if known; [`Error::NonFiniteOutput`] when they
    /// hold NaN or ±Inf (the model overflowed: see `session/finite.rs`).
    pub fn logits(&self, id: SessionId) -> Result<Option<&[f32]>> {
        self.check_logits(id)?;
        Ok(self.session(id)?.logits.as_deref())
    }

    /// The session's counters and checkpoints.
    pub fn stats(&self, id: SessionId) -> Result<SessionStats> {
        let s = self.session(id)?;
        Ok(SessionStats {
            tokens_prefilled: s.prefilled,
            hits: s.hits,
            misses: s.misses,
            checkpoints: self.cache.positions_on(&s.history),
            checkpoint_bytes: State::bytes(self.engine.config()) as u64,
            pages: self.cache.pages_on(&s.history),
            store_hits: s.store_hits,
        })
    }

    /// `tokens` with their chain keys in session `id`'s namespace (shared, or private after an
    /// import).
    fn prefix(&self, id: SessionId, tokens: Vec<u32>) -> Result<Prefix> {
        Ok(self.cache.prefix(tokens, self.session(id)?.salt.as_ref()))
    }

    /// Records a finished operation on the session: history, logits, pin, counters.
    fn commit(&mut self, id: SessionId, done: Done) -> Result<()> {
        let Done { history, logits, end, prefilled, missed } = done;
        let Some(s) = self.sessions.get_mut(&id.0) else {
            return Err(Error::Internal("state cache: the session ended during its call".into()));
        };
        let old = std::mem::replace(&mut s.pinned, end);
        s.history = history;
        s.logits = logits;
        s.live_valid = true;
        s.prefilled += prefilled as u64;
        s.misses += missed as u64;
        self.cache.repin(old, end);
        Ok(())
    }

    /// Makes `id`'s live state the engine's working state.
    fn activate(&mut self, id: SessionId) -> Result<()> {
        if self.active == Some(id.0) {
            return Ok(());
        }
        if let Some(a) = self.active {
            self.park(a)?;
        }
        let s = self.session(id)?;
        if s.live_valid {
            match s.parked_at.and_then(|e| self.cache.entry(e)) {
                Some(e) => {
                    let (slot, pages) = (e.slot, e.pages.clone());
                    self.engine.load_checkpoint(slot, &pages)?;
                }
                None => self.engine.load_state(s.live_slot)?,
            }
        }
        self.active = Some(id.0);
        Ok(())
    }

    /// Parks session `a`'s live state (the engine's working state) while another is active: as
    /// its pinned prompt-end entry where that is the state after its history (nothing to copy),
    /// else whole in its own slot.
    fn park(&mut self, a: u64) -> Result<()> {
        let Some(s) = self.sessions.get(&a) else { return Ok(()) };
        if !s.live_valid {
            return Ok(());
        }
        let end = self.end_is_state(s);
        if end.is_none() {
            self.engine.save_state(s.live_slot)?;
        }
        if let Some(s) = self.sessions.get_mut(&a) {
            s.parked_at = end;
        }
        Ok(())
    }

    /// The session's pinned prompt-end entry when that entry is its state (the state after its
    /// history): then it can be parked there, or forked from it, without a copy.
    fn end_is_state(&self, s: &Session) -> Option<EntryId> {
        s.pinned.filter(|&e| {
            self.cache.entry(e).is_some_and(|x| x.len == s.history.len())
                && self.cache.find_end(&s.history) == Some(e)
        })
    }

    /// Feeds `tokens` after the session's history.
    pub async fn append(&mut self, id: SessionId, tokens: &[u32]) -> Result<Outcome> {
        let mut target = self.session(id)?.history.tokens().to_vec();
        target.extend_from_slice(tokens);
        self.ensure(id, &target).await
    }

    /// Truncates the history to `len` tokens and restores the state there (from the nearest
    /// checkpoint at or before it, re-prefilling only the rest).
    pub async fn rewind(&mut self, id: SessionId, len: usize) -> Result<Outcome> {
        let history = self.session(id)?.history.tokens();
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
}
