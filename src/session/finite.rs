//! Non-finite outputs: a model whose weights are all finite (the loader checks them) can still
//! overflow f32 at run time and compute NaN or ±Inf logits. That is the model's failure on this
//! input, not the caller's, and it is reported as [`Error::NonFiniteOutput`] naming the position
//! — never as sampled tokens, never as silent NaN from [`Runtime::logits`].
//!
//! Every logit must be finite: NaN has no order, and an infinite logit is an overflow too (a
//! model with finite weights and activations has finite logits; HF would pick a +Inf by argmax
//! but its softmax is NaN, so greedy and sampling would disagree).
//!
//! What is checked: the logits each forward pass leaves — on the host copy where the runtime
//! reads them anyway (a prefill, a CPU or read-back decode step, the final settle), and on the
//! GPU by the kernels that already read every logit (`argmax` in greedy batches, `top_k` for
//! top-k sampling), whose verdict comes back with the picks: no extra readback per token.
//! The state is not checked separately: the logits after a token are computed from the state
//! after it (y = C·h + D·u per layer, the conv window's inputs through u), and NaN or ±Inf pass
//! through every sum, product and RMSNorm on the way (RMSNorm of an infinite entry is 0·∞ =
//! NaN), so a non-finite state shows in the logits of the same position, and in every later
//! one (the recurrence keeps it: a·∞, 0·∞ and NaN stay non-finite).
//!
//! What the session holds after one: the tokens fed, the one at the error's position included
//! (as after a stop or an abort), and the state and logits after them. `logits()`, `generate`
//! and an `append`/`rewind`/`edit` to that same history fail the same way until the history
//! changes; a rewind or edit to an earlier position resumes from the cache as usual. Nothing
//! computed with non-finite logits is kept in the checkpoint cache (not the prompt-end, not
//! the block checkpoints captured on the way: only the last position's logits are known, so
//! the overflow may have begun anywhere in the call), and the session's previous prompt-end
//! stays pinned.

use crate::error::{Error, Result};
use crate::session::{Runtime, SessionId};

/// The error for logits after the first `len` tokens of a history (the token at `len − 1`).
pub(super) fn non_finite(len: usize) -> Error {
    Error::NonFiniteOutput { position: len.saturating_sub(1) as u64, what: "logits".into() }
}

/// Whether every one of `logits` is finite.
pub(super) fn all(logits: &[f32]) -> bool {
    logits.iter().all(|v| v.is_finite())
}

/// Fails with [`Error::NonFiniteOutput`] unless every one of `logits` (after the first `len`
/// tokens of a history) is finite.
pub(super) fn check(logits: &[f32], len: usize) -> Result<()> {
    if all(logits) { Ok(()) } else { Err(non_finite(len)) }
}

impl Runtime {
    /// Fails with [`Error::NonFiniteOutput`] when the session's last logits are known and not
    /// all finite.
    pub(super) fn check_logits(&self, id: SessionId) -> Result<()> {
        let s = self.session(id)?;
        s.logits.as_deref().map_or(Ok(()), |l| check(l, s.history.len()))
    }
}
