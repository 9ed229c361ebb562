//! [`Sampler`]: picks the next token from logits, as Hugging Face transformers' `generate`
//! does: the repetition penalty over the history, then temperature, top-k and top-p, then a
//! draw from softmax of what is left — greedy (argmax after the penalty) at temperature 0.
//! The generator is ChaCha8 seeded by the caller, the same stream on every platform (native and
//! wasm32), so a seed gives the same tokens on the CPU and the GPU backends, in the browser and
//! natively (up to the backends' logits agreeing, ~1e-5). [`StopStrings`] ends generation at
//! any of a list of strings, holding back text that may be the start of one.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::cpu::ops::{argmax, softmax};
use crate::error::{Error, Result};

/// How to pick tokens. The default is greedy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplingOptions {
    /// 0: greedy; otherwise the logits are divided by it before the draw.
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens (0: all).
    pub top_k: usize,
    /// Keep the most likely tokens whose probabilities add up to `top_p` (1: all).
    pub top_p: f32,
    /// CTRL's repetition penalty over every token in the history (1: none): a positive logit is
    /// divided by it, a negative one multiplied.
    pub repetition_penalty: f32,
}

impl Default for SamplingOptions {
    fn default() -> Self {
        Self { temperature: 0.0, top_k: 0, top_p: 1.0, repetition_penalty: 1.0 }
    }
}

impl SamplingOptions {
    /// Fails unless every setting is in range.
    pub(crate) fn check(&self) -> Result<()> {
        let bad = |what: String| Err(Error::InvalidInput(what));
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return bad(format!("temperature {} must be a finite number ≥ 0", self.temperature));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad(format!("top_p {} must be in (0, 1]", self.top_p));
        }
        if !(self.repetition_penalty.is_finite() && self.repetition_penalty > 0.0) {
            return bad(format!(
                "repetition_penalty {} must be a finite number > 0",
                self.repetition_penalty
            ));
        }
        Ok(())
    }
}

/// The top of a logits vector (V): every logit at least as large as the k-th largest (ties
/// included) and the largest logit below them — what the GPU reads back for top-k sampling
/// instead of all V logits (`shaders/top_k.wgsl`).
#[derive(Clone, Debug, PartialEq)]
pub struct LogitsTop {
    /// V.
    pub vocab: usize,
    /// (index, logit), ascending by index.
    pub entries: Vec<(u32, f32)>,
    /// The largest logit below the k-th largest, if any.
    pub below: Option<f32>,
}

impl LogitsTop {
    /// All V logits as the top stands for them: its entries, −∞ elsewhere (`None` when an
    /// entry's index is past V).
    fn logits(&self) -> Option<Vec<f32>> {
        let mut logits = vec![f32::NEG_INFINITY; self.vocab];
        for &(i, v) in &self.entries {
            *logits.get_mut(i as usize)? = v;
        }
        Some(logits)
    }
}

/// The tokens that may come next (a grammar's mask): bit `t % 32` of word `t / 32` says
/// whether token `t` may — llguidance's layout. A masked token's logit counts as −∞.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TokenMask {
    /// The bits, (⌈V/32⌉).
    pub words: Vec<u32>,
}

impl TokenMask {
    /// Whether `token` may come next.
    pub fn allows(&self, token: u32) -> bool {
        self.words.get(token as usize / 32).is_some_and(|w| w >> (token % 32) & 1 == 1)
    }

    /// Sets the logits of the tokens that may not come next to −∞.
    pub(crate) fn apply(&self, logits: &mut [f32]) {
        for (t, l) in logits.iter_mut().enumerate() {
            if !self.allows(t as u32) {
                *l = f32::NEG_INFINITY;
            }
        }
    }

    /// The top of the masked logits, from the top of all of them: the entries that may come
    /// next (every one still at least the k-th largest logit) and the same bound below (no
    /// logit outside the top, masked or not, passes it).
    pub(crate) fn top(&self, top: &LogitsTop) -> LogitsTop {
        let entries = top.entries.iter().copied().filter(|&(t, _)| self.allows(t)).collect();
        LogitsTop { vocab: top.vocab, entries, below: top.below }
    }
}

/// Sampling settings and the generator state.
#[derive(Clone)]
pub struct Sampler {
    options: SamplingOptions,
    rng: ChaCha8Rng,
}

impl Sampler {
    /// A sampler with `options` whose draws are fixed by `seed`.
    pub fn new(options: SamplingOptions, seed: u64) -> Result<Self> {
        options.check()?;
        Ok(Self { options, rng: ChaCha8Rng::seed_from_u64(seed) })
    }

    /// Greedy decoding.
    pub fn greedy() -> Self {
        Self { options: SamplingOptions::default(), rng: ChaCha8Rng::seed_from_u64(0) }
    }

    /// Whether every pick is the plain argmax of the logits (temperature 0, no repetition
    /// penalty): what the GPU can pick by itself.
    pub(crate) fn is_plain_greedy(&self) -> bool {
        self.options.temperature == 0.0 && self.options.repetition_penalty == 1.0
    }

    /// The `k` of a sampler whose draws depend on the top `k` logits only (temperature > 0,
    /// 0 < top_k < `vocab`, no repetition penalty): what [`Sampler::sample_top`] serves.
    pub fn top_only(&self, vocab: usize) -> Option<usize> {
        let o = &self.options;
        (o.temperature > 0.0 && o.repetition_penalty == 1.0 && o.top_k > 0 && o.top_k < vocab)
            .then_some(o.top_k)
    }

    /// What [`Sampler::sample`] draws from the whole logits, drawn from their top (the same
    /// token and generator state, bit for bit); `None` when the top cannot decide it — fewer
    /// than k entries, or the temperature rounding a lower logit onto the k-th, so top-k would
    /// keep it too — and the caller must pass all the logits to `sample`.
    pub fn sample_top(&mut self, top: &LogitsTop, history: &[u32]) -> Option<Result<u32>> {
        let k = self.top_only(top.vocab)?;
        if top.entries.len() < k {
            return None;
        }
        let mut values: Vec<f32> = top.entries.iter().map(|e| e.1).collect();
        values.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a));
        let t = self.options.temperature;
        if let Some(below) = top.below
            && below / t >= values[k - 1] / t
        {
            return None;
        }
        Some(self.sample(&top.logits()?, history))
    }

    /// [`Sampler::sample_top`] for the logits under `mask`: what [`Sampler::sample`] draws
    /// from all V logits with the masked ones at −∞, or `None` when the top cannot decide it
    /// (greedy: no token of the top may come next).
    pub(crate) fn sample_top_masked(
        &mut self,
        top: &LogitsTop,
        mask: &TokenMask,
        history: &[u32],
    ) -> Option<Result<u32>> {
        let masked = mask.top(top);
        if !self.is_plain_greedy() {
            return self.sample_top(&masked, history);
        }
        // The largest allowed logit of the top is the largest allowed of all (ties included:
        // the top holds every logit equal to its k-th).
        if masked.entries.is_empty() {
            return None;
        }
        Some(self.sample(&masked.logits()?, history))
    }

    /// The settings.
    pub fn options(&self) -> SamplingOptions {
        self.options
    }

    /// The scores the draw is made from, (V): `logits` after the repetition penalty over
    /// `history` and (unless greedy) temperature, top-k and top-p, in HF's order; filtered
    /// tokens are −∞. What HF's logits processors give (tests/sampling.rs holds us to them).
    pub fn scores(&self, logits: &[f32], history: &[u32]) -> Vec<f32> {
        let o = &self.options;
        let mut s = logits.to_vec();
        if o.repetition_penalty != 1.0 {
            let v = s.len();
            let mut seen = vec![false; v];
            for &t in history.iter().filter(|&&t| (t as usize) < v) {
                if !std::mem::replace(&mut seen[t as usize], true) {
                    let v = &mut s[t as usize];
                    *v = if *v < 0.0 { *v * o.repetition_penalty } else { *v / o.repetition_penalty };
                }
            }
        }
        if o.temperature == 0.0 {
            return s;
        }
        if o.temperature != 1.0 {
            s.iter_mut().for_each(|v| *v /= o.temperature);
        }
        if o.top_k > 0 && o.top_k < s.len() {
            // Keep every token at least as likely as the k-th (ties included, as torch.topk).
            let mut sorted = s.clone();
            let (_, &mut kth, _) = sorted.select_nth_unstable_by(o.top_k - 1, |a, b| b.total_cmp(a));
            s.iter_mut().filter(|v| **v < kth).for_each(|v| *v = f32::NEG_INFINITY);
        }
        if o.top_p < 1.0 {
            // Ascending; drop the tokens whose cumulative probability stays ≤ 1 − top_p, always
            // keeping the most likely one.
            let mut order: Vec<usize> = (0..s.len()).collect();
            order.sort_by(|&a, &b| s[a].total_cmp(&s[b]));
            let probs = softmax(&order.iter().map(|&i| s[i]).collect::<Vec<_>>());
            let mut cumulative = 0.0f32;
            for (rank, &i) in order.iter().enumerate() {
                cumulative += probs[rank];
                if cumulative <= 1.0 - o.top_p && rank + 1 < order.len() {
                    s[i] = f32::NEG_INFINITY;
                }
            }
        }
        s
    }

    /// The next token id for `logits` (V) after `history`.
    pub fn sample(&mut self, logits: &[f32], history: &[u32]) -> Result<u32> {
        if logits.is_empty() || logits.iter().any(|v| v.is_nan()) {
            return Err(Error::InvalidInput("logits are empty or contain NaN".into()));
        }
        let scores = self.scores(logits, history);
        let best = argmax(&scores).expect("non-empty") as u32;
        if self.options.temperature == 0.0 {
            return Ok(best);
        }
        let probs = softmax(&scores);
        let mut target = self.rng.random::<f64>();
        for (i, &p) in probs.iter().enumerate() {
            target -= f64::from(p);
            if target < 0.0 {
                return Ok(i as u32);
            }
        }
        Ok(best)
    }
}

/// Ends generated text at the first of a list of stop strings: [`StopStrings::push`] takes each
/// decoded piece and returns what may be shown now — holding back a tail that could still
/// become a stop string — and whether a stop string was reached (the text before it is all that
/// is shown; the stop string itself is not).
#[derive(Clone, Debug, Default)]
pub struct StopStrings {
    stops: Vec<String>,
    held: String,
}

impl StopStrings {
    /// Stops at any of `stops` (empty strings are refused).
    pub fn new(stops: Vec<String>) -> Result<Self> {
        if stops.iter().any(String::is_empty) {
            return Err(Error::InvalidInput("a stop string must not be empty".into()));
        }
        Ok(Self { stops, held: String::new() })
    }

    /// Adds `piece`; returns (text to show now, whether a stop string was reached).
    pub fn push(&mut self, piece: &str) -> (String, bool) {
        self.held.push_str(piece);
        if let Some(at) = self.stops.iter().filter_map(|s| self.held.find(s.as_str())).min() {
            let shown = self.held[..at].to_string();
            self.held.clear();
            return (shown, true);
        }
        // The longest tail of the held text that is a proper prefix of a stop string waits.
        let keep = (1..=self.held.len())
            .rev()
            .filter(|&n| self.held.is_char_boundary(self.held.len() - n))
            .find(|&n| {
                self.stops.iter().any(|s| s.len() > n && s.starts_with(&self.held[self.held.len() - n..]))
            })
            .unwrap_or(0);
        let shown = self.held[..self.held.len() - keep].to_string();
        self.held.drain(..self.held.len() - keep);
        (shown, false)
    }

    /// What is still held back, at the end of a generation that reached no stop string.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }
}
