//! `linear`: PyTorch's `Linear` on the CPU, `y = x · Wᵀ (+ bias)`, the products that take most
//! of a forward pass's time. Two shapes, two methods:
//!
//! - **Many rows of x** (a prefill): a blocked GEMM, `matrixmultiply`'s `sgemm` — packed panels
//!   and a register-tiled micro-kernel (AVX/FMA or SSE2 natively, chosen at run time; SIMD128 in
//!   wasm32 built with `+simd128`). Weights stored as f16/bf16 are widened into a scratch
//!   panel of up to 4 MiB first.
//! - **One row of x** (a decode step): a GEMV, memory-bound — every weight is read once,
//!   widened in registers as it is read (no scratch row), [`DOT_ROWS`] rows at a time against one
//!   pass over x: AVX2/FMA/F16C intrinsics natively where the CPU has them (`cpu/avx2.rs`, eight
//!   lanes of accumulators per row), SIMD128 intrinsics in wasm (`cpu/simd128.rs`, four lanes
//!   per row), else a portable loop.
//!
//! Both sum in f32; the order differs between them (and from a plain loop) by rounding only.
//! On the model's threads the GEMV splits its output rows and the GEMM its output columns: each
//! output is the same sum at any thread count.

use crate::cpu::ops::dot_widening;
use crate::cpu::threads::{chunk_len, for_chunks, map_range, min_elements};
use crate::model::matrix::{bf16_to_f32, f16_to_f32};
use crate::model::{Matrix, MatrixData};

/// Weights widened per GEMM panel when W is stored as f16/bf16 (4 MiB of f32): each `sgemm`
/// call packs all of x again, so panels must be large for that to stay cheap (64-row panels
/// ran a bf16 130M prefill at a third of the f32 speed), and bounded so the scratch stays small
/// beside a big vocabulary's LM head.
const PANEL_ELEMENTS: usize = 1 << 20;

/// `y = x · Wᵀ (+ bias)`: x (T, in), w (out, in), bias (out) → y (T, out).
pub fn linear(x: &[f32], w: &Matrix, bias: Option<&[f32]>) -> Vec<f32> {
    let (n_in, n_out) = (w.cols, w.rows);
    let t = x.len() / n_in;
    // y starts as the bias of each output (the GEMM adds into it)
    let mut y = match bias {
        Some(b) => b.repeat(t),
        None => vec![0.0; t * n_out],
    };
    if t == 1 {
        match &w.data {
            MatrixData::F32(d) => gemv(x, d, &mut y, |v| v, dot_rows_f32),
            MatrixData::F16(d) => gemv(x, d, &mut y, f16_to_f32, dot_rows_f16),
            MatrixData::BF16(d) => gemv(x, d, &mut y, bf16_to_f32, dot_rows_bf16),
        }
        return y;
    }
    // whole columns of y (rows of W) per piece of work, about 1 Mi multiply-adds at least
    let cols = chunk_len(n_out, (1 << 20) / (t * n_in).max(1), 16);
    let out = Out { ptr: y.as_mut_ptr(), len: y.len() };
    map_range(n_out.div_ceil(cols), |i| {
        let first = i * cols;
        let part = first * n_in..(first + cols.min(n_out - first)) * n_in;
        match &w.data {
            MatrixData::F32(d) => gemm(x, &d[part], n_in, out, n_out, first),
            MatrixData::F16(d) => gemm_panels(x, &d[part], n_in, out, n_out, first, f16_to_f32),
            MatrixData::BF16(d) => gemm_panels(x, &d[part], n_in, out, n_out, first, bf16_to_f32),
        }
    });
    y
}

/// y (T, n_out) as a pointer the GEMM's pieces share: each writes only its own columns.
#[derive(Clone, Copy)]
struct Out {
    ptr: *mut f32,
    len: usize,
}

// SAFETY: the pieces given one `Out` write disjoint columns of it (see `linear`), and `linear`
// holds the `&mut` it came from until every piece has returned.
unsafe impl Send for Out {}
unsafe impl Sync for Out {}

/// `y[:, first..first + rows] += x · Wᵀ` for the f32 rows `w` (rows, in) of a matrix with
/// `n_out` rows in all: x (T, in), y (T, n_out).
fn gemm(x: &[f32], w: &[f32], n_in: usize, y: Out, n_out: usize, first: usize) {
    let t = x.len() / n_in;
    let rows = w.len() / n_in;
    assert!(x.len() == t * n_in && w.len() == rows * n_in && first + rows <= n_out && y.len == t * n_out);
    if t == 0 || rows == 0 {
        return;
    }
    // SAFETY: sgemm reads A = x as (T, in) with strides (in, 1), B = wᵀ as (in, rows) with
    // strides (1, in), and writes C = y[:, first..first + rows] as (T, rows) with strides
    // (n_out, 1); the assert above keeps every element addressed inside its slice (the last one
    // of C is (T−1)·n_out + first + rows − 1 < T·n_out); no other piece writes these columns.
    unsafe {
        matrixmultiply::sgemm(
            t,
            n_in,
            rows,
            1.0,
            x.as_ptr(),
            n_in as isize,
            1,
            w.as_ptr(),
            1,
            n_in as isize,
            1.0,
            y.ptr.add(first),
            n_out as isize,
            1,
        );
    }
}

/// [`gemm`] over the rows `w` of W stored narrower than f32: whole rows, [`PANEL_ELEMENTS`]
/// at most, widened into a scratch panel at a time.
fn gemm_panels<T: Copy>(
    x: &[f32],
    w: &[T],
    n_in: usize,
    y: Out,
    n_out: usize,
    first: usize,
    widen: impl Fn(T) -> f32,
) {
    let rows = (PANEL_ELEMENTS / n_in).clamp(1, (w.len() / n_in).max(1));
    let mut panel = vec![0.0f32; rows * n_in];
    for (i, part) in w.chunks(rows * n_in).enumerate() {
        let panel = &mut panel[..part.len()];
        panel.iter_mut().zip(part).for_each(|(p, &v)| *p = widen(v));
        gemm(x, panel, n_in, y, n_out, first + i * rows);
    }
}

/// Rows per pass over x in the decode GEMV. Natively four, each with one __m256 of
/// accumulators: eight rows gained nothing measurable there. In wasm eight, each with one f32x4
/// (both halves of x's 8 columns added into it): 3–6% faster decode than four rows at one and
/// two threads. Eight rows with two f32x4 each (sixteen accumulators, more than V8 keeps in
/// registers) made the 2-thread decode slower (docs/BENCHMARKS.md, "Eight rows in wasm").
pub(crate) const DOT_ROWS: usize = if cfg!(target_arch = "wasm32") { 8 } else { 4 };

/// `DOT_ROWS` dot products of x with `DOT_ROWS` rows of W in its stored type.
type DotRows<T> = fn(&[f32], [&[T]; DOT_ROWS]) -> [f32; DOT_ROWS];

/// `y += W · x` for one x (in): w (out, in) in its stored type, y (out); pieces of rows (a
/// multiple of [`DOT_ROWS`], [`MIN_PIECE`](crate::cpu::threads::MIN_PIECE) weights at least)
/// split across the model's threads.
fn gemv<T: Copy + Sync>(
    x: &[f32],
    w: &[T],
    y: &mut [f32],
    widen: impl Fn(T) -> f32 + Sync,
    dot_rows: DotRows<T>,
) {
    let n_in = x.len();
    let rows = chunk_len(y.len(), min_elements(n_in), DOT_ROWS);
    for_chunks(y, rows, |i, ys| {
        let first = i * rows;
        gemv_rows(x, &w[first * n_in..(first + ys.len()) * n_in], ys, &widen, dot_rows);
    });
}

/// [`gemv`] on one piece of rows: [`DOT_ROWS`] rows at a time by `dot_rows`, one from each
/// of the piece's parts (q rows each: rows i, q + i, 2q + i, …), the rest one by one. Each
/// row of a pass then reads on through its part — long sequential streams, which the CPU's
/// prefetcher follows, where neighbouring rows would each jump ahead every few KiB (the 130M
/// decode ran 1.4–1.6x faster this way, natively and in wasm: docs/BENCHMARKS.md, "Rows from far
/// apart"; `tools/bench/gemv-order`). Each row's sum is the same either way.
fn gemv_rows<T: Copy>(x: &[f32], w: &[T], y: &mut [f32], widen: impl Fn(T) -> f32, dot_rows: DotRows<T>) {
    let n_in = x.len();
    let q = y.len() / DOT_ROWS;
    let row = |r: usize| &w[r * n_in..(r + 1) * n_in];
    for i in 0..q {
        let sums = dot_rows(x, std::array::from_fn(|k| row(k * q + i)));
        for (k, s) in sums.into_iter().enumerate() {
            y[k * q + i] += s;
        }
    }
    for (r, y) in y.iter_mut().enumerate().skip(DOT_ROWS * q) {
        *y += dot_widening(x, row(r), &widen);
    }
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
use crate::cpu::simd128::{dot_rows_bf16, dot_rows_f16, dot_rows_f32};

// The several-row dot products by target: SIMD128 intrinsics in wasm, AVX2/FMA/F16C on x86-64
// CPUs that have them (checked at run time), else the portable loop.

#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
fn dot_rows_f32(x: &[f32], rows: [&[f32]; DOT_ROWS]) -> [f32; DOT_ROWS] {
    #[cfg(target_arch = "x86_64")]
    if crate::cpu::avx2::available() {
        return crate::cpu::avx2::dot_rows_f32(x, rows);
    }
    dot_rows(x, rows, |v| v)
}

#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
fn dot_rows_f16(x: &[f32], rows: [&[half::f16]; DOT_ROWS]) -> [f32; DOT_ROWS] {
    #[cfg(target_arch = "x86_64")]
    if crate::cpu::avx2::available() {
        return crate::cpu::avx2::dot_rows_f16(x, rows);
    }
    dot_rows(x, rows, f16_to_f32)
}

#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
fn dot_rows_bf16(x: &[f32], rows: [&[half::bf16]; DOT_ROWS]) -> [f32; DOT_ROWS] {
    #[cfg(target_arch = "x86_64")]
    if crate::cpu::avx2::available() {
        return crate::cpu::avx2::dot_rows_bf16(x, rows);
    }
    dot_rows(x, rows, bf16_to_f32)
}

/// [`DOT_ROWS`] dot products of x with as many rows at once: x is loaded once per eight
/// columns for all of them (eight lanes of accumulators per row). Portable; wasm32 uses
/// [`crate::cpu::simd128`].
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
fn dot_rows<T: Copy>(x: &[f32], rows: [&[T]; DOT_ROWS], widen: impl Fn(T) -> f32) -> [f32; DOT_ROWS] {
    let n8 = x.len() / 8 * 8;
    let mut acc = [[0.0f32; 8]; DOT_ROWS];
    for (c, xs) in x[..n8].chunks_exact(8).enumerate() {
        for (acc, row) in acc.iter_mut().zip(&rows) {
            let ws = &row[c * 8..c * 8 + 8];
            for i in 0..8 {
                acc[i] += xs[i] * widen(ws[i]);
            }
        }
    }
    let mut out = [0.0; DOT_ROWS];
    for ((out, acc), row) in out.iter_mut().zip(&acc).zip(&rows) {
        let tail: f32 = x[n8..].iter().zip(&row[n8..]).map(|(&a, &b)| a * widen(b)).sum();
        *out = acc.iter().sum::<f32>() + tail;
    }
    out
}

#[cfg(test)]
mod tests {
    use half::f16;

    use super::*;

    /// A deterministic value in (−1, 1) for index i.
    fn value(i: usize, salt: usize) -> f32 {
        ((i * 7919 + salt * 104_729) % 2001) as f32 / 1000.0 - 1.0
    }

    #[test]
    fn linear_matches_a_plain_loop_for_every_dtype_and_awkward_shapes() {
        // T: one row (GEMV) and several; in: not a multiple of 8; out: not a multiple of 4, and
        // over one f16/bf16 panel
        for (t, n_in, n_out) in
            [(1, 13, 7), (1, 64, 130), (3, 13, 7), (5, 70, 131), (17, 8, 4), (3, 40_000, 40)]
        {
            let x: Vec<f32> = (0..t * n_in).map(|i| value(i, 1)).collect();
            let w32: Vec<f32> = (0..n_out * n_in).map(|i| value(i, 2)).collect();
            let bias: Vec<f32> = (0..n_out).map(|i| value(i, 3)).collect();
            let stored = [
                Matrix::from_f32(n_out, w32.clone()),
                Matrix {
                    rows: n_out,
                    cols: n_in,
                    data: MatrixData::F16(w32.iter().map(|&v| f16::from_f32(v)).collect()),
                },
                Matrix {
                    rows: n_out,
                    cols: n_in,
                    data: MatrixData::BF16(w32.iter().map(|&v| half::bf16::from_f32(v)).collect()),
                },
            ];
            for w in &stored {
                let wf = w.to_f32();
                for b in [None, Some(&bias[..])] {
                    let got = linear(&x, w, b);
                    for r in 0..t {
                        for o in 0..n_out {
                            let want: f64 = (0..n_in)
                                .map(|i| x[r * n_in + i] as f64 * wf[o * n_in + i] as f64)
                                .sum::<f64>()
                                + b.map_or(0.0, |b| b[o] as f64);
                            let g = got[r * n_out + o] as f64;
                            assert!(
                                (g - want).abs() <= 1e-5 * (1.0 + want.abs()),
                                "{} T={t} in={n_in} out={n_out} [{r},{o}]: {g} vs {want}",
                                w.dtype_name()
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn f16_widening_is_exact_for_every_value() {
        for bits in 0..=u16::MAX {
            let v = f16::from_bits(bits);
            let (want, got) = (v.to_f32(), f16_to_f32(v));
            assert!(
                want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan()),
                "{bits:#06x}: {want} vs {got}"
            );
        }
    }
}
