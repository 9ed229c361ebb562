//! Perplexity of a model over a text's tokens, with llama.cpp's `llama-perplexity` convention:
//! the tokens are cut into windows of `context` (the remainder left out), each window runs from
//! a fresh state, and only its second half is scored — every scored token predicted after at
//! least `context / 2` tokens of its window — so figures compare with llama.cpp's on the same
//! windows. Perplexity is exp of the mean negative log-likelihood (computed in f64 from the
//! f32 logits); its uncertainty is llama.cpp's: perplexity × the standard error of that mean.

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::model::Logits;

/// Tokens a window is fed in per forward call (bounds the logits held at once: rows × V).
const PIECE: usize = 256;

/// Negative log-likelihoods summed so far.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Nll {
    sum: f64,
    sum_sq: f64,
    count: usize,
}

impl Nll {
    /// Adds the prediction of `next` by one row of logits (V): log Σ exp(logits) − logits[next].
    pub(crate) fn add(&mut self, row: &[f32], next: u32) {
        let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
        let log_sum = row.iter().map(|&v| (f64::from(v) - max).exp()).sum::<f64>().ln() + max;
        let nll = log_sum - f64::from(row[next as usize]);
        self.sum += nll;
        self.sum_sq += nll * nll;
        self.count += 1;
    }

    /// Tokens scored.
    pub fn count(&self) -> usize {
        self.count
    }

    /// exp of the mean negative log-likelihood (NaN before any token).
    pub fn perplexity(&self) -> f64 {
        (self.sum / self.count as f64).exp()
    }

    /// The perplexity times the standard error of the mean negative log-likelihood (0 with
    /// fewer than two tokens).
    pub fn uncertainty(&self) -> f64 {
        if self.count < 2 {
            return 0.0;
        }
        let n = self.count as f64;
        let mean = self.sum / n;
        let variance = (self.sum_sq / n - mean * mean).max(0.0);
        self.perplexity() * (variance / (n - 1.0)).sqrt()
    }
}

/// What [`perplexity`] measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// Over every scored token.
    pub nll: Nll,
    /// Windows run.
    pub windows: usize,
    /// Tokens per window.
    pub context: usize,
    /// Each window's own perplexity, in order.
    pub per_window: Vec<f64>,
}

/// Perplexity of `engine` over `tokens` in windows of `context` tokens (see the module), calling
/// `on_window(done, windows, running perplexity)` after each window. Fails for a context under
/// 4 tokens, or tokens for less than one window.
pub async fn perplexity(
    engine: &mut Engine,
    tokens: &[u32],
    context: usize,
    mut on_window: impl FnMut(usize, usize, f64),
) -> Result<Report> {
    if context < 4 {
        return Err(Error::InvalidInput(format!("a perplexity window of {context} tokens: use at least 4")));
    }
    let windows = tokens.len() / context;
    if windows == 0 {
        return Err(Error::InvalidInput(format!(
            "the text has {} tokens: fewer than one window of {context}",
            tokens.len()
        )));
    }
    let vocab = engine.config().vocab_size;
    let first = context / 2; // rows from here predict the scored tokens first + 1 ..
    let mut all = Nll::default();
    let mut per_window = Vec::with_capacity(windows);
    for w in 0..windows {
        let window = &tokens[w * context..(w + 1) * context];
        engine.reset();
        let mut own = Nll::default();
        // Row j's logits predict token j + 1; the last token predicts nothing in the window.
        let fed = &window[..context - 1];
        for (p, piece) in fed.chunks(PIECE).enumerate() {
            let logits = engine.forward(piece, Logits::All).await?;
            for (r, row) in logits.chunks_exact(vocab).enumerate() {
                let j = p * PIECE + r;
                if j >= first {
                    own.add(row, window[j + 1]);
                }
            }
        }
        all.sum += own.sum;
        all.sum_sq += own.sum_sq;
        all.count += own.count;
        per_window.push(own.perplexity());
        on_window(w + 1, windows, all.perplexity());
    }
    Ok(Report { nll: all, windows, context, per_window })
}
