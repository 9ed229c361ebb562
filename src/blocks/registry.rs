//! The registry: every block kind, named once. [`with_kinds`] hands the list to a generating
//! macro: `blocks/mod.rs` makes [`crate::blocks::BlockKind`] and [`crate::blocks::BlockWeights`]
//! and their dispatch to each kind's [`crate::blocks::HostKind`] from it, `blocks/gpu.rs`
//! `GpuBlockWeights` and the dispatch to each kind's `GpuKind` — exhaustive matches, generated,
//! so no code outside a kind's folder picks a kind by name and no match over kinds has a
//! wildcard arm. Each weights value carries its kind's hyper-parameters. Adding a kind: one
//! line here (ARCHITECTURE.md, "Adding a block kind"). The names in the list are resolved
//! where it is expanded: each kind's type is in scope there.

/// Calls macro `$m` with the list of kinds: `Variant(Type)` each, with its doc comment and,
/// for a kind that exists only in some builds (the tests' toy kind), a `#[cfg(…)]`.
macro_rules! with_kinds {
    ($m:ident) => {
        $m! {
        /// A Mamba-1 block (Mamba, Falcon-Mamba, Jamba).
        Mamba1(Mamba1),
        /// A Mamba-2 (SSD) block.
        Mamba2(Mamba2),
        /// Causal (grouped-query) self-attention over a key/value cache.
        Attention(Attention),
        /// A feed-forward network.
        Mlp(Mlp),
        /// A mixture of experts (with shared experts where the model has them).
        Moe(Moe),
        /// Attention and a Mamba-2 mixer side by side (Falcon-H1).
        Parallel(Parallel),
        /// Zamba2's shared transformer block feeding a Mamba-2 mixer.
        Zamba2(Zamba2Layer),
        /// LFM2's gated short convolution.
        ShortConv(ShortConv),
        /// Qwen3.5's Gated DeltaNet.
        DeltaNet(DeltaNet),
        /// The tests' toy kind (`blocks/toy/`): `h ← h + W · rms_norm(h)`.
        #[cfg(test)]
        Toy(Toy),
        }
    };
}

pub(crate) use with_kinds;
