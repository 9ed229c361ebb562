//! eˣ for loops that vectorise, and its constants, which the SIMD copies (`cpu/avx2.rs`,
//! `cpu/simd128.rs`) use in the same order.

/// eˣ without branches or library calls, so that loops over it vectorise (Cephes' `expf`:
/// x = n·ln2 + r with |r| ≤ ln2/2, a degree-6 polynomial for eʳ, 2ⁿ put into the exponent
/// bits). Within 2 ulp of `f32::exp` for x in [−87.3, 88.3]; below, the result stays at
/// ~1e−38 instead of reaching 0 (x is clamped). The SIMD copies (`cpu/avx2.rs`,
/// `cpu/simd128.rs`) use these constants (`EXP`) in the same order.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    let x = x.clamp(EXP.min, EXP.max);
    let shifted = x * EXP.log2e + EXP.round;
    let n = shifted - EXP.round; // round(x / ln 2), as a float
    let r = x - n * EXP.ln2_hi - n * EXP.ln2_lo;
    let [p0, p1, p2, p3, p4, p5] = EXP.poly;
    let p = ((((p0 * r + p1) * r + p2) * r + p3) * r + p4) * r + p5;
    let er = p * r * r + r + 1.0;
    // n (in −126..=127) sits in the low mantissa bits of `shifted`: n + 127 into the exponent
    let n_bits = shifted.to_bits().wrapping_sub(EXP.round.to_bits());
    er * f32::from_bits(n_bits.wrapping_add(127) << 23)
}

/// [`exp`]'s constants.
pub(super) struct ExpConstants {
    /// The clamp: below `min` the result stays ~1e−38, above `max` ~3e38.
    pub(crate) min: f32,
    pub(crate) max: f32,
    pub(crate) log2e: f32,
    /// ln 2 split in two for an exact n·ln2.
    pub(crate) ln2_hi: f32,
    pub(crate) ln2_lo: f32,
    /// 1.5·2²³: adding it rounds to an integer (|v| < 2²²).
    pub(crate) round: f32,
    /// eʳ ≈ 1 + r + r²·p(r), p's coefficients from the highest power.
    pub(crate) poly: [f32; 6],
}

pub(super) const EXP: ExpConstants = ExpConstants {
    min: -87.3,
    max: 88.3,
    log2e: std::f32::consts::LOG2_E,
    ln2_hi: 0.693_359_4,
    ln2_lo: -2.121_944_4e-4,
    round: 12_582_912.0,
    poly: [1.987_569_1e-4, 1.398_2e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 0.5],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_within_2_ulp_of_the_library_exp() {
        let mut worst = 0i64;
        for i in 0..=2_000_000 {
            let x = -87.3 + (88.3 + 87.3) * i as f32 / 2_000_000.0;
            let (want, got) = (x.exp(), exp(x));
            let ulp = (want.to_bits() as i64 - got.to_bits() as i64).abs();
            worst = worst.max(ulp);
            assert!(ulp <= 2, "exp({x}): {got} vs {want} ({ulp} ulp)");
        }
        assert_eq!(exp(0.0), 1.0);
        assert!(exp(-1000.0) < 1e-37 && exp(-1000.0) >= 0.0);
    }
}
