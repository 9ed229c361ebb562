//! Δ's softplus on the GPU, every copy of it (each kernel that applies it carries its own: WGSL
//! has no includes), against f64 over [−30, 30] and beyond: each copy is cut out of its shader,
//! wrapped in a one-line kernel and run on the adapter (lavapipe natively, SwiftShader in
//! Chromium). The formula it replaced, log(1 + e^v), is run the same way as a control: the test
//! must see its error (the rounding of 1 + e^v: 5% at v = −15), or it could not see a regression.

mod common;

use common::{gpu, wgsl_fn};
use webmamba::gpu::GpuContext;

/// Every shader with a softplus (`shaders_are_all_here` checks the list natively).
const SHADERS: &[(&str, &str)] = &[
    ("decode_scan", include_str!("../shaders/decode_scan.wgsl")),
    ("delta_prep", include_str!("../shaders/delta_prep.wgsl")),
    ("delta_step", include_str!("../shaders/delta_step.wgsl")),
    ("gemv", include_str!("../shaders/gemv.wgsl")),
    ("gemv_coalesced", include_str!("../shaders/gemv_coalesced.wgsl")),
    ("linear", include_str!("../shaders/linear.wgsl")),
    ("linear_direct", include_str!("../shaders/linear_direct.wgsl")),
    ("ssd_chunks", include_str!("../shaders/ssd_chunks.wgsl")),
    ("ssd_output", include_str!("../shaders/ssd_output.wgsl")),
];

/// The formula before: accurate log and exp still lose Δ's digits below v ≈ −8.
const OLD: &str = "fn softplus(v: f32) -> f32 {
    if (v > 20.0) {
        return v;
    }
    if (v < -15.0) {
        return exp(v);
    }
    return log(1.0 + exp(v));
}
";

/// `function`'s `softplus` over `xs`.
async fn run(ctx: &GpuContext, function: &str, xs: &[f32]) -> Vec<f32> {
    let function = wgsl_fn::cut(function, "fn softplus(v: f32) -> f32 {");
    wgsl_fn::run(ctx, function, "f32", "ys[i] = softplus(xs[i]);", xs, 1).await
}

/// softplus in f64: max(v, 0) + ln(1 + e^−|v|).
fn softplus_f64(v: f32) -> f64 {
    let v = f64::from(v);
    v.max(0.0) + (-v.abs()).exp().ln_1p()
}

/// What a softplus in f32 can reach at `v`, relative: WGSL lets `exp(v)` be off by
/// (3 + 2|v|) ULP (an f32 `v` itself is only known to half an ULP, which moves e^v by |v| half
/// ULPs), and the rest of the formula adds a few ULP: (8 + 2|v|) · 2^−23.
fn allowed(v: f32) -> f64 {
    (8.0 + 2.0 * f64::from(v.abs())) * f64::from(f32::EPSILON)
}

/// The worst error of `got` as a multiple of what is [`allowed`] (below 1e-30 absolute counts
/// as exact: an f32 that underflows, as e^−100 does, is 0 on many GPUs), its relative error
/// and where.
fn worst(xs: &[f32], got: &[f32]) -> (f64, f64, f32) {
    xs.iter().zip(got).fold((0.0, 0.0, 0.0), |w, (&v, &g)| {
        let want = softplus_f64(v);
        let err = (f64::from(g) - want).abs();
        let rel = if err < 1e-30 { 0.0 } else { err / want.abs().max(1e-30) };
        if rel / allowed(v) > w.0 { (rel / allowed(v), rel, v) } else { w }
    })
}

dual_test! {
    async fn every_softplus_matches_f64_over_the_whole_range() {
        let Some(ctx) = gpu("every_softplus_matches_f64_over_the_whole_range").await else { return };
        // [−30, 30] every 1/64, and the far ends (e^v underflows, torch's threshold of 20).
        let mut xs: Vec<f32> = (-30 * 64..=30 * 64).map(|i| i as f32 / 64.0).collect();
        xs.extend([-100.0, -88.0, -87.0, -15.0001, -14.9999, -8.0001, 19.999, 20.001, 50.0, 100.0]);
        for (name, shader) in SHADERS {
            let got = run(&ctx, shader, &xs).await;
            let (share, rel, at) = worst(&xs, &got);
            common::log(&format!(
                "softplus in {name}.wgsl: worst {rel:.2e} relative at v = {at} ({share:.2} of what is allowed there)"
            ));
            assert!(share <= 1.0, "{name}.wgsl: softplus is off by {rel:.2e} (relative) at v = {at}");
        }
        // The control: the old formula's error is plainly visible to this test.
        let (share, rel, at) = worst(&xs, &run(&ctx, OLD, &xs).await);
        common::log(&format!("the old log(1 + e^v): worst {rel:.2e} relative at v = {at} ({share:.0}x what is allowed)"));
        assert!(share > 100.0, "the test no longer sees the old formula's error ({rel:.2e} at {at})");
        assert!(ctx.take_uncaptured_error().is_none(), "no stray GPU error");
    }
}

/// Every shader that defines a softplus is in [`SHADERS`].
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn shaders_are_all_here() {
    let found = wgsl_fn::shaders_where(|s| s.contains("fn softplus("));
    let mut listed: Vec<String> = SHADERS.iter().map(|(n, _)| (*n).to_owned()).collect();
    listed.sort();
    assert_eq!(found, listed, "every shader with a softplus must be tested here");
}
