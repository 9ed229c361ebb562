//! Plain f32 building blocks of the CPU reference, written for clarity first and for
//! auto-vectorisation second (contiguous inner loops, several accumulators).

use crate::model::matrix::bf16_to_f32;
use crate::model::{Matrix, MatrixData};

/// `Σ a[i]·b[i]` with eight independent accumulators so the compiler can vectorise it.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    dot_widening(a, b, |v| v)
}

/// `Σ a[i]·widen(b[i])`: [`dot`] over weights stored narrower than f32, widened as they are
/// read (the same eight accumulators, so the same sums as widening first).
fn dot_widening<T: Copy>(a: &[f32], b: &[T], widen: impl Fn(T) -> f32) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let mut acc = [0.0f32; 8];
    let (a8, a_rest) = a.split_at(a.len() / 8 * 8);
    let (b8, b_rest) = b.split_at(a8.len());
    for (x, y) in a8.chunks_exact(8).zip(b8.chunks_exact(8)) {
        for i in 0..8 {
            acc[i] += x[i] * widen(y[i]);
        }
    }
    let tail: f32 = a_rest.iter().zip(b_rest).map(|(x, &y)| x * widen(y)).sum();
    acc.iter().sum::<f32>() + tail
}

/// `y = x · Wᵀ (+ bias)`: x (T, in), w (out, in), bias (out) → y (T, out). PyTorch's `Linear`.
/// Each row of W is converted to f32 once (if it is stored as f16/bf16) and used for every row
/// of x.
/// A single row of x against a bf16 W (decode) widens each weight inside the dot product instead
/// ([`dot_widening`]): one pass over the weights, no scratch row.
pub fn linear(x: &[f32], w: &Matrix, bias: Option<&[f32]>) -> Vec<f32> {
    let (n_in, n_out) = (w.cols, w.rows);
    let mut y = vec![0.0; x.len() / n_in * n_out];
    if let (MatrixData::BF16(data), true) = (&w.data, x.len() == n_in) {
        for (o, (w_row, y)) in data.chunks_exact(n_in).zip(&mut y).enumerate() {
            *y = dot_widening(x, w_row, bf16_to_f32) + bias.map_or(0.0, |b| b[o]);
        }
        return y;
    }
    let mut scratch = vec![0.0; n_in];
    for o in 0..n_out {
        let w_row = w.row(o, &mut scratch);
        let b = bias.map_or(0.0, |b| b[o]);
        for (t, row) in x.chunks_exact(n_in).enumerate() {
            y[t * n_out + o] = dot(row, w_row) + b;
        }
    }
    y
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
