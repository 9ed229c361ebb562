//! `y = W · x` over bf16 matrices of the 130M model's in_proj shape (3072 × 768), 40 of them
//! (180 MiB: more than the caches hold, as a decode step's weights), with the SIMD128 dot of
//! webmamba's `cpu/simd128.rs`; exported for node (no imports: run.mjs times the calls). Only
//! which rows a dot reads side by side differs between `neighbours`, `quarters` and `eighths`
//! (each row's sum the same in all three); the `_one` variants keep one f32x4 of sums per row
//! instead of two (webmamba's dot since 2026-12-05: eight rows, one f32x4 each).

use core::arch::wasm32::*;
use std::sync::Mutex;

const ROWS: usize = 3072;
const COLS: usize = 768;
const MATRICES: usize = 40;

/// The weights (bf16 bits, MATRICES × ROWS × COLS), x (COLS) and y (ROWS).
static BUFFERS: Mutex<(Vec<u16>, Vec<f32>, Vec<f32>)> = Mutex::new((Vec::new(), Vec::new(), Vec::new()));

/// Bytes of weights one pass reads.
#[unsafe(no_mangle)]
pub extern "C" fn bytes_per_pass() -> usize {
    MATRICES * ROWS * COLS * 2
}

/// Fills the weights with bf16 values in [0.5, 1) and x with small ones.
#[unsafe(no_mangle)]
pub extern "C" fn setup() {
    let w = (0..MATRICES * ROWS * COLS).map(|i| 0x3f00 + (i % 128) as u16).collect();
    let x = (0..COLS).map(|i| i as f32 / 1000.0).collect();
    *BUFFERS.lock().unwrap() = (w, x, vec![0.0; ROWS]);
}

/// Eight bf16 from `p` as two f32x4.
///
/// # Safety
/// `p` must point at 8 readable values.
#[inline(always)]
unsafe fn load8(p: *const u16) -> (v128, v128) {
    // SAFETY: the caller's.
    let v = unsafe { v128_load(p.cast()) };
    (i32x4_shl(u32x4_extend_low_u16x8(v), 16), i32x4_shl(u32x4_extend_high_u16x8(v), 16))
}

/// `passes` GEMVs over every matrix, G rows per dot: row `order(i, k)` as the k-th of the i-th;
/// A accumulators per row (2: eight lanes, as webmamba's dot; 1: four lanes, both halves of
/// every eight columns added into one — fewer registers, another order of the additions).
fn gemv<const G: usize, const A: usize>(passes: usize, order: impl Fn(usize, usize) -> usize) -> f32 {
    let mut buffers = BUFFERS.lock().unwrap();
    let (w, x, y) = &mut *buffers;
    assert!(w.len() == MATRICES * ROWS * COLS && x.len() == COLS, "call setup first");
    for _ in 0..passes {
        for m in w.chunks_exact(ROWS * COLS) {
            for i in 0..ROWS / G {
                let rows: [&[u16]; G] = core::array::from_fn(|k| &m[order(i, k) * COLS..][..COLS]);
                let mut acc = [[f32x4_splat(0.0); A]; G];
                for c in (0..COLS).step_by(8) {
                    // SAFETY: c + 8 ≤ COLS = x's and every row's length.
                    let (x0, x1) = unsafe {
                        (v128_load(x.as_ptr().add(c).cast()), v128_load(x.as_ptr().add(c + 4).cast()))
                    };
                    for (k, row) in rows.iter().enumerate() {
                        // SAFETY: as for x.
                        let (w0, w1) = unsafe { load8(row.as_ptr().add(c)) };
                        acc[k][0] = f32x4_add(f32x4_mul(x0, w0), acc[k][0]);
                        acc[k][A - 1] = f32x4_add(f32x4_mul(x1, w1), acc[k][A - 1]);
                    }
                }
                for (k, a) in acc.into_iter().enumerate() {
                    let v = if A == 2 { f32x4_add(a[0], a[A - 1]) } else { a[0] };
                    y[order(i, k)] += f32x4_extract_lane::<0>(v)
                        + f32x4_extract_lane::<1>(v)
                        + f32x4_extract_lane::<2>(v)
                        + f32x4_extract_lane::<3>(v);
                }
            }
        }
    }
    y[7]
}

/// Rows 4i … 4i + 3 side by side (webmamba before 2026-12-05).
#[unsafe(no_mangle)]
pub extern "C" fn neighbours(passes: usize) -> f32 {
    gemv::<4, 2>(passes, |i, k| 4 * i + k)
}

/// Rows i, q + i, 2q + i, 3q + i side by side (q = ROWS / 4).
#[unsafe(no_mangle)]
pub extern "C" fn quarters(passes: usize) -> f32 {
    gemv::<4, 2>(passes, |i, k| k * (ROWS / 4) + i)
}

/// Rows i, q + i, …, 7q + i side by side (q = ROWS / 8).
#[unsafe(no_mangle)]
pub extern "C" fn eighths(passes: usize) -> f32 {
    gemv::<8, 2>(passes, |i, k| k * (ROWS / 8) + i)
}

/// [`eighths`] with one accumulator per row (eight in all, not sixteen).
#[unsafe(no_mangle)]
pub extern "C" fn eighths_one(passes: usize) -> f32 {
    gemv::<8, 1>(passes, |i, k| k * (ROWS / 8) + i)
}

/// [`quarters`] with one accumulator per row.
#[unsafe(no_mangle)]
pub extern "C" fn quarters_one(passes: usize) -> f32 {
    gemv::<4, 1>(passes, |i, k| k * (ROWS / 4) + i)
}
