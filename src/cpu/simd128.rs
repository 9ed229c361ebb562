//! The decode GEMV's inner loop in WebAssembly SIMD128, written with `core::arch::wasm32`
//! intrinsics: LLVM's auto-vectoriser turns the portable loop ([`crate::cpu::matmul`]) into
//! lanes across four rows (one 2-byte lane load per weight), which ran a bf16 decode at 0.4x of
//! native. Here each row's weights are loaded eight at a time, widened in registers (bf16: a
//! shift; f16: the same branchless bit moves as [`crate::model::matrix::f16_to_f32`]) and
//! multiplied with x as two f32x4, both added into the row's one f32x4 of sums — for every
//! weight format, several rows per pass over x. In the relaxed-SIMD module (`+relaxed-simd`,
//! scripts/build-relaxed) the multiply-adds are `f32x4.relaxed_madd`: fused where the CPU has
//! FMA. Also the selective scan's step ([`scan_step`]) with [`crate::cpu::ops::exp`] on four
//! lanes.

use core::arch::wasm32::*;

use half::{bf16, f16};

use crate::cpu::exp::EXP;
use crate::cpu::scan_portable::scan_tail;
use crate::model::matrix::{bf16_to_f32, f16_to_f32};

/// Eight consecutive values as two f32x4.
trait Load8: Copy {
    /// The 8 values from `p` on.
    ///
    /// # Safety
    /// `p` must point at 8 readable values (v128 loads need no alignment).
    unsafe fn load8(p: *const Self) -> (v128, v128);
    fn widen(self) -> f32;
}

impl Load8 for f32 {
    #[inline(always)]
    unsafe fn load8(p: *const f32) -> (v128, v128) {
        // SAFETY: the caller's: 8 f32 = 32 bytes from p.
        unsafe { (v128_load(p.cast()), v128_load(p.add(4).cast())) }
    }
    #[inline(always)]
    fn widen(self) -> f32 {
        self
    }
}

impl Load8 for bf16 {
    #[inline(always)]
    unsafe fn load8(p: *const bf16) -> (v128, v128) {
        // SAFETY: the caller's: 8 two-byte values = 16 bytes from p.
        let v = unsafe { v128_load(p.cast()) };
        (i32x4_shl(u32x4_extend_low_u16x8(v), 16), i32x4_shl(u32x4_extend_high_u16x8(v), 16))
    }
    #[inline(always)]
    fn widen(self) -> f32 {
        bf16_to_f32(self)
    }
}

/// f16 bits (one per u32 lane) → f32: see [`f16_to_f32`].
#[inline(always)]
fn widen_f16(h: v128) -> v128 {
    let sign = i32x4_shl(v128_and(h, u32x4_splat(0x8000)), 16);
    let magnitude = v128_and(h, u32x4_splat(0x7fff));
    let scaled = f32x4_mul(i32x4_shl(magnitude, 13), f32x4_splat(f32::from_bits(0x7780_0000)));
    let special = v128_or(u32x4_splat(0x7f80_0000), i32x4_shl(v128_and(magnitude, u32x4_splat(0x3ff)), 13));
    v128_or(sign, v128_bitselect(special, scaled, u32x4_ge(magnitude, u32x4_splat(0x7c00))))
}

impl Load8 for f16 {
    #[inline(always)]
    unsafe fn load8(p: *const f16) -> (v128, v128) {
        // SAFETY: the caller's: 8 two-byte values = 16 bytes from p.
        let v = unsafe { v128_load(p.cast()) };
        (widen_f16(u32x4_extend_low_u16x8(v)), widen_f16(u32x4_extend_high_u16x8(v)))
    }
    #[inline(always)]
    fn widen(self) -> f32 {
        f16_to_f32(self)
    }
}

/// `a·b + c`: fused in the relaxed-SIMD module where the CPU has FMA (one rounding), else a
/// multiply and an add.
#[inline(always)]
pub(crate) fn madd(a: v128, b: v128, c: v128) -> v128 {
    #[cfg(target_feature = "relaxed-simd")]
    return f32x4_relaxed_madd(a, b, c);
    #[cfg(not(target_feature = "relaxed-simd"))]
    f32x4_add(f32x4_mul(a, b), c)
}

/// N dot products of x with N rows at once (each row as long as x): one f32x4 of
/// accumulators per row, into which both halves of each eight columns are added (x[c..c+4]·w,
/// then x[c+4..c+8]·w), so that eight rows' accumulators, x and the loaded weights fit in the 16
/// vector registers V8 has on x86-64. The lanes are summed in a different order than AVX2's
/// eight natively: the two targets' sums may differ in the last bits.
#[inline(always)]
fn dot_rows<T: Load8, const N: usize>(x: &[f32], rows: [&[T]; N]) -> [f32; N] {
    let n8 = x.len() / 8 * 8;
    // Checked once here rather than on every load in the loop.
    assert!(rows.iter().all(|r| r.len() >= x.len()), "a row is shorter than x");
    let mut acc = [f32x4_splat(0.0); N]; // one per row
    for c in (0..n8).step_by(8) {
        // SAFETY: c + 8 ≤ n8 ≤ x.len() ≤ every row's length (asserted above).
        let (x0, x1) = unsafe { f32::load8(x.as_ptr().add(c)) };
        for (r, row) in rows.iter().enumerate() {
            // SAFETY: as for x.
            let (w0, w1) = unsafe { T::load8(row.as_ptr().add(c)) };
            acc[r] = madd(x1, w1, madd(x0, w0, acc[r]));
        }
    }
    let mut out = [0.0; N];
    for (r, (out, row)) in out.iter_mut().zip(&rows).enumerate() {
        let v = acc[r];
        let lanes = f32x4_extract_lane::<0>(v)
            + f32x4_extract_lane::<1>(v)
            + f32x4_extract_lane::<2>(v)
            + f32x4_extract_lane::<3>(v);
        let tail: f32 = x[n8..].iter().zip(&row[n8..]).map(|(&a, &b)| a * b.widen()).sum();
        *out = lanes + tail;
    }
    out
}

/// [`dot_rows`] over f32 rows.
pub(crate) fn dot_rows_f32<const N: usize>(x: &[f32], rows: [&[f32]; N]) -> [f32; N] {
    dot_rows(x, rows)
}

/// [`dot_rows`] over f16 rows.
pub(crate) fn dot_rows_f16<const N: usize>(x: &[f32], rows: [&[f16]; N]) -> [f32; N] {
    dot_rows(x, rows)
}

/// [`dot_rows`] over bf16 rows.
pub(crate) fn dot_rows_bf16<const N: usize>(x: &[f32], rows: [&[bf16]; N]) -> [f32; N] {
    dot_rows(x, rows)
}

/// [`crate::cpu::ops::exp`] on four lanes, its steps in the same order.
#[inline(always)]
fn exp4(x: v128) -> v128 {
    let x = f32x4_pmax(f32x4_pmin(x, f32x4_splat(EXP.max)), f32x4_splat(EXP.min));
    let round = f32x4_splat(EXP.round);
    let shifted = madd(x, f32x4_splat(EXP.log2e), round);
    let n = f32x4_sub(shifted, round);
    let r =
        f32x4_sub(f32x4_sub(x, f32x4_mul(n, f32x4_splat(EXP.ln2_hi))), f32x4_mul(n, f32x4_splat(EXP.ln2_lo)));
    let [p0, rest @ ..] = EXP.poly;
    let p = rest.iter().fold(f32x4_splat(p0), |p, &k| madd(p, r, f32x4_splat(k)));
    let er = f32x4_add(madd(f32x4_mul(p, r), r, r), f32x4_splat(1.0));
    let n_bits = i32x4_sub(shifted, round);
    f32x4_mul(er, i32x4_shl(i32x4_add(n_bits, i32x4_splat(127)), 23))
}

/// One step of the selective scan for one channel (see [`crate::cpu::ops::scan_step`]), four
/// entries at a time.
pub(crate) fn scan_step(h: &mut [f32], a: &[f32], b: &[f32], c: &[f32], dt: f32, dt_u: f32) -> f32 {
    let n = h.len();
    assert!(a.len() >= n && b.len() >= n && c.len() >= n, "a scan step's A, B or C is shorter than h");
    let n4 = n / 4 * 4;
    let (dt4, dt_u4) = (f32x4_splat(dt), f32x4_splat(dt_u));
    let mut acc = f32x4_splat(0.0);
    for s in (0..n4).step_by(4) {
        // SAFETY: s + 4 ≤ n ≤ every slice's length (asserted above); v128 loads and stores need
        // no alignment.
        unsafe {
            let decay = exp4(f32x4_mul(dt4, v128_load(a.as_ptr().add(s).cast())));
            let input = f32x4_mul(dt_u4, v128_load(b.as_ptr().add(s).cast()));
            let hs = madd(decay, v128_load(h.as_ptr().add(s).cast()), input);
            v128_store(h.as_mut_ptr().add(s).cast(), hs);
            acc = madd(hs, v128_load(c.as_ptr().add(s).cast()), acc);
        }
    }
    let lanes = f32x4_extract_lane::<0>(acc)
        + f32x4_extract_lane::<1>(acc)
        + f32x4_extract_lane::<2>(acc)
        + f32x4_extract_lane::<3>(acc);
    lanes + scan_tail(&mut h[n4..], &a[n4..n], &b[n4..n], &c[n4..n], dt, dt_u)
}
