//! The decode loop: [`Runtime::decode_next`] hands out a session's next token, one per call,
//! whatever picks and feeds it — the host from all V logits read back, or the device where the
//! engine can pick ([`crate::engine::DevicePicks`]): greedy batches (`greedy.rs`), top-k
//! summaries (`top.rs`). [`Runtime::generate`] is that loop run to the end; a text generation
//! ([`super::Generation`]) runs it too, to the end or one token per call (a stream).
//!
//! Every token is fed to the model before it is handed out, and block boundaries reached on the
//! way keep their checkpoints. What the device did ahead of the history (a batch's tokens not
//! handed out yet, logits left on the device) is reconciled when the decode ends
//! ([`Runtime::end_decoding`]): the session then holds exactly what a token-by-token run leaves,
//! and its end is kept as its latest prompt-end.

use crate::error::{Error, Result};
use crate::kernels::top_k::Top;
use crate::model::Logits;
use crate::sampling::{Sampler, TokenMask};
use crate::session::ahead::Ahead;
use crate::session::{GenerateOptions, Runtime, SessionId};

/// How a decode's tokens are taken: whether the device may run ahead of the history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pace {
    /// All in one call ([`Runtime::generate`], `Session.generate`, the CLI): where the engine
    /// picks on the device and the sampler allows, the device picks and feeds ahead of the
    /// history (greedy batches, top-k summaries), reconciled when the decode ends.
    ToEnd,
    /// One token per call, other calls possibly in between (a stream's `next()`): the session
    /// is whole after every token, its logits on the host, so every token is picked there.
    Stepwise,
}

/// How the next token is picked and fed, chosen at a decode's first token.
#[derive(Clone, Copy, Debug)]
pub(super) enum Strategy {
    /// Sampled on the host from all V logits, read back after each token.
    Host,
    /// Plain greedy, picked and fed on the device in batches of up to `batch` steps.
    Greedy { batch: usize },
    /// Drawn on the host from the top `k` logits the device summarises after each token.
    Top { k: usize },
}

/// One decode in progress on a session: its options, the tokens handed out, how they are
/// picked, and what the device did ahead of the history. Made by [`Decoding::new`], driven by
/// [`Runtime::decode_next`], ended by [`Runtime::end_decoding`].
pub struct Decoding {
    pub(super) options: GenerateOptions,
    pace: Pace,
    strategy: Option<Strategy>,
    pub(super) ahead: Ahead,
    produced: usize,
    /// The last token was the end of text (with `stop_at_eos`).
    eos: bool,
    stopped: bool,
    /// The tokens the next pick may take (a grammar's), when restricted.
    mask: Option<TokenMask>,
    /// Picks decided by the device's top-k summary (no V logits read back).
    from_top: usize,
}

/// The top a masked decode reads back per step, at least (top-k sampling: at least four times
/// its k): the pick is decided there when enough of it is allowed — greedy, one; top-k, k —
/// else all V logits are read.
const MASKED_TOP: usize = 64;

impl Decoding {
    /// A decode of up to `options.max_tokens` tokens at `pace`.
    pub fn new(options: GenerateOptions, pace: Pace) -> Self {
        let (strategy, ahead) = (None, Ahead::Nothing);
        Self {
            options,
            pace,
            strategy,
            ahead,
            produced: 0,
            eos: false,
            stopped: false,
            mask: None,
            from_top: 0,
        }
    }

    /// Restricts the next pick to the tokens `mask` allows (`None`: any), as a grammar's
    /// constraint does before each token. A decode that is ever masked picks every token on the
    /// host — from the device's top-k summary where it decides, else from all V logits — never
    /// in device-side greedy batches (the mask changes with each token).
    pub fn set_mask(&mut self, mask: Option<TokenMask>) {
        self.mask = mask;
    }

    /// Picks decided by the device's top-k summary, without reading all V logits back.
    pub fn picked_from_top(&self) -> usize {
        self.from_top
    }

    /// Tokens handed out so far.
    pub(crate) fn produced(&self) -> usize {
        self.produced
    }

    /// Whether the last token handed out was the end of text, which ends the decode.
    pub(crate) fn reached_eos(&self) -> bool {
        self.eos
    }

    /// No more tokens: the next [`Runtime::decode_next`] hands out none.
    pub(crate) fn stop(&mut self) {
        self.stopped = true;
    }

    /// Whether no more tokens will be handed out (stopped, the end of text, or `max_tokens`).
    pub(crate) fn is_over(&self) -> bool {
        self.stopped || self.eos || self.produced >= self.options.max_tokens
    }

    /// Tokens still wanted.
    pub(super) fn remaining(&self) -> usize {
        self.options.max_tokens - self.produced
    }
}

impl Runtime {
    /// Generates up to `options.max_tokens` tokens after the history: [`Runtime::decode_next`]
    /// run to the end ([`Pace::ToEnd`]). Each token is fed to the model before `on_token` sees
    /// it; `on_token` returning `false` stops between steps, with the state at the last token
    /// seen, so a later call continues exactly as an uninterrupted run would (with the same
    /// sampler). With `stop_at_eos` the end-of-text token ends it: it stays in the history and
    /// the returned tokens, `on_token` does not see it. When the logits after a token fed are not
    /// finite, it ends with [`Error::NonFiniteOutput`] naming that token's position (it stays in
    /// the history; `on_token` saw it).
    pub async fn generate(
        &mut self,
        id: SessionId,
        sampler: &mut Sampler,
        options: GenerateOptions,
        mut on_token: impl FnMut(u32) -> bool,
    ) -> Result<Vec<u32>> {
        let mut d = Decoding::new(options, Pace::ToEnd);
        let mut out = Vec::new();
        loop {
            let token = match self.decode_next(id, &mut d, sampler).await {
                Ok(Some(t)) => t,
                Ok(None) => break,
                Err(e) => {
                    // What was generated stays; keep its end if the failure allows.
                    let _ = self.end_decoding(id, &mut d).await;
                    return Err(e);
                }
            };
            out.push(token);
            if d.reached_eos() || !on_token(token) {
                break;
            }
            if !d.is_over() {
                crate::platform::yield_now().await;
            }
        }
        self.end_decoding(id, &mut d).await?;
        Ok(out)
    }

    /// The decode loop's one step: the session's next token, fed to the model and in its
    /// history; `None` once `d` is over. The first call makes the session's live state and
    /// logits current ([`Runtime::ensure`]). Logits that are not finite fail the step that
    /// would pick after them: [`Error::NonFiniteOutput`].
    pub async fn decode_next(
        &mut self,
        id: SessionId,
        d: &mut Decoding,
        sampler: &mut Sampler,
    ) -> Result<Option<u32>> {
        if d.is_over() {
            return Ok(None);
        }
        let token = match self.hand_out(id, d)? {
            Some(t) => t,
            None => {
                let strategy = match d.strategy {
                    Some(s) => s,
                    None => *d.strategy.insert(self.strategy(sampler, d.pace, d.mask.is_some())),
                };
                let token = self.pick(id, d, sampler).await?;
                match strategy {
                    Strategy::Host => self.feed(id, d, token).await?,
                    Strategy::Greedy { batch } => self.feed_batch(id, d, token, batch).await?,
                    Strategy::Top { k } => self.feed_top(id, d, token, k).await?,
                }
                token
            }
        };
        d.produced += 1;
        d.eos = d.options.stop_at_eos && self.end_tokens.contains(&token);
        Ok(Some(token))
    }

    /// Ends a decode: no more tokens; what the device did ahead of the history is reconciled
    /// (a batch's tokens not handed out are undone, logits left on the device read back) and
    /// the end of the history is kept as the session's latest prompt-end ([`Runtime::settle`])
    /// and, with a store, written to it (with the pages of its whole blocks), so that the next
    /// turn finds it after a reload or in another tab.
    pub async fn end_decoding(&mut self, id: SessionId, d: &mut Decoding) -> Result<()> {
        d.stop();
        self.catch_up(id, d).await?;
        self.settle(id)?;
        if d.produced() > 0 && self.store.is_some() && self.active == Some(id.0) {
            self.persist(id, &[]).await;
        }
        Ok(())
    }

    /// How `sampler`'s tokens are picked at `pace` on this engine (`masked`: under a mask).
    fn strategy(&self, sampler: &Sampler, pace: Pace, masked: bool) -> Strategy {
        let Some(limits) = self.engine.pick_limits().filter(|_| pace == Pace::ToEnd && self.greedy_batch > 0)
        else {
            return Strategy::Host;
        };
        if masked {
            let k = if sampler.is_plain_greedy() {
                Some(1)
            } else {
                sampler.top_only(self.engine.config().vocab_size)
            };
            return match k {
                Some(k) => Strategy::Top { k: (4 * k).max(MASKED_TOP).min(limits.max_top_k) },
                None => Strategy::Host,
            };
        }
        if sampler.is_plain_greedy() {
            return Strategy::Greedy { batch: self.greedy_batch.min(limits.max_batch) };
        }
        match sampler.top_only(self.engine.config().vocab_size) {
            Some(k) if k <= limits.max_top_k => Strategy::Top { k },
            _ => Strategy::Host,
        }
    }

    /// The next token by `sampler`: the device's pick or top where it has one, else from the
    /// host's logits after the history.
    async fn pick(&mut self, id: SessionId, d: &mut Decoding, sampler: &mut Sampler) -> Result<u32> {
        let history = self.session(id)?.history.tokens();
        let picked = match (&d.ahead, &d.mask) {
            (Ahead::Pick(Some(t)), _) => Some(Ok(*t)),
            (Ahead::Top(Top::Found(top)), None) => sampler.sample_top(top, history),
            (Ahead::Top(Top::Found(top)), Some(mask)) => sampler.sample_top_masked(top, mask, history),
            _ => None,
        };
        if let Some(picked) = picked {
            d.from_top += matches!(d.ahead, Ahead::Top(_)) as usize;
            return picked;
        }
        self.catch_up(id, d).await?;
        self.sample_next(id, sampler, d.mask.as_ref()).await
    }

    /// Feeds `token` on the host: one forward, all V logits read back.
    async fn feed(&mut self, id: SessionId, d: &mut Decoding, token: u32) -> Result<()> {
        d.ahead = Ahead::Nothing;
        let fed = self.engine.forward(&[token], Logits::Last).await;
        let s = self.session_mut(id)?;
        let logits = match fed {
            Ok(l) => l,
            Err(e) => {
                s.live_valid = false;
                return Err(e);
            }
        };
        let boundary = s.history.push(token);
        s.logits = Some(logits);
        s.prefilled += 1;
        // A non-finite state is not kept; the next step (or the settle) reports it.
        if boundary && self.check_logits(id).is_ok() {
            self.block_reached(id)?;
        }
        Ok(())
    }

    /// Makes the session whole on the host: undoes a batch's tokens not handed out (replaying
    /// those that were) and reads back logits left on the device.
    async fn catch_up(&mut self, id: SessionId, d: &mut Decoding) -> Result<()> {
        match std::mem::replace(&mut d.ahead, Ahead::Nothing) {
            Ahead::Nothing => Ok(()),
            Ahead::Batch(b) => self.replay(id, b).await,
            Ahead::Pick(_) | Ahead::Top(_) => {
                let read = match self.engine.device_picks() {
                    Some(device) => device.last_logits().await,
                    None => Err(Error::Internal("logits left on a device the engine lacks".into())),
                };
                let s = self.session_mut(id)?;
                match read {
                    Ok(l) => s.logits = Some(l),
                    Err(e) => {
                        s.live_valid = false;
                        return Err(e);
                    }
                }
                Ok(())
            }
        }
    }

    /// The session's next token by `sampler` (among those `mask` allows), after making its
    /// live state and logits current.
    async fn sample_next(
        &mut self,
        id: SessionId,
        sampler: &mut Sampler,
        mask: Option<&TokenMask>,
    ) -> Result<u32> {
        let s = self.session(id)?;
        if s.history.is_empty() {
            return Err(Error::InvalidInput("generate needs a prompt: append tokens first".into()));
        }
        if !(s.live_valid && s.logits.is_some()) || self.active != Some(id.0) {
            let history = s.history.tokens().to_vec();
            self.ensure(id, &history).await?;
        }
        let logits = self.logits(id)?.ok_or(Error::InvalidInput("no logits after the history".into()))?;
        let history = self.session(id)?.history.tokens();
        match mask {
            None => sampler.sample(logits, history),
            Some(mask) => {
                let mut masked = logits.to_vec();
                mask.apply(&mut masked);
                sampler.sample(&masked, history)
            }
        }
    }

    /// After decoding: keeps the end of the history as the session's latest prompt-end, if the
    /// budget allows (best effort: the previous one stays pinned otherwise), so a regenerate
    /// or the next turn resumes there. Logits that are not finite are not kept:
    /// [`Error::NonFiniteOutput`].
    pub(crate) fn settle(&mut self, id: SessionId) -> Result<()> {
        let s = self.session(id)?;
        if !(s.live_valid && s.logits.is_some()) || self.active != Some(id.0) {
            return Ok(()); // nothing current to keep
        }
        self.check_logits(id)?;
        self.store_end(id)
    }

    /// During decode, the history just reached a block boundary: keep its state if retention
    /// wants it and there is room (best effort).
    pub(super) fn block_reached(&mut self, id: SessionId) -> Result<()> {
        let s = self.sessions.get(&id.0).ok_or(Error::NoSession(id.0))?;
        let ((b, key), len) = (s.history.whole_blocks(), s.history.len());
        let mut hold = self.cache.hold();
        if hold.cache().wants_block(b, &key)
            && let Some(r) = hold.reserve(false, len, s.history.keys())?
        {
            self.engine.save_pages(&r.fresh_pages())?;
            self.engine.save_checkpoint(r.slot())?;
            hold.insert_block(r, key, len);
        }
        Ok(())
    }

    /// After generating: keep the end of the history as the session's latest prompt-end, if the
    /// budget allows (best effort: the previous one stays pinned otherwise).
    fn store_end(&mut self, id: SessionId) -> Result<()> {
        let s = self.sessions.get_mut(&id.0).ok_or(Error::NoSession(id.0))?;
        if self.cache.find_end(&s.history).is_some() {
            return Ok(());
        }
        let logits = s.logits.clone().ok_or_else(|| Error::Internal("no logits after generating".into()))?;
        let mut hold = self.cache.hold();
        let Ok(Some(r)) = hold.reserve(true, s.history.len(), s.history.keys()) else { return Ok(()) };
        self.engine.save_pages(&r.fresh_pages())?;
        self.engine.save_checkpoint(r.slot())?;
        let end = hold.insert_end(r, &s.history, logits);
        drop(hold);
        let old = s.pinned.replace(end);
        self.cache.repin(old, Some(end));
        Ok(())
    }
}
