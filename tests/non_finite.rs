//! Non-finite outputs: a model whose weights are all finite but overflow f32 at run time (made
//! here from `tiny-f32`, see [`overflow_checkpoint`]) gives `NonFiniteOutput` naming the
//! position — from `append`, `logits` and `generate` (greedy: on the GPU the device batches,
//! `argmax` refusing; top-k sampling: on the GPU the `top_k` kernel's flag; a repetition
//! penalty: logits read back) — on the CPU reference and the GPU, natively and in the browser.
//! Nothing computed after the overflow is kept in the checkpoint cache, and a rewind before it
//! gives what an uninterrupted run gives.

mod common;

use common::{assert_close, fixtures, log};
use safetensors::{Dtype, SafeTensors};
use webmamba::kernels::top_k::Top;
use webmamba::sampling::{Sampler, SamplingOptions};
use webmamba::{
    CacheConfig, Checkpoint, Engine, Error, GenerateOptions, GpuContext, GpuModelOptions, Logits, Retention,
    Runtime, SessionId,
};

/// The token whose input overflows.
const X: u32 = 7;
/// The hidden coordinate it overflows through.
const J: usize = 0;
/// A prompt without `X`.
const PROMPT: [u32; 6] = [125, 142, 159, 176, 193, 210];
/// Greedy after `PROMPT` on this model (checked against plain forward passes below): `X` third,
/// at position 8.
const GREEDY: [u32; 3] = [210, 28, X];

/// Overwrites the f32 tensor `name` inside a safetensors file's bytes.
fn patch(file: &mut [u8], name: &str, edit: impl FnOnce(&mut [f32])) {
    let (start, len) = {
        let st = SafeTensors::deserialize(file).unwrap();
        let t = st.tensor(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(t.dtype(), Dtype::F32, "{name}");
        (t.data().as_ptr() as usize - file.as_ptr() as usize, t.data().len())
    };
    let mut values: Vec<f32> = bytemuck::pod_collect_to_vec(&file[start..start + len]);
    edit(&mut values);
    file[start..start + len].copy_from_slice(bytemuck::cast_slice(&values));
}

/// `tiny-f32` (D = 16, tied embeddings) with finite weights that overflow from token `X` on:
/// layer 0's RMSNorm gain is 1e30 at coordinate `J`, and only `X`'s embedding row is non-zero
/// there, so every other token's input is exactly what it was without it (0 · 1e30 = 0), while
/// `X`'s reaches the scan as ~1e30 and Δ·u·B overflows to ±Inf in the state; its logits (and
/// every later one) are NaN. `X`'s row is ±10 elsewhere, so its logit is large when positive:
/// greedy and sampling pick it by themselves after a few tokens. The norm gain stays f32 in
/// every GPU weight format, so this overflows on the GPU's default f16 weights too.
fn overflow_checkpoint() -> Checkpoint {
    let f = fixtures::all().into_iter().find(|f| f.name == "tiny-f32").unwrap();
    let mut bytes = f.weights[0].1.to_vec();
    let d = 16;
    patch(&mut bytes, "backbone.embeddings.weight", |e| {
        e.iter_mut().skip(J).step_by(d).for_each(|v| *v = 0.0);
        let row = &mut e[X as usize * d..(X as usize + 1) * d];
        row.iter_mut().for_each(|v| *v = 10.0 * v.signum());
        row[J] = 10.0;
    });
    patch(&mut bytes, "backbone.layers.0.norm.weight", |w| w[J] = 1e30);
    let files = vec![("model.safetensors".to_string(), bytes)];
    Checkpoint::from_bytes(f.config, files, None, Some(f.tokenizer.to_vec())).expect("finite weights load")
}

async fn engine(ctx: Option<&GpuContext>) -> Engine {
    let c = overflow_checkpoint();
    match ctx {
        Some(ctx) => {
            Engine::gpu(ctx, &c, GpuModelOptions { max_tokens: 64, ..Default::default() }).await.unwrap()
        }
        None => Engine::cpu(c.weights().unwrap()),
    }
}

async fn runtime(ctx: Option<&GpuContext>, block_size: usize) -> Runtime {
    let cache = CacheConfig { block_size, retention: Retention::Dense, budget_bytes: 8 << 20 };
    Runtime::new(engine(ctx).await, cache).unwrap()
}

/// The logits after `tokens` from one plain forward pass (no session, no cache).
async fn plain(e: &mut Engine, tokens: &[u32]) -> Vec<f32> {
    e.reset();
    e.forward(tokens, Logits::Last).await.unwrap()
}

fn options(n: usize) -> GenerateOptions {
    GenerateOptions { max_tokens: n, stop_at_eos: false }
}

/// Generates with `sampler`, returning the result and the tokens `on_token` saw.
async fn generate(
    rt: &mut Runtime,
    id: SessionId,
    sampler: &mut Sampler,
    n: usize,
) -> (webmamba::Result<Vec<u32>>, Vec<u32>) {
    let mut seen = Vec::new();
    let r = rt.generate(id, sampler, options(n), |t| {
        seen.push(t);
        true
    });
    (r.await, seen)
}

/// `result` failed with `NonFiniteOutput` in the logits after `position`.
#[track_caller]
fn assert_non_finite<T: std::fmt::Debug>(result: webmamba::Result<T>, position: usize, what: &str) {
    match result {
        Err(e @ Error::NonFiniteOutput { .. }) => {
            assert_eq!(e.code(), "NonFiniteOutput");
            let Error::NonFiniteOutput { position: p, what: w } = &e else { unreachable!() };
            assert_eq!((*p, w.as_str()), (position as u64, "logits"), "{what}: {e}");
        }
        other => panic!("{what}: expected NonFiniteOutput after position {position}, got {other:?}"),
    }
}

/// `append`: the error names the call's last position; the tokens stay, nothing after the
/// overflow is cached, every later call fails the same way until a rewind, which resumes from
/// the prompt-end and gives the plain run's logits and tokens.
async fn append_overflows(ctx: Option<&GpuContext>) {
    let mut reference = engine(ctx).await;
    let name = reference.name();
    let mut rt = runtime(ctx, 4).await;
    let a = rt.new_session().unwrap();
    rt.append(a, &PROMPT).await.unwrap();
    let bad = [X, 28, 3, 41, 5, 6, 9]; // crosses the block boundaries at 8 and 12
    let all: Vec<u32> = PROMPT.iter().chain(&bad).copied().collect();
    assert_non_finite(rt.append(a, &bad).await, 12, &format!("{name}: append"));
    assert_eq!(rt.history(a).unwrap(), all, "{name}: the tokens fed stay");
    assert_non_finite(rt.logits(a), 12, &format!("{name}: logits()"));
    assert_non_finite(generate(&mut rt, a, &mut Sampler::greedy(), 4).await.0, 12, name);
    assert_eq!(rt.history(a).unwrap(), all, "{name}: nothing generated");
    assert_non_finite(rt.rewind(a, all.len()).await, 12, &format!("{name}: rewind to the same end"));
    assert_non_finite(rt.export_state(a).await, 12, &format!("{name}: export"));
    assert_eq!(rt.stats(a).unwrap().checkpoints, [4, 6], "{name}: nothing kept after the overflow");
    // More tokens after it: the state stays non-finite.
    assert_non_finite(rt.append(a, &[1]).await, 13, &format!("{name}: append after"));

    // Back before it: the prompt-end checkpoint, and what a plain run gives.
    let out = rt.rewind(a, PROMPT.len()).await.unwrap();
    assert_eq!((out.prefilled, out.resumed_from), (0, Some(PROMPT.len())), "{name}: from the prompt-end");
    let want = plain(&mut reference, &PROMPT).await;
    assert_close(
        &format!("{name}: logits after the rewind"),
        rt.logits(a).unwrap().unwrap(),
        &want,
        1e-5,
        1e-5,
    );
    let (got, _) = generate(&mut rt, a, &mut Sampler::greedy(), 2).await;
    assert_eq!(got.unwrap(), GREEDY[..2], "{name}: greedy after the rewind");
    rt.append(a, &[3, 41]).await.unwrap();
    let fed: Vec<u32> = PROMPT.iter().chain(&GREEDY[..2]).chain(&[3, 41]).copied().collect();
    let want = plain(&mut reference, &fed).await;
    assert_close(
        &format!("{name}: other tokens where X was"),
        rt.logits(a).unwrap().unwrap(),
        &want,
        1e-5,
        1e-5,
    );

    // An exported state with an infinite state value (the checksum recomputed) is refused.
    let mut blob = rt.export_state(a).await.expect("a finite state exports");
    let body = blob.len() - 32;
    blob[body - 4..body].copy_from_slice(&f32::INFINITY.to_le_bytes());
    let checksum = *blake3::hash(&blob[..body]).as_bytes();
    blob[body..].copy_from_slice(&checksum);
    let b = rt.new_session().unwrap();
    match rt.import_state(b, &blob).await {
        Err(Error::NonFiniteOutput { position, what }) => assert_eq!((position, what.as_str()), (9, "state")),
        other => panic!("{name}: import of an infinite state: {other:?}"),
    }
    assert!(rt.history(b).unwrap().is_empty(), "{name}: the importing session is unchanged");
}

/// Greedy `generate` (on the GPU: the device batches, and with them off the logits read back):
/// the tokens up to `X` are the plain run's and reach `on_token`, the error names `X`'s
/// position, and the block boundary right after it is not kept.
async fn greedy_generation_overflows(ctx: Option<&GpuContext>) {
    let mut reference = engine(ctx).await;
    let name = reference.name();
    // The plain run picks GREEDY, and its logits after X are not finite.
    let mut fed = PROMPT.to_vec();
    for &t in &GREEDY {
        let logits = plain(&mut reference, &fed).await;
        assert_eq!(webmamba::cpu::ops::argmax(&logits), Some(t as usize), "{name}: the plain run picks {t}");
        fed.push(t);
    }
    assert!(plain(&mut reference, &fed).await.iter().all(|v| v.is_nan()), "{name}: NaN after X");
    let at = PROMPT.len() + GREEDY.len() - 1; // X's position

    for batch in [webmamba::GREEDY_BATCH, 0] {
        let what = format!("{name}, greedy batch {batch}");
        let mut rt = runtime(ctx, at + 1).await; // a block boundary right after X
        rt.set_greedy_batch(batch).unwrap();
        let a = rt.new_session().unwrap();
        rt.append(a, &PROMPT).await.unwrap();
        let (got, seen) = generate(&mut rt, a, &mut Sampler::greedy(), 20).await;
        assert_non_finite(got, at, &what);
        assert_eq!(seen, GREEDY, "{what}: on_token saw the tokens up to X");
        assert_eq!(rt.history(a).unwrap(), fed, "{what}: they stay in the history");
        assert_non_finite(rt.logits(a), at, &format!("{what}: logits()"));
        assert_eq!(rt.stats(a).unwrap().checkpoints, [PROMPT.len()], "{what}: nothing kept after X");
        let (again, seen) = generate(&mut rt, a, &mut Sampler::greedy(), 20).await;
        assert_non_finite(again, at, &format!("{what}: again"));
        assert!(seen.is_empty() && rt.history(a).unwrap() == fed, "{what}: nothing more fed");

        // Just before X: the plain run's logits; from the prompt-end, its tokens.
        rt.rewind(a, at).await.unwrap();
        let want = plain(&mut reference, &fed[..at]).await;
        assert_close(&format!("{what}: logits before X"), rt.logits(a).unwrap().unwrap(), &want, 1e-5, 1e-5);
        rt.rewind(a, PROMPT.len()).await.unwrap();
        let (got, _) = generate(&mut rt, a, &mut Sampler::greedy(), 2).await;
        assert_eq!(got.unwrap(), GREEDY[..2], "{what}: regenerated");
        assert_eq!(rt.stats(a).unwrap().checkpoints, [PROMPT.len(), at], "{what}: the new end is kept");
    }
}

/// Sampled `generate` — top-k (on the GPU: the `top_k` kernel's path), top-p and a repetition
/// penalty (logits read back): the sampler draws `X` by itself; the error names its position,
/// the same as drawing from all logits read back (on the GPU, device picking off), and the same
/// seed after a rewind draws the same tokens up to it.
async fn sampled_generation_overflows(ctx: Option<&GpuContext>) {
    let name = engine(ctx).await.name();
    let samplers = [
        SamplingOptions { temperature: 1.0, top_k: 5, ..Default::default() },
        SamplingOptions { temperature: 0.8, top_p: 0.9, ..Default::default() },
        SamplingOptions { temperature: 0.7, repetition_penalty: 1.3, ..Default::default() },
    ];
    for (seed, o) in samplers.into_iter().enumerate() {
        let what = format!("{name}, {o:?}");
        let mut runs = Vec::new();
        for batch in [webmamba::GREEDY_BATCH, 0] {
            let mut rt = runtime(ctx, 4).await;
            rt.set_greedy_batch(batch).unwrap();
            let a = rt.new_session().unwrap();
            rt.append(a, &PROMPT).await.unwrap();
            let (got, seen) = generate(&mut rt, a, &mut Sampler::new(o, seed as u64).unwrap(), 40).await;
            let history = rt.history(a).unwrap().to_vec();
            let at = history.len() - 1;
            assert_non_finite(got, at, &what);
            assert_eq!(history[at], X, "{what}: X was drawn by itself: {history:?}");
            log(&format!("[non-finite] {what}, greedy batch {batch}: X drawn at {at}"));
            assert_eq!(seen, history[PROMPT.len()..], "{what}: on_token saw every token fed");
            assert!(!history[..at].contains(&X), "{what}: the first X");
            assert_non_finite(rt.logits(a), at, &format!("{what}: logits()"));
            assert!(
                rt.stats(a).unwrap().checkpoints.iter().all(|&p| p <= at),
                "{what}: nothing kept after X"
            );

            // The same seed from the prompt-end draws the same tokens up to X.
            rt.rewind(a, PROMPT.len()).await.unwrap();
            let n = at - PROMPT.len();
            let (again, _) = generate(&mut rt, a, &mut Sampler::new(o, seed as u64).unwrap(), n).await;
            assert_eq!(again.unwrap(), history[PROMPT.len()..at], "{what}: up to X again");
            runs.push(history);
        }
        assert_eq!(runs[0], runs[1], "{what}: picking on the device = from all logits read back");
    }
}

dual_backend_test!(append_overflows, greedy_generation_overflows, sampled_generation_overflows);

// The GPU's verdicts on the model's own logits, which the runtime acts on without reading them
// back: `argmax` stops a greedy batch at X, `top_k` flags the logits after it.
dual_test! {
    async fn device_picking_refuses_the_overflow() {
        let Some(ctx) = common::gpu("device_picking_refuses_the_overflow").await else { return };
        let mut e = engine(Some(&ctx)).await;
        plain(&mut e, &PROMPT).await;
        let picks = e.device_picks().unwrap().greedy(GREEDY[0], 4).await.unwrap();
        assert_eq!(picks, GREEDY[1..], "picks up to X, none after");
        plain(&mut e, &PROMPT).await;
        e.forward(&GREEDY[..2], Logits::Last).await.unwrap();
        assert_eq!(e.device_picks().unwrap().forward_top(X, 5).await.unwrap(), Top::NonFinite, "top-k after X");
        assert!(ctx.take_uncaptured_error().is_none(), "no stray GPU error");
    }
}
