//! [`Logits`]: which positions' logits a forward call returns (both backends).

/// Which positions' logits a forward call returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logits {
    /// Every position: (T, V).
    All,
    /// Only the last position: (V). What decoding needs; skips T−1 LM-head products.
    Last,
}
