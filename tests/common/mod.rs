//! Test helpers shared by every integration test, on both targets.
//!
//! - [`dual_test!`]: write a test body once; it runs as `#[test]` natively (driven by
//!   `pollster`) and as `#[wasm_bindgen_test]` in headless Chromium.
//! - [`dual_backend_test!`]: a test written once over `Option<&GpuContext>`, run on the CPU
//!   reference and on the GPU (`name::cpu`, `name::gpu`).
//! - [`gpu`]: opens a GPU context and prints the adapter. Without an adapter it FAILS when
//!   `CI=true` or `WEBMAMBA_REQUIRE_GPU=1` (the README's test command sets it) and otherwise
//!   skips, saying so loudly.
//! - [`assert_close`]: elementwise comparison that reports the worst index and both values.

#![allow(dead_code)] // each test binary uses a different subset of these helpers

pub mod counting;
pub mod fixtures;
pub mod wgsl_fn;

use webmamba::{GpuContext, GpuModel};

#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

/// Declares async tests that run on both targets.
#[macro_export]
macro_rules! dual_test {
    ($(async fn $name:ident() $body:block)*) => {$(
        #[cfg(target_arch = "wasm32")]
        #[wasm_bindgen_test::wasm_bindgen_test]
        async fn $name() $body

        #[cfg(not(target_arch = "wasm32"))]
        #[test]
        fn $name() {
            pollster::block_on(async $body)
        }
    )*};
}

/// Tests written once over `Option<&GpuContext>` (`None`: the CPU reference), each run on both
/// backends: `dual_backend_test!(name, …)` makes `name::cpu` and `name::gpu` (which needs an
/// adapter: see [`gpu`]) from `async fn name(ctx: Option<&GpuContext>)`, natively and in the
/// browser.
#[macro_export]
macro_rules! dual_backend_test {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            $crate::dual_test! {
                async fn cpu() {
                    super::$name(None).await
                }
                async fn gpu() {
                    let Some(ctx) = $crate::common::gpu(concat!(stringify!($name), "::gpu")).await else { return };
                    super::$name(Some(&ctx)).await
                }
            }
        }
    )*};
}

/// Prints a line where the test runner shows it (stderr natively, the console in a browser).
pub fn log(message: &str) {
    #[cfg(target_arch = "wasm32")]
    wasm_bindgen_test::console_log!("{message}");
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("{message}");
}

/// Whether a missing adapter must fail the test rather than skip it.
fn gpu_required() -> bool {
    // In the browser the environment is the build's: the variables are read at compile time.
    #[cfg(target_arch = "wasm32")]
    let (ci, require) =
        (option_env!("CI").map(str::to_owned), option_env!("WEBMAMBA_REQUIRE_GPU").map(str::to_owned));
    #[cfg(not(target_arch = "wasm32"))]
    let (ci, require) = (std::env::var("CI").ok(), std::env::var("WEBMAMBA_REQUIRE_GPU").ok());
    ci.as_deref().is_some_and(|v| v == "true" || v == "1") || require.as_deref().is_some_and(|v| v == "1")
}

/// Whether this build is for a browser engine known to give no WebGPU adapter here (Firefox on
/// this machine, read at build time like the variables above): then every GPU test must find
/// exactly the typed `NoAdapter` error — checked — and says it did not run.
fn no_adapter_expected() -> bool {
    #[cfg(target_arch = "wasm32")]
    let expect = option_env!("WEBMAMBA_NO_ADAPTER").map(str::to_owned);
    #[cfg(not(target_arch = "wasm32"))]
    let expect = std::env::var("WEBMAMBA_NO_ADAPTER").ok();
    expect.as_deref() == Some("1")
}

/// Opens a GPU context for `test` and logs which adapter it runs on. Returns `None` (skip) only
/// when no adapter exists AND neither `CI` nor `WEBMAMBA_REQUIRE_GPU` asks for one; then it
/// says loudly that the test did not run. Under `WEBMAMBA_NO_ADAPTER=1` an adapter, or any
/// error but `NoAdapter`, fails the test.
pub async fn gpu(test: &str) -> Option<GpuContext> {
    if no_adapter_expected() {
        match GpuContext::new().await {
            Err(webmamba::Error::NoAdapter { reason }) => {
                log(&format!("[gpu] {test}: not run: no adapter here, as expected (NoAdapter: {reason})"));
                return None;
            }
            Err(e) => panic!("[gpu] {test}: expected the typed NoAdapter error, got {e:?}"),
            Ok(ctx) => panic!(
                "[gpu] {test}: WEBMAMBA_NO_ADAPTER=1 but an adapter exists ({}): run the GPU tests here",
                ctx.summary()
            ),
        }
    }
    if let Some(ctx) = shared_context(test) {
        return Some(ctx);
    }
    match GpuContext::new().await {
        Ok(ctx) => {
            log(&format!("[gpu] {test}: running on {}", ctx.summary()));
            keep_shared(&ctx);
            Some(ctx)
        }
        Err(e) if gpu_required() => {
            panic!("[gpu] {test}: a GPU adapter is required here (CI / WEBMAMBA_REQUIRE_GPU) but: {e}")
        }
        Err(e) => {
            log(&format!(
                "\n!!!!!!!! [gpu] {test}: SKIPPED, NOT RUN: {e}\n\
                 !!!!!!!! set WEBMAMBA_REQUIRE_GPU=1 to make this a failure\n"
            ));
            None
        }
    }
}

#[cfg(target_arch = "wasm32")]
thread_local! {
    /// In the browser every test of a binary runs in one page, one after another: they share a
    /// context, so the kernels one test compiled serve the next (the context's kernel cache;
    /// compiling is most of a load on SwiftShader). Natively each test opens its own (tests run
    /// in parallel there, and some destroy their device).
    static SHARED: std::cell::RefCell<Option<GpuContext>> = const { std::cell::RefCell::new(None) };
}

/// The context an earlier test of this page opened, if it is still usable. A GPU error an
/// earlier test left unreported fails this one, naming it, rather than being taken by it.
#[cfg(target_arch = "wasm32")]
fn shared_context(test: &str) -> Option<GpuContext> {
    let ctx = SHARED.with(|s| s.borrow().clone())?;
    if ctx.lost().is_some() {
        SHARED.with(|s| s.borrow_mut().take());
        return None;
    }
    if let Some(error) = ctx.take_uncaptured_error() {
        panic!("[gpu] {test}: an earlier test left a GPU error on the shared context: {error}");
    }
    log(&format!("[gpu] {test}: running on {} (the page's context)", ctx.summary()));
    Some(ctx)
}

#[cfg(not(target_arch = "wasm32"))]
fn shared_context(_: &str) -> Option<GpuContext> {
    None
}

#[cfg(target_arch = "wasm32")]
fn keep_shared(ctx: &GpuContext) {
    SHARED.with(|s| *s.borrow_mut() = Some(ctx.clone()));
}

#[cfg(not(target_arch = "wasm32"))]
fn keep_shared(_: &GpuContext) {}

/// Two models' conv and SSM states, layer by layer, within 1e-5 + 1e-5 relative, then a batch of
/// `steps` greedy steps from `next` on each (argmax on the GPU between the steps): the same
/// tokens. For loads of one model that sum in different orders (fused / unfused, subgroups / tree).
pub async fn assert_same_states_and_greedy(
    what: &str,
    (a, b): (&mut GpuModel, &mut GpuModel),
    next: u32,
    steps: usize,
) {
    let (sa, sb) = (a.read_state().await.unwrap(), b.read_state().await.unwrap());
    for layer in 0..sa.layers.len() {
        for region in ["conv", "ssm"] {
            if let (Some(x), Some(y)) = (sa.region(layer, region), sb.region(layer, region)) {
                assert_close(&format!("{what}: layer {layer} {region} state"), x, y, 1e-5, 1e-5);
            }
        }
    }
    let ga = a.greedy(next, steps).await.unwrap();
    let gb = b.greedy(next, steps).await.unwrap();
    assert_eq!(ga, gb, "{what}: greedy tokens of a batch of steps");
}

/// Asserts `|actual - expected| <= atol + rtol * |expected|` everywhere; on failure reports the
/// worst index (largest excess over its tolerance), both values, and how many elements failed.
pub fn assert_close(what: &str, actual: &[f32], expected: &[f32], atol: f32, rtol: f32) {
    assert_eq!(
        actual.len(),
        expected.len(),
        "{what}: length {} != expected {}",
        actual.len(),
        expected.len()
    );
    let mut worst: Option<(usize, f32)> = None;
    let mut failures = 0usize;
    let mut max_abs = 0.0f32;
    for (i, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        let err = (a - e).abs();
        let excess = if err.is_nan() { f32::INFINITY } else { err - (atol + rtol * e.abs()) };
        max_abs = max_abs.max(err);
        if excess > 0.0 {
            failures += 1;
            if worst.is_none_or(|(_, w)| excess > w) {
                worst = Some((i, excess));
            }
        }
    }
    if let Some((i, _)) = worst {
        panic!(
            "{what}: {failures} of {} elements differ beyond atol {atol:e} + rtol {rtol:e}; \
             worst at index {i}: actual {} vs expected {} (|diff| {:e})",
            actual.len(),
            actual[i],
            expected[i],
            (actual[i] - expected[i]).abs()
        );
    }
    log(&format!("[close] {what}: {} elements, max |diff| {max_abs:e}", actual.len()));
}

/// Perplexity of `logits` (T, V) predicting `tokens[1..]`: exp of the mean negative
/// log-likelihood, computed in f64.
pub fn perplexity(logits: &[f32], tokens: &[u32], vocab: usize) -> f64 {
    let nll: f64 = logits
        .chunks_exact(vocab)
        .zip(&tokens[1..])
        .map(|(row, &next)| {
            let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
            let log_sum = row.iter().map(|&v| (v as f64 - max).exp()).sum::<f64>().ln() + max;
            log_sum - row[next as usize] as f64
        })
        .sum();
    (nll / (tokens.len() - 1) as f64).exp()
}
