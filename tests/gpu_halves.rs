//! f16 weights and key/value caches on the GPU keep their subnormals: every shader that reads
//! halves does it through its own `fn halves` (WGSL has no includes), which rebuilds a half
//! with a zero exponent by hand because `unpack2x16float` may flush it to zero on some GPUs.
//! Each copy is cut out of its shader and run on the adapter over every f16 bit pattern in
//! both lanes, against the `half` crate's exact conversion. A control that flushes subnormals,
//! as such a GPU would, must be caught, or the test could not see the hazard.

mod common;

use common::gpu;
use webmamba::gpu::{Binding, GpuContext, Kernel};

/// Every shader that reads halves (`shaders_are_all_here` checks the list natively).
const SHADERS: &[(&str, &str)] = &[
    ("attention_decode", include_str!("../shaders/attention_decode.wgsl")),
    ("attention_prefill", include_str!("../shaders/attention_prefill.wgsl")),
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

const BINDINGS: &[Binding] = &[Binding::read(0, "xs"), Binding::read_write(1, "ys")];

/// The shader's `fn halves` and nothing else of it, in a kernel `ys[2i..2i+2] = halves(xs[i])`.
fn wrap(shader: &str) -> String {
    let start = shader.find("fn halves(u: u32) -> vec2<f32> {").expect("a halves in the shader");
    let end = start + shader[start..].find("\n}\n").expect("the function's end") + 3;
    format!(
        "{}
@group(0) @binding(0) var<storage, read> xs: array<u32>;       // (n) two halves each
@group(0) @binding(1) var<storage, read_write> ys: array<f32>; // (2n)

@compute @workgroup_size(64)
fn halves_test(@builtin(global_invocation_id) id: vec3<u32>) {{
    if (id.x < arrayLength(&xs)) {{
        let h = halves(xs[id.x]);
        ys[2u * id.x] = h.x;
        ys[2u * id.x + 1u] = h.y;
    }}
}}
",
        &shader[start..end]
    )
}

/// Every f16 bit pattern in the low half, and a permutation of them in the high half.
fn inputs() -> Vec<u32> {
    (0..1u32 << 16).map(|i| i | (((i * 40503) & 0xffff) << 16)).collect()
}

async fn run(ctx: &GpuContext, function: &str, xs: &[u32]) -> Vec<f32> {
    let kernel = Kernel::new(ctx, "halves_test", &wrap(function), BINDINGS).await.expect("compile");
    // the u32 patterns travel as f32 bits (a copy, no arithmetic)
    let bits: Vec<f32> = xs.iter().map(|&u| f32::from_bits(u)).collect();
    let x = ctx.storage_from_f32("xs", &bits).expect("xs");
    let y = ctx.storage_zeroed_f32("ys", 2 * xs.len()).expect("ys");
    let group = kernel.bind(ctx, &[("xs", &x), ("ys", &y)]).expect("bind");
    let groups = (xs.len() as u32).div_ceil(64);
    kernel.submit_once(ctx, &group, (groups, 1, 1), "halves").await.expect("dispatch");
    ctx.read_f32(&y, 0, 2 * xs.len()).await.expect("read back")
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
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/shaders");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("the shaders folder").filter_map(|e| e.ok()) {
        let source = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let name = entry.path().file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned();
        let raw = source.matches("unpack2x16float(").count();
        if raw > 0 || source.contains("fn halves(") {
            assert!(
                source.contains("fn halves(") && raw == 1,
                "{name}.wgsl: halves must be read through its fn halves only ({raw} unpack2x16float calls)"
            );
            found.push(name);
        }
    }
    found.sort();
    let listed: Vec<String> = SHADERS.iter().map(|(n, _)| (*n).to_owned()).collect();
    assert_eq!(found, listed, "every shader that reads halves must be tested here");
}
