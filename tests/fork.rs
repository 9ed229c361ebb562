//! `Runtime::fork`: sessions branching from one position, on a Mamba and a hybrid fixture, on
//! the CPU reference and the GPU (natively and in headless Chromium). Each branch generates what
//! an uncached run of its own history generates; the parent goes on unchanged; nothing is
//! prefilled again.

mod common;

use common::fixtures::{self, Fixture};
use common::{assert_close, log};
use webmamba::sampling::{Sampler, SamplingOptions};
use webmamba::{CacheConfig, Engine, GenerateOptions, GpuContext, GpuModelOptions, Runtime, SessionId};

async fn runtime(f: &Fixture, ctx: Option<&GpuContext>) -> Runtime {
    let c = f.checkpoint();
    let engine = match ctx {
        Some(ctx) => {
            Engine::gpu(ctx, &c, GpuModelOptions { max_tokens: 256, ..Default::default() }).await.unwrap()
        }
        None => Engine::cpu(c.weights().unwrap()),
    };
    Runtime::new(engine, CacheConfig::default()).unwrap()
}

const SAMPLING: SamplingOptions =
    SamplingOptions { temperature: 1.0, top_k: 0, top_p: 1.0, repetition_penalty: 1.0 };

async fn sample(rt: &mut Runtime, id: SessionId, seed: u64, n: usize) -> Vec<u32> {
    let options = GenerateOptions { max_tokens: n, stop_at_eos: false };
    rt.generate(id, &mut Sampler::new(SAMPLING, seed).unwrap(), options, |_| true).await.unwrap()
}

/// A fresh runtime reading `prompt` and sampling with `seed`: the uncached run.
async fn uncached(
    f: &Fixture,
    ctx: Option<&GpuContext>,
    prompt: &[u32],
    seed: u64,
    n: usize,
) -> (Vec<u32>, Vec<f32>) {
    let mut rt = runtime(f, ctx).await;
    let s = rt.new_session().unwrap();
    rt.append(s, prompt).await.unwrap();
    let tokens = sample(&mut rt, s, seed, n).await;
    (tokens, rt.logits(s).unwrap().unwrap().to_vec())
}

async fn forks_branch_from_one_position(ctx: Option<&GpuContext>) {
    // LFM2's short convolutions and Qwen3.5's Gated DeltaNet among them.
    let names = ["medium-bf16", "granite-h-rope-moe-f32", "lfm2-bf16", "qwen35-text-f32"];
    let all: Vec<Fixture> = fixtures::all().into_iter().chain(fixtures::hybrids()).collect();
    for f in all.iter().filter(|f| names.contains(&f.name)) {
        let ids = f.reference().ids;
        let prompt = &ids[..ids.len().min(37)];
        let mut rt = runtime(f, ctx).await;
        let parent = rt.new_session().unwrap();
        rt.append(parent, prompt).await.unwrap();
        let parent_logits = rt.logits(parent).unwrap().unwrap().to_vec();
        let (a, b) = (rt.fork(parent).unwrap(), rt.fork(parent).unwrap());
        for id in [a, b] {
            assert_eq!(rt.history(id).unwrap(), prompt, "{}: a fork has its parent's history", f.name);
            assert_eq!(rt.logits(id).unwrap().unwrap(), &parent_logits[..], "{}: and its logits", f.name);
        }
        let got_a = sample(&mut rt, a, 1, 8).await;
        let got_b = sample(&mut rt, b, 2, 8).await;
        assert_ne!(got_a, got_b, "{}: two seeds, two branches", f.name);
        for (id, seed, got) in [(a, 1, &got_a), (b, 2, &got_b)] {
            let (want, want_logits) = uncached(f, ctx, prompt, seed, 8).await;
            assert_eq!(got, &want, "{}: the fork with seed {seed} vs an uncached run", f.name);
            let what = format!("{}: logits after the fork's tokens", f.name);
            assert_close(&what, rt.logits(id).unwrap().unwrap(), &want_logits, 1e-5, 1e-5);
            assert_eq!(
                rt.stats(id).unwrap().tokens_prefilled,
                8,
                "{}: a fork reads only what it generates",
                f.name
            );
        }
        // The parent: unchanged, and nothing to prefill.
        assert_eq!(rt.history(parent).unwrap(), prompt);
        let outcome = rt.append(parent, &[]).await.unwrap();
        assert_eq!(outcome.prefilled, 0, "{}: the parent's state is where it was", f.name);
        let (want, _) = uncached(f, ctx, prompt, 3, 8).await;
        assert_eq!(
            sample(&mut rt, parent, 3, 8).await,
            want,
            "{}: the parent goes on as if unforked",
            f.name
        );
        // A fork of a fork after generation, its parent closed: it keeps its own pin and state.
        let c = rt.fork(a).unwrap();
        rt.close_session(a).unwrap();
        let history: Vec<u32> = [prompt, &got_a[..]].concat();
        assert_eq!(rt.history(c).unwrap(), &history[..]);
        let (want, _) = uncached(f, ctx, &history, 4, 4).await;
        assert_eq!(sample(&mut rt, c, 4, 4).await, want, "{}: a fork of a closed fork", f.name);
        log(&format!(
            "[fork] {} ({}): forks {got_a:?} / {got_b:?} equal uncached runs",
            f.name,
            if ctx.is_some() { "gpu" } else { "cpu" }
        ));
    }
}

dual_backend_test!(forks_branch_from_one_position);
