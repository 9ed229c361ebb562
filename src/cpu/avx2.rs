//! The decode GEMV's inner loop with AVX2, FMA and F16C, natively on x86-64 where the CPU has
//! them (checked once at run time; else the portable loop of [`crate::cpu::matmul`]). The
//! portable loop reached 3.6 GB/s of bf16 weights and 7 GB/s of f32 ones on the 130M shape:
//! compute-bound on widening, while one core here reads ~10 GB/s. Each row's weights are loaded
//! eight at a time, widened in registers (bf16: a shift; f16: `vcvtph2ps`) and multiplied into
//! eight lanes of accumulators per row with fused multiply-adds, several rows per pass over x.
//! Also the selective scan's step ([`scan_step`]) with [`crate::cpu::ops::exp`] on eight lanes.

use std::arch::x86_64::*;
use std::sync::OnceLock;

use half::{bf16, f16};

use crate::cpu::exp::EXP;
use crate::cpu::scan_portable::scan_tail;
use crate::model::matrix::{bf16_to_f32, f16_to_f32};

/// Whether this CPU runs the functions below (AVX2, FMA and F16C; every x86-64 CPU since 2013).
pub(crate) fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c")
    })
}

/// The eight lanes of `v` added up.
#[target_feature(enable = "avx2")]
fn sum8(v: __m256) -> f32 {
    let mut lanes = [0.0f32; 8];
    // SAFETY: `lanes` is 8 f32 = 32 bytes; storeu needs no alignment.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), v) };
    lanes.iter().sum()
}

/// How far ahead of the multiply-adds each row's weights are prefetched. Asking for the lines
/// 1 KiB ahead made the 130M decode 20–28% faster with bf16 weights and 2–7% with f32 ones when
/// a pass read neighbouring rows (2026-12-05, docs/BENCHMARKS.md "Prefetching the GEMV's rows";
/// 4 KiB gave the same within noise), and still 1.09–1.20x (bf16) once the rows came from far
/// apart ("Rows from far apart").
const PREFETCH_BYTES: usize = 1024;

/// `dot_rows` for one weight type: `$load` turns the 8 weights at `$p` (a pointer) into a __m256.
macro_rules! dot_rows {
    ($(#[$doc:meta])* $name:ident, $t:ty, $widen:expr, |$p:ident| $load:expr) => {
        $(#[$doc])*
        #[target_feature(enable = "avx2,fma,f16c")]
        fn $name<const N: usize>(x: &[f32], rows: [&[$t]; N]) -> [f32; N] {
            let n8 = x.len() / 8 * 8;
            // Checked once here rather than on every load in the loop.
            assert!(rows.iter().all(|r| r.len() >= x.len()), "a row is shorter than x");
            let mut acc = [_mm256_setzero_ps(); N];
            // a cache line of weights at a time: one prefetch per row, then its 8-column steps
            let line = 64 / size_of::<$t>();
            for first in (0..n8).step_by(line) {
                for row in &rows {
                    let ahead = row.as_ptr().wrapping_add(first + PREFETCH_BYTES / size_of::<$t>());
                    // a hint: it never faults, whatever the address (`wrapping_add` keeps
                    // computing one past the row's end defined)
                    _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
                }
                for c in (first..(first + line).min(n8)).step_by(8) {
                    // SAFETY: c + 8 ≤ n8 ≤ x.len(); loadu needs no alignment.
                    let xv = unsafe { _mm256_loadu_ps(x.as_ptr().add(c)) };
                    for (acc, row) in acc.iter_mut().zip(&rows) {
                        // SAFETY: c + 8 ≤ x.len() ≤ the row's length (asserted above).
                        let $p: *const $t = unsafe { row.as_ptr().add(c) };
                        *acc = _mm256_fmadd_ps(xv, $load, *acc);
                    }
                }
            }
            let mut out = [0.0; N];
            for ((out, acc), row) in out.iter_mut().zip(acc).zip(&rows) {
                let tail: f32 = x[n8..].iter().zip(&row[n8..]).map(|(&a, &b)| a * $widen(b)).sum();
                *out = sum8(acc) + tail;
            }
            out
        }
    };
}

dot_rows!(
    /// N dot products of x with N f32 rows.
    dot_rows_f32_avx2, f32, |v: f32| v,
    // SAFETY: `p` points at 8 readable f32 = 32 bytes; loadu needs no alignment.
    |p| unsafe { _mm256_loadu_ps(p) }
);
dot_rows!(
    /// N dot products of x with N bf16 rows.
    dot_rows_bf16_avx2, bf16, bf16_to_f32,
    // SAFETY: `p` points at 8 readable bf16 = 16 bytes; loadu needs no alignment.
    |p| _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(unsafe { _mm_loadu_si128(p.cast()) }), 16))
);
dot_rows!(
    /// N dot products of x with N f16 rows.
    dot_rows_f16_avx2, f16, f16_to_f32,
    // SAFETY: `p` points at 8 readable f16 = 16 bytes; loadu needs no alignment.
    |p| _mm256_cvtph_ps(unsafe { _mm_loadu_si128(p.cast()) })
);

/// N dot products of x with N f32 rows. Only where [`available`].
pub(crate) fn dot_rows_f32<const N: usize>(x: &[f32], rows: [&[f32]; N]) -> [f32; N] {
    debug_assert!(available());
    // SAFETY: the caller checked `available()`: the CPU has AVX2, FMA and F16C.
    unsafe { dot_rows_f32_avx2(x, rows) }
}

/// N dot products of x with N f16 rows. Only where [`available`].
pub(crate) fn dot_rows_f16<const N: usize>(x: &[f32], rows: [&[f16]; N]) -> [f32; N] {
    debug_assert!(available());
    // SAFETY: as in `dot_rows_f32`.
    unsafe { dot_rows_f16_avx2(x, rows) }
}

/// N dot products of x with N bf16 rows. Only where [`available`].
pub(crate) fn dot_rows_bf16<const N: usize>(x: &[f32], rows: [&[bf16]; N]) -> [f32; N] {
    debug_assert!(available());
    // SAFETY: as in `dot_rows_f32`.
    unsafe { dot_rows_bf16_avx2(x, rows) }
}

/// [`crate::cpu::ops::exp`] on eight lanes, its steps in the same order (multiply-adds fused).
#[target_feature(enable = "avx2,fma")]
fn exp8(x: __m256) -> __m256 {
    let x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(EXP.max)), _mm256_set1_ps(EXP.min));
    let round = _mm256_set1_ps(EXP.round);
    let shifted = _mm256_fmadd_ps(x, _mm256_set1_ps(EXP.log2e), round);
    let n = _mm256_sub_ps(shifted, round);
    let r = _mm256_sub_ps(
        _mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(EXP.ln2_hi))),
        _mm256_mul_ps(n, _mm256_set1_ps(EXP.ln2_lo)),
    );
    let [p0, rest @ ..] = EXP.poly;
    let p = rest.iter().fold(_mm256_set1_ps(p0), |p, &k| _mm256_fmadd_ps(p, r, _mm256_set1_ps(k)));
    let er = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), _mm256_set1_ps(1.0));
    let n_bits = _mm256_sub_epi32(_mm256_castps_si256(shifted), _mm256_castps_si256(round));
    let two_n = _mm256_slli_epi32(_mm256_add_epi32(n_bits, _mm256_set1_epi32(127)), 23);
    _mm256_mul_ps(er, _mm256_castsi256_ps(two_n))
}

#[target_feature(enable = "avx2,fma")]
fn scan_step_avx2(h: &mut [f32], a: &[f32], b: &[f32], c: &[f32], dt: f32, dt_u: f32) -> f32 {
    let n = h.len();
    assert!(a.len() >= n && b.len() >= n && c.len() >= n, "a scan step's A, B or C is shorter than h");
    let n8 = n / 8 * 8;
    let (dt8, dt_u8) = (_mm256_set1_ps(dt), _mm256_set1_ps(dt_u));
    let mut acc = _mm256_setzero_ps();
    for s in (0..n8).step_by(8) {
        // SAFETY: s + 8 ≤ n ≤ every slice's length (asserted above); loadu/storeu need no
        // alignment.
        unsafe {
            let decay = exp8(_mm256_mul_ps(dt8, _mm256_loadu_ps(a.as_ptr().add(s))));
            let input = _mm256_mul_ps(dt_u8, _mm256_loadu_ps(b.as_ptr().add(s)));
            let hs = _mm256_fmadd_ps(decay, _mm256_loadu_ps(h.as_ptr().add(s)), input);
            _mm256_storeu_ps(h.as_mut_ptr().add(s), hs);
            acc = _mm256_fmadd_ps(hs, _mm256_loadu_ps(c.as_ptr().add(s)), acc);
        }
    }
    sum8(acc) + scan_tail(&mut h[n8..], &a[n8..n], &b[n8..n], &c[n8..n], dt, dt_u)
}

/// One step of the selective scan for one channel (see [`crate::cpu::ops::scan_step`]). Only
/// where [`available`].
pub(crate) fn scan_step(h: &mut [f32], a: &[f32], b: &[f32], c: &[f32], dt: f32, dt_u: f32) -> f32 {
    debug_assert!(available());
    // SAFETY: as in `dot_rows_f32`.
    unsafe { scan_step_avx2(h, a, b, c, dt, dt_u) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp8_is_within_2_ulp_of_the_library_exp() {
        if !available() {
            return; // nothing here runs without AVX2 and FMA
        }
        for i in 0..250_000 {
            let x: [f32; 8] = std::array::from_fn(|l| -87.3 + 175.6 * (i * 8 + l) as f32 / 2_000_000.0);
            let mut got = [0.0f32; 8];
            // SAFETY: available() above; both arrays hold 8 f32.
            unsafe { _mm256_storeu_ps(got.as_mut_ptr(), exp8(_mm256_loadu_ps(x.as_ptr()))) };
            for (x, got) in x.iter().zip(got) {
                let want = x.exp();
                let ulp = (want.to_bits() as i64 - got.to_bits() as i64).abs();
                assert!(ulp <= 2, "exp8({x}): {got} vs {want} ({ulp} ulp)");
            }
        }
    }
}
