//! The selective scan's step in plain loops: the portable version (where no SIMD version
//! runs) and the last entries of the SIMD versions (`cpu/avx2.rs`, `cpu/simd128.rs`), fewer than
//! a vector. Below those files, which the dispatcher in [`crate::cpu::ops`] calls.

use super::exp::exp;

/// [`crate::cpu::ops::scan_step`] as plain loops, eight entries at a time with [`exp`] so that
/// the compiler can vectorise it.
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
pub(super) fn scan_step(h: &mut [f32], a: &[f32], b: &[f32], c: &[f32], dt: f32, dt_u: f32) -> f32 {
    let n8 = h.len() / 8 * 8;
    let mut acc = [0.0f32; 8];
    let (h8, h_rest) = h.split_at_mut(n8);
    for (j, h) in h8.chunks_exact_mut(8).enumerate() {
        let s = j * 8;
        let (a, b, c) = (&a[s..s + 8], &b[s..s + 8], &c[s..s + 8]);
        for i in 0..8 {
            h[i] = exp(dt * a[i]) * h[i] + dt_u * b[i];
            acc[i] += h[i] * c[i];
        }
    }
    acc.iter().sum::<f32>() + scan_tail(h_rest, &a[n8..], &b[n8..], &c[n8..], dt, dt_u)
}

/// [`crate::cpu::ops::scan_step`] entry by entry (the SIMD versions' last entries, fewer than a vector).
pub(super) fn scan_tail(h: &mut [f32], a: &[f32], b: &[f32], c: &[f32], dt: f32, dt_u: f32) -> f32 {
    let mut sum = 0.0;
    for (i, h) in h.iter_mut().enumerate() {
        *h = exp(dt * a[i]) * *h + dt_u * b[i];
        sum += *h * c[i];
    }
    sum
}
