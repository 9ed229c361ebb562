//! [`Sampler`]: picks the next token from logits — greedy (argmax) at temperature 0, otherwise
//! a draw from softmax(logits / temperature) with a seeded generator, so a run is reproducible.

use rand::{Rng, SeedableRng, rngs::SmallRng};

use crate::cpu::ops::argmax;
use crate::error::{Error, Result};

/// Sampling settings and the generator state.
pub struct Sampler {
    temperature: f32,
    rng: SmallRng,
}

impl Sampler {
    /// `temperature` 0 is greedy; `seed` fixes the draws otherwise.
    pub fn new(temperature: f32, seed: u64) -> Result<Self> {
        if !(temperature.is_finite() && temperature >= 0.0) {
            return Err(Error::InvalidInput(format!("temperature {temperature} must be ≥ 0")));
        }
        Ok(Self { temperature, rng: SmallRng::seed_from_u64(seed) })
    }

    /// Greedy decoding.
    pub fn greedy() -> Self {
        Self { temperature: 0.0, rng: SmallRng::seed_from_u64(0) }
    }

    /// The temperature (0: greedy).
    pub fn temperature(&self) -> f32 {
        self.temperature
    }

    /// The next token id for `logits` (V).
    pub fn sample(&mut self, logits: &[f32]) -> Result<u32> {
        if logits.is_empty() || logits.iter().any(|v| v.is_nan()) {
            return Err(Error::InvalidInput("logits are empty or contain NaN".into()));
        }
        let best = argmax(logits).expect("non-empty") as u32;
        if self.temperature == 0.0 {
            return Ok(best);
        }
        let max = logits[best as usize];
        let weights: Vec<f64> =
            logits.iter().map(|&l| (f64::from(l - max) / f64::from(self.temperature)).exp()).collect();
        let total: f64 = weights.iter().sum();
        let mut target = self.rng.random::<f64>() * total;
        for (i, w) in weights.iter().enumerate() {
            target -= w;
            if target < 0.0 {
                return Ok(i as u32);
            }
        }
        Ok(best)
    }
}
