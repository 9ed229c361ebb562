//! Plain f32 building blocks of the CPU reference, written for clarity first and for
//! auto-vectorisation second (contiguous inner loops, several accumulators). The matrix
//! products are in [`crate::cpu::matmul`].

pub(crate) use super::exp::exp;

/// `Σ a[i]·b[i]` with eight independent accumulators so the compiler can vectorise it.
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    dot_widening(a, b, |v| v)
}

/// `Σ a[i]·widen(b[i])` with eight independent accumulators so the compiler can vectorise it.
pub(crate) fn dot_widening<T: Copy>(a: &[f32], b: &[T], widen: impl Fn(T) -> f32) -> f32 {
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

/// softmax(x), with −∞ giving 0 (the sampler's and the mixtures' routers').
pub(crate) fn softmax(x: &[f32]) -> Vec<f32> {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let e: Vec<f32> = x.iter().map(|&v| (v - max).exp()).collect();
    let total: f32 = e.iter().sum();
    e.into_iter().map(|v| v / total).collect()
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

/// RMSNorm without a weight, in place: `x ← x / sqrt(mean(x²) + eps)` (HF
/// `FalconMambaWeightlessRMSNorm`, on Δ's input, B and C of every token).
pub(crate) fn rms_norm_in_place(x: &mut [f32], eps: f32) {
    let scale = 1.0 / (dot(x, x) / x.len() as f32 + eps).sqrt();
    x.iter_mut().for_each(|v| *v *= scale);
}

/// `x · σ(x)`, with [`exp`] (in wasm, `f32::exp` is a call into software libm, 74K of them per
/// decoded token of a 130M model).
pub(crate) fn silu(x: f32) -> f32 {
    x / (1.0 + exp(-x))
}

/// `log(1 + eˣ)`, returning x itself above 20 as PyTorch's `softplus` does. (The GPU kernels'
/// branch-free form, `max(x, 0) + log1p(e^−|x|)` with an atanh series, vectorises and ran a
/// native prefill ~5% faster, but moved the last bits enough that a Zamba2 fixture's resumed
/// logits left `tests/session.rs`'s 1e-5 of the whole run's: kept as it was.)
pub(crate) fn softplus(x: f32) -> f32 {
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

/// One step of the selective scan for one channel, in place: for each state entry s,
/// `h[s] = exp(Δ·A[s])·h[s] + (Δ·u)·B[s]`; returns `Σ h[s]·C[s]`. h, a, b, c: (N).
/// Written out in vector intrinsics with [`exp`]'s polynomial where the target has them (AVX2
/// and FMA natively, checked at run time: `cpu/avx2.rs`; SIMD128 in wasm: `cpu/simd128.rs`) —
/// the auto-vectorised loop below ran at 0.6x of them — else that loop. They differ by
/// rounding only (fused multiply-adds, the order of the final sum).
pub(crate) fn scan_step(h: &mut [f32], a: &[f32], b: &[f32], c: &[f32], dt: f32, dt_u: f32) -> f32 {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        crate::cpu::simd128::scan_step(h, a, b, c, dt, dt_u)
    }
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    {
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::avx2::available() {
            return crate::cpu::avx2::scan_step(h, a, b, c, dt, dt_u);
        }
        super::scan_portable::scan_step(h, a, b, c, dt, dt_u)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softplus_matches_f64_over_the_whole_range() {
        // as tests/gpu_softplus.rs: [−30, 30] every 1/1024, and the far ends
        let mut xs: Vec<f32> = (-30 * 1024..=30 * 1024).map(|i| i as f32 / 1024.0).collect();
        xs.extend([-100.0, -88.0, -87.0, -15.0001, -14.9999, -8.0001, 19.999, 20.001, 50.0, 100.0]);
        for x in xs {
            let want = f64::from(x).max(0.0) + (-f64::from(x).abs()).exp().ln_1p();
            let got = f64::from(softplus(x));
            // f32's own exp moves e^x by |x| half ULPs; a few more for the rest
            let allowed = (4.0 + f64::from(x.abs())) * f64::from(f32::EPSILON);
            let rel = if want < 1e-30 { (got - want).abs() } else { (got - want).abs() / want };
            assert!(rel <= allowed, "softplus({x}): {got} vs {want} ({rel:.2e} relative)");
        }
        assert!(softplus(f32::NAN).is_nan());
        assert_eq!(softplus(f32::INFINITY), f32::INFINITY);
        assert_eq!(softplus(1e30), 1e30);
    }

    #[test]
    fn silu_matches_the_library_exp_version() {
        for i in -2000..=2000 {
            let x = i as f32 / 20.0;
            let want = x / (1.0 + (-x).exp());
            assert!(
                (silu(x) - want).abs() <= 4.0 * f32::EPSILON * want.abs().max(1e-30),
                "silu({x}): {} vs {want}",
                silu(x)
            );
        }
        assert!(silu(-200.0).abs() < 1e-35); // exp clamps at e^88.3: −9e−37, not −0
        assert_eq!(silu(200.0), 200.0);
    }

    #[test]
    fn scan_step_matches_the_plain_recurrence() {
        for n in [4, 16, 19] {
            let v = |i: usize, k: usize| ((i * 31 + k * 17) % 23) as f32 / 11.5 - 1.0;
            let a: Vec<f32> = (0..n).map(|i| -(1.0 + v(i, 1).abs() * 8.0)).collect();
            let (b, c): (Vec<f32>, Vec<f32>) =
                ((0..n).map(|i| v(i, 2)).collect(), (0..n).map(|i| v(i, 3)).collect());
            let mut h: Vec<f32> = (0..n).map(|i| v(i, 4)).collect();
            let mut want_h = h.clone();
            let (dt, u) = (0.37, -0.8);
            let got = scan_step(&mut h, &a, &b, &c, dt, dt * u);
            let mut want = 0.0f64;
            for s in 0..n {
                want_h[s] = (dt * a[s]).exp() * want_h[s] + dt * u * b[s];
                want += (want_h[s] * c[s]) as f64;
            }
            assert!((got as f64 - want).abs() < 1e-5, "n={n}: {got} vs {want}");
            for (g, w) in h.iter().zip(&want_h) {
                assert!((g - w).abs() <= 1e-6 * (1.0 + w.abs()), "n={n}: state {g} vs {w}");
            }
        }
    }
}
