//! f16 weights and key/value caches on the GPU keep their subnormals: every shader that reads
//! halves does it through its own `fn halves` (WGSL has no includes), which rebuilds a half
//! with a zero exponent by hand because `unpack2x16float` may flush it to zero on some GPUs.
//! Each copy is cut out of its shader and run on the adapter over every f16 bit pattern in
//! both lanes, against the `half` crate's exact conversion. A control that flushes subnormals,
//! as such a GPU would, must be caught, or the test could not see the hazard.

mod common;

use common::{gpu, wgsl_fn};
use webmamba::gpu::GpuContext;

/// Every shader that reads halves (`shaders_are_all_here` checks the list natively).
const SHADERS: &[(&str, &str)] = &[
    ("attention_decode", include_str!("../shaders/attention_decode.wgsl")),
    ("attention_prefill", include_str!("../shaders/attention_prefill.wgsl")),
    ("decode_in_proj", include_str!("../shaders/decode_in_proj.wgsl")),
    ("decode_out_proj", include_str!("../shaders/decode_out_proj.wgsl")),
    ("decode_scan", include_str!("../shaders/decode_scan.wgsl")),
    ("embedding", include_str!("../shaders/embedding.wgsl")),
    ("gemv", include_str!("../shaders/gemv.wgsl")),
    ("gemv_coalesced", include_str!("../shaders/gemv_coalesced.wgsl")),
    ("linear", include_str!("../shaders/linear.wgsl")),
    ("linear_direct", include_str!("../shaders/linear_direct.wgsl")),
];

/// What a GPU that flushes f16 subnormals (to a zero of their sign) computes with a plain
/// `unpack2x16float`.
const FLUSHING: &str = "fn halves(u: u32) -> vec2<f32> {
    let bits = vec2<u32>(u & 0xffffu, u >> 16u);
    let zero = unpack2x16float(u & 0x80008000u);
    return select(unpack2x16float(u), zero, (bits & vec2<u32>(0x7c00u)) == vec2<u32>(0u));
}
";

/// Every f16 bit pattern in the low half, and a permutation of them in the high half.
fn inputs() -> Vec<u32> {
    (0..1u32 << 16).map(|i| i | (((i * 40503) & 0xffff) << 16)).collect()
}

/// `function`'s `halves` over `xs` (two outputs per input).
async fn run(ctx: &GpuContext, function: &str, xs: &[u32]) -> Vec<f32> {
    let function = wgsl_fn::cut(function, "fn halves(u: u32) -> vec2<f32> {");
    let body = "let h = halves(xs[i]);\n        ys[2u * i] = h.x;\n        ys[2u * i + 1u] = h.y;";
    // the u32 patterns travel as f32 bits (a copy, no arithmetic)
    let bits: Vec<f32> = xs.iter().map(|&u| f32::from_bits(u)).collect();
    wgsl_fn::run(ctx, function, "u32", body, &bits, 2).await
}

/// Halves decoded to other bits than `half`'s exact f32 (infinities and NaNs, which the loader
/// never stores, are left out), and how many of them are subnormals; the first one.
fn wrong(xs: &[u32], got: &[f32]) -> (usize, usize, Option<(u16, f32, f32)>) {
    let mut out = (0, 0, None);
    for (i, &u) in xs.iter().enumerate() {
        for (lane, h) in [(u & 0xffff) as u16, (u >> 16) as u16].into_iter().enumerate() {
            let want = half::f16::from_bits(h);
            if !want.is_finite() {
                continue;
            }
            let g = got[2 * i + lane];
            if g.to_bits() != want.to_f32().to_bits() {
                out.0 += 1;
                out.1 += usize::from(h & 0x7c00 == 0 && h & 0x3ff != 0);
                out.2.get_or_insert((h, want.to_f32(), g));
            }
        }
    }
    out
}

dual_test! {
    async fn every_halves_decodes_every_f16_exactly() {
        let Some(ctx) = gpu("every_halves_decodes_every_f16_exactly").await else { return };
        let xs = inputs();
        for (name, shader) in SHADERS {
            let (n, subnormal, first) = wrong(&xs, &run(&ctx, shader, &xs).await);
            common::log(&format!("halves in {name}.wgsl: {n} of 2 × 63,488 finite halves decoded wrongly"));
            assert_eq!(n, 0, "{name}.wgsl: {n} halves wrong ({subnormal} subnormal), first (bits, want, got) {first:?}");
        }
        // The control: a decode that flushes subnormals is caught, on every one of them.
        let (n, subnormal, _) = wrong(&xs, &run(&ctx, FLUSHING, &xs).await);
        common::log(&format!("the flushing control: {n} halves wrong, {subnormal} of them subnormal"));
        assert_eq!((n, subnormal), (2 * 2046, 2 * 2046), "the test must see every flushed subnormal");
        assert!(ctx.take_uncaptured_error().is_none(), "no stray GPU error");
    }
}

/// Every shader that reads halves is in [`SHADERS`], and reads them only through its `halves`.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn shaders_are_all_here() {
    let found = wgsl_fn::shaders_where(|s| s.contains("fn halves(") || s.contains("unpack2x16float("));
    for name in &found {
        let source =
            std::fs::read_to_string(format!("{}/shaders/{name}.wgsl", env!("CARGO_MANIFEST_DIR"))).unwrap();
        let raw = source.matches("unpack2x16float(").count();
        assert!(
            source.contains("fn halves(") && raw == 1,
            "{name}.wgsl: halves must be read through its fn halves only ({raw} unpack2x16float calls)"
        );
    }
    let listed: Vec<String> = SHADERS.iter().map(|(n, _)| (*n).to_owned()).collect();
    assert_eq!(found, listed, "every shader that reads halves must be tested here");
}
