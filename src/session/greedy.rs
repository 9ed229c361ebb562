//! Greedy generation on the GPU: batches of decode steps whose tokens are picked and fed on the
//! GPU ([`crate::engine::DevicePicks::greedy`]), a few bytes read back per batch instead of V logits per
//! token. Tokens still reach `on_token` one at a time, fed before it sees them; a stop inside a
//! batch (end of text, `on_token` returning false, non-finite logits) rewinds to the batch's
//! start and replays the kept tokens one step each — the same kernels, so the state and logits
//! are the ones a token-by-token run leaves, bit for bit. A batch never crosses a block
//! boundary, so the boundary's checkpoint is the state right after the batch. Logits that are
//! not finite make `argmax` pick `NON_FINITE_PICK`: the batch keeps the tokens up to the one
//! whose logits they are, and generation ends with [`Error::NonFiniteOutput`] (see
//! `session/finite.rs`).

use crate::engine::DevicePicks;
use crate::error::{Error, Result};
use crate::model::Logits;
use crate::sampling::Sampler;
use crate::session::{GenerateOptions, Runtime, SessionId, finite};

/// Greedy steps per GPU submit by default: text arrives every 8 tokens at most.
pub const GREEDY_BATCH: usize = 8;

impl Runtime {
    /// Greedy steps per GPU submit (0: every token picked on the CPU from read-back logits,
    /// for top-k sampling too).
    pub fn greedy_batch(&self) -> usize {
        self.greedy_batch
    }

    /// Sets the greedy steps per device submit, at most the engine's
    /// [`crate::engine::PickLimits::max_batch`] (any number where the engine does not pick on
    /// the device; it then has no effect); 0 turns picking on the device off, for top-k
    /// sampling too.
    pub fn set_greedy_batch(&mut self, steps: usize) -> Result<()> {
        if let Some(limits) = self.engine.pick_limits()
            && steps > limits.max_batch
        {
            return Err(Error::InvalidInput(format!(
                "greedy batches hold at most {} steps, not {steps}",
                limits.max_batch
            )));
        }
        self.greedy_batch = steps;
        Ok(())
    }

    /// The engine's picking on the device, which the device paths need.
    pub(super) fn device(&mut self) -> Result<DevicePicks<'_>> {
        self.engine.device_picks().ok_or_else(|| {
            Error::Internal("a device path on an engine that does not pick on the device".into())
        })
    }

    /// [`Runtime::generate`] (`max_tokens` ≥ 1) for a plain greedy sampler on the GPU engine.
    pub(super) async fn generate_greedy(
        &mut self,
        id: SessionId,
        options: GenerateOptions,
        mut on_token: impl FnMut(u32) -> bool,
    ) -> Result<Vec<u32>> {
        let mut out = Vec::new();
        let eos = self.engine.config().eos_token_id;
        let block = self.cache.config().block_size;
        let mut next = self.sample_next(id, &mut Sampler::greedy()).await?;
        let non_finite = loop {
            let len = self.session(id)?.history.len();
            let steps = self.greedy_batch.min(options.max_tokens - out.len()).min(block - len % block);
            let s = self.session_mut(id)?;
            s.live_valid = false; // until the batch is accounted for
            s.logits = None;
            let picks = self.device()?.greedy(next, steps).await?;
            // Fed token i + 1 is picks[i]; after a non-finite pick nothing fed is valid.
            let valid = (picks.len() + 1).min(steps);
            let fed: Vec<u32> = std::iter::once(next).chain(picks.iter().copied()).take(valid).collect();
            let (mut kept, mut stop) = (0, false);
            for &t in &fed {
                kept += 1;
                let s = self.session_mut(id)?;
                s.history.push(t); // a batch ends at a block boundary: checked below
                s.prefilled += 1;
                out.push(t);
                if (options.stop_at_eos && Some(t) == eos) || !on_token(t) {
                    stop = true;
                    break;
                }
                if kept < fed.len() {
                    crate::platform::yield_now().await;
                }
            }
            // Kept up to the token whose logits the device found not finite.
            let non_finite = picks.len() < steps && kept == fed.len();
            if kept < steps {
                // Back to the batch's start; the kept tokens again, one decode step each.
                self.device()?.rewind()?;
                let mut logits = Vec::new();
                for &t in &fed[..kept] {
                    logits = self.engine.forward(&[t], Logits::Last).await?;
                }
                self.session_mut(id)?.logits = Some(logits);
            }
            self.session_mut(id)?.live_valid = true;
            if self.session(id)?.history.len().is_multiple_of(block) && !non_finite {
                self.block_reached(id)?;
            }
            if stop || non_finite || out.len() == options.max_tokens {
                break non_finite;
            }
            next = picks[steps - 1];
            crate::platform::yield_now().await;
        };
        // Non-finite logits are refused by the settle, on the host copy it reads anyway; the
        // device's verdict stands either way.
        self.settle_from_device(id).await?;
        if non_finite {
            return Err(finite::non_finite(self.session(id)?.history.len()));
        }
        Ok(out)
    }

    /// After a run whose last logits may still be on the GPU only: reads them (once) and
    /// keeps the end of the history as the session's prompt-end ([`Runtime::settle`]).
    pub(super) async fn settle_from_device(&mut self, id: SessionId) -> Result<()> {
        if self.session(id)?.logits.is_none() {
            let logits = self.device()?.last_logits().await;
            let s = self.session_mut(id)?;
            match logits {
                Ok(l) => s.logits = Some(l),
                Err(e) => {
                    s.live_valid = false;
                    return Err(e);
                }
            }
        }
        self.settle(id)
    }
}
