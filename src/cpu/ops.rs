//! Plain f32 building blocks of the CPU reference, written for clarity first and for
//! auto-vectorisation second (contiguous inner loops, several accumulators). The matrix
//! products are in [`crate::cpu::matmul`].

use crate::cpu::matmul::dot_widening;

/// `Σ a[i]·b[i]` with eight independent accumulators so the compiler can vectorise it.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    dot_widening(a, b, |v| v)
}

/// RMSNorm of each row of x (T, d): `x / sqrt(mean(x²) + eps) · weight`.
pub fn rms_norm(x: &[f32], weight: &[f32], eps: f32) -> Vec<f32> {
    let d = weight.len();
    let mut y = Vec::with_capacity(x.len());
    for row in x.chunks_exact(d) {
        let scale = 1.0 / (dot(row, row) / d as f32 + eps).sqrt();
        y.extend(row.iter().zip(weight).map(|(v, g)| v * scale * g));
    }
    y
}

/// `x · σ(x)`.
pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// `log(1 + eˣ)`, returning x itself above 20 as PyTorch's `softplus` does.
pub fn softplus(x: f32) -> f32 {
    if x > 20.0 { x } else { x.exp().ln_1p() }
}

/// Index of the largest value (the first one on ties); `None` for an empty slice.
pub fn argmax(values: &[f32]) -> Option<usize> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &v) in values.iter().enumerate() {
        if best.is_none_or(|(_, b)| v > b) {
            best = Some((i, v));
        }
    }
    best.map(|(i, _)| i)
}
