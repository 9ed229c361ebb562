//! The cache's settings ([`CacheConfig`], [`Retention`]) — one set of defaults for the JS API,
//! the CLI and Rust — and its counters ([`CacheStats`]).

use crate::model::Config;
use crate::model::State;

/// Which block boundaries are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retention {
    /// Every block boundary.
    Dense,
    /// Every `k`-th block boundary (b·B with b a multiple of k), plus prompt-ends.
    Sparse(usize),
}

impl Retention {
    /// Whether the boundary after block `b` (b ≥ 1) is kept.
    pub(crate) fn keeps(self, b: usize) -> bool {
        match self {
            Retention::Dense => true,
            Retention::Sparse(k) => b.is_multiple_of(k.max(1)),
        }
    }
}

/// Cache settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheConfig {
    /// B: tokens per block; checkpoints sit at multiples of B (and at prompt ends).
    pub block_size: usize,
    /// Which boundaries are kept.
    pub retention: Retention,
    /// Most bytes the cached states and logits may take.
    pub budget_bytes: u64,
}

impl Default for CacheConfig {
    /// Blocks of 64 tokens, every boundary kept, a 64 MiB budget: the defaults of the JS API,
    /// the CLI and Rust alike. For a given model use [`CacheConfig::for_model`], which raises
    /// the budget where its states are large.
    fn default() -> Self {
        Self { block_size: 64, retention: Retention::Dense, budget_bytes: 64 << 20 }
    }
}

impl CacheConfig {
    /// The defaults for model `c`: as [`CacheConfig::default`], with the budget raised to four
    /// checkpoints (state and logits) where 64 MiB holds fewer — Mamba-2's states are large
    /// (52 MB for the 370M shape, 172 MB for 2.7B), and a budget under two would refuse the
    /// model outright.
    pub fn for_model(c: &Config) -> Self {
        let default = Self::default();
        let checkpoint = State::bytes(c) as u64 + 4 * c.vocab_size as u64;
        Self { budget_bytes: default.budget_bytes.max(4 * checkpoint), ..default }
    }
}

/// Counters over the cache's life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Entries held now.
    pub(crate) entries: usize,
    /// Bytes they take.
    pub bytes_used: u64,
    /// The budget.
    pub(crate) budget_bytes: u64,
    /// Entries evicted so far.
    pub evictions: u64,
    /// Bytes reserved for checkpoints a call is computing (0 between calls: a failed call gives
    /// its reservations back).
    pub bytes_reserved: u64,
    /// Of `bytes_used`, the key/value pages' (pages mode; each page counted once).
    pub page_bytes: u64,
    /// Pages alive (pages mode).
    pub pages: usize,
}
