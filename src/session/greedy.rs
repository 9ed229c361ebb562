//! The decode loop's greedy strategy on a device that picks ([`crate::engine::DevicePicks`]):
//! batches of decode steps whose tokens are picked and fed on the device, a few bytes read back
//! per batch instead of V logits per token. The loop still hands the tokens out one at a time,
//! each fed before it is handed out; a decode that ends inside a batch (end of text, the caller
//! stopping, non-finite logits) rewinds to the batch's start and replays the tokens handed out
//! one step each — the same kernels, so the state and logits are the ones a token-by-token run
//! leaves, bit for bit. A batch never crosses a block boundary, so the boundary's checkpoint is
//! the state right after the batch. Logits that are not finite make the device stop picking:
//! the batch hands out the tokens up to the one whose logits they are, and the step after it
//! fails with [`crate::Error::NonFiniteOutput`] (see `session/finite.rs`).

use crate::error::{Error, Result};
use crate::model::Logits;
use crate::session::ahead::{Ahead, Batch};
use crate::session::decode::Decoding;
use crate::session::{Runtime, SessionId};

/// Greedy steps per device submit by default: text arrives every 8 tokens at most.
pub const GREEDY_BATCH: usize = 8;

impl Runtime {
    /// Greedy steps per device submit (0: every token picked on the host from read-back
    /// logits, for top-k sampling too).
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

    /// Feeds `first` and the device's picks after it, up to `batch` steps in one submit (fewer
    /// for the tokens still wanted and the next block boundary), and hands out `first`.
    pub(super) async fn feed_batch(
        &mut self,
        id: SessionId,
        d: &mut Decoding,
        first: u32,
        batch: usize,
    ) -> Result<()> {
        let block = self.cache.config().block_size;
        let len = self.session(id)?.history.len();
        // Within the context's room (at least one step: past it, the step is ContextFull).
        let room = self.engine.max_context().saturating_sub(len).max(1);
        let steps = batch.min(d.remaining()).min(block - len % block).min(room);
        let s = self.session_mut(id)?;
        s.live_valid = false; // until the batch is accounted for
        s.logits = None;
        d.ahead = Ahead::Nothing;
        let mut device = self.engine.device_picks().ok_or_else(no_device)?;
        let picks = device.greedy(first, steps).await?;
        // Fed token i + 1 is picks[i]; after a non-finite pick nothing fed is valid.
        let valid = (picks.len() + 1).min(steps);
        let fed = std::iter::once(first).chain(picks.iter().copied()).take(valid).collect();
        d.ahead = Ahead::Batch(Batch {
            fed,
            handed: 0,
            next: picks.get(steps - 1).copied(),
            exact: valid == steps,
        });
        self.hand_out(id, d)?;
        Ok(())
    }

    /// The next token of a batch being handed out, now in the history; `None` when there is
    /// none. The batch's last token makes the history whole on the device again (keeping the
    /// block boundary it may reach).
    pub(super) fn hand_out(&mut self, id: SessionId, d: &mut Decoding) -> Result<Option<u32>> {
        let Ahead::Batch(b) = &mut d.ahead else { return Ok(None) };
        let Some(&token) = b.fed.get(b.handed) else { return Ok(None) };
        b.handed += 1;
        let (whole, next) = (b.handed == b.fed.len() && b.exact, b.next);
        let block = self.cache.config().block_size;
        let s = self.session_mut(id)?;
        s.history.push(token); // a batch ends at a block boundary at most: checked below
        s.prefilled += 1;
        if whole {
            s.live_valid = true;
            d.ahead = Ahead::Pick(next);
            // Only after finite logits (the device picked) is the state kept.
            if next.is_some() && s.history.len().is_multiple_of(block) {
                self.block_reached(id)?;
            }
        }
        Ok(Some(token))
    }

    /// Back to the start of `b`, and the tokens handed out again, one decode step each: the
    /// state and logits of a token-by-token run.
    pub(super) async fn replay(&mut self, id: SessionId, b: Batch) -> Result<()> {
        self.engine.device_picks().ok_or_else(no_device)?.rewind()?;
        let mut logits = Vec::new();
        for &t in &b.fed[..b.handed] {
            logits = self.engine.forward(&[t], Logits::Last).await?;
        }
        let s = self.session_mut(id)?;
        s.logits = Some(logits);
        s.live_valid = true;
        Ok(())
    }
}

fn no_device() -> Error {
    Error::Internal("a device strategy on an engine that does not pick on the device".into())
}
