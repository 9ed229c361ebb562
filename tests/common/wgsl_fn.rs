//! Testing one WGSL function that several shaders each carry a copy of (WGSL has no includes):
//! [`cut`] takes the copy out of its shader, [`run`] wraps it in a one-line elementwise kernel
//! and runs it on the adapter, and natively [`shaders_defining`] lists every shader that has
//! one, so a test can insist that its list of copies is complete.

use webmamba::gpu::{Binding, GpuContext, Kernel};

const BINDINGS: &[Binding] = &[Binding::read(0, "xs"), Binding::read_write(1, "ys")];

/// The function starting with `signature` (e.g. `fn softplus(v: f32) -> f32 {`) in `shader`,
/// up to its closing brace at the start of a line.
pub fn cut<'a>(shader: &'a str, signature: &str) -> &'a str {
    let start = shader.find(signature).unwrap_or_else(|| panic!("`{signature}` in the shader"));
    let end = start + shader[start..].find("\n}\n").expect("the function's end") + 3;
    &shader[start..end]
}

/// Runs `function` over `xs` (f32 values, or u32 patterns carried as f32 bits: `input` is
/// `f32` or `u32`): invocation i runs `body` with `xs` and `ys` bound (`ys` has `per` outputs
/// per input) and the results come back.
pub async fn run(
    ctx: &GpuContext,
    function: &str,
    input: &str,
    body: &str,
    xs: &[f32],
    per: usize,
) -> Vec<f32> {
    let source = format!(
        "{function}
@group(0) @binding(0) var<storage, read> xs: array<{input}>;   // (n)
@group(0) @binding(1) var<storage, read_write> ys: array<f32>; // (n · per)

@compute @workgroup_size(64)
fn function_test(@builtin(global_invocation_id) id: vec3<u32>) {{
    let i = id.x;
    if (i < arrayLength(&xs)) {{
        {body}
    }}
}}
"
    );
    let kernel = Kernel::new(ctx, "function_test", &source, BINDINGS).await.expect("compile");
    let x = ctx.storage_from_f32("xs", xs).expect("xs");
    let y = ctx.storage_zeroed_f32("ys", per * xs.len()).expect("ys");
    let group = kernel.bind(ctx, &[("xs", &x), ("ys", &y)]).expect("bind");
    let groups = (xs.len() as u32).div_ceil(64);
    kernel.submit_once(ctx, &group, (groups, 1, 1), "function_test").await.expect("dispatch");
    ctx.read_f32(&y, 0, per * xs.len()).await.expect("read back")
}

/// The stems of the shaders (`shaders/*.wgsl`) whose source `has`, sorted.
#[cfg(not(target_arch = "wasm32"))]
pub fn shaders_where(has: impl Fn(&str) -> bool) -> Vec<String> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/shaders");
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .expect("the shaders folder")
        .filter_map(|e| e.ok())
        .filter(|e| std::fs::read_to_string(e.path()).is_ok_and(|s| has(&s)))
        .filter_map(|e| e.path().file_stem().and_then(|s| s.to_str()).map(str::to_owned))
        .collect();
    found.sort();
    found
}
