//! [`Runtime::generate`]: decoding after a session's history, one token per forward, keeping
//! block boundaries reached on the way and the final state as the session's latest prompt-end.

use crate::error::{Error, Result};
use crate::model::Logits;
use crate::sampling::Sampler;
use crate::session::{GenerateOptions, Runtime, SessionId};

impl Runtime {
    /// Generates up to `options.max_tokens` tokens after the history. Each token is fed to the
    /// model before `on_token` sees it; `on_token` returning `false` stops between steps, with
    /// the state at the last emitted token, so a later call continues exactly as an
    /// uninterrupted run would (with the same sampler). When the logits after a token fed are
    /// not finite, it ends with [`Error::NonFiniteOutput`] naming that token's position (it
    /// stays in the history; `on_token` saw it).
    pub async fn generate(
        &mut self,
        id: SessionId,
        sampler: &mut Sampler,
        options: GenerateOptions,
        mut on_token: impl FnMut(u32) -> bool,
    ) -> Result<Vec<u32>> {
        if options.max_tokens == 0 {
            self.settle(id)?;
            return Ok(Vec::new());
        }
        // On the GPU the picking moves to the device where the sampler allows.
        if let Some(limits) = self.engine.pick_limits().filter(|_| self.greedy_batch > 0) {
            if sampler.is_plain_greedy() {
                return self.generate_greedy(id, options, on_token).await;
            }
            let vocab = self.engine.config().vocab_size;
            if let Some(k) = sampler.top_only(vocab).filter(|&k| k <= limits.max_top_k) {
                return self.generate_top(id, sampler, k, options, on_token).await;
            }
        }
        let eos = self.engine.config().eos_token_id;
        let mut out = Vec::new();
        while out.len() < options.max_tokens {
            let token = match self.step(id, sampler).await {
                Ok(t) => t,
                Err(e) => {
                    // What was generated stays; keep its end if the failure allows.
                    let _ = self.settle(id);
                    return Err(e);
                }
            };
            out.push(token);
            if (options.stop_at_eos && Some(token) == eos) || !on_token(token) {
                break;
            }
            crate::platform::yield_now().await;
        }
        self.settle(id)?;
        Ok(out)
    }

    /// One decode step, what [`Runtime::generate`] does per token: samples the next token
    /// after the history, feeds it and keeps block boundaries reached. Call
    /// [`Runtime::settle`] after the last step (a stream does, when it ends).
    pub async fn step(&mut self, id: SessionId, sampler: &mut Sampler) -> Result<u32> {
        let token = self.sample_next(id, sampler).await?;
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
        Ok(token)
    }

    /// The session's next token by `sampler`, after making its live state and logits current.
    pub(super) async fn sample_next(&mut self, id: SessionId, sampler: &mut Sampler) -> Result<u32> {
        let s = self.session(id)?;
        if s.history.is_empty() {
            return Err(Error::InvalidInput("generate needs a prompt: append tokens first".into()));
        }
        if !(s.live_valid && s.logits.is_some()) || self.active != Some(id.0) {
            let history = s.history.tokens().to_vec();
            self.ensure(id, &history).await?;
        }
        let logits = self.logits(id)?.ok_or(Error::InvalidInput("no logits after the history".into()))?;
        sampler.sample(logits, self.session(id)?.history.tokens())
    }

    /// After decoding: keeps the end of the history as the session's latest prompt-end, if the
    /// budget allows (best effort: the previous one stays pinned otherwise), so a regenerate
    /// or the next turn resumes there. Logits that are not finite are not kept:
    /// [`Error::NonFiniteOutput`].
    pub fn settle(&mut self, id: SessionId) -> Result<()> {
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
        let s = self.session(id)?;
        let ((b, key), len) = (s.history.whole_blocks(), s.history.len());
        let mut hold = self.cache.hold();
        if hold.cache().wants_block(b, &key)
            && let Some(r) = hold.reserve(false)?
        {
            self.engine.save_state(r.slot())?;
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
        let Ok(Some(r)) = hold.reserve(true) else { return Ok(()) };
        self.engine.save_state(r.slot())?;
        let end = hold.insert_end(r, &s.history, logits);
        drop(hold);
        let old = s.pinned.replace(end);
        self.cache.repin(old, Some(end));
        Ok(())
    }
}
