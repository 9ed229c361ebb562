//! Greedy generation in batches picked and fed on the GPU (`Runtime::generate` with a plain
//! greedy sampler on the GPU engine): HF's greedy tokens for every fixture, and — stopped
//! anywhere inside a batch — bit for bit the tokens, logits, state and checkpoints of a
//! token-by-token run (one forward call and a CPU argmax per token).

mod common;

use common::fixtures::{self, Fixture};
use common::{assert_close, gpu};
use webmamba::sampling::Sampler;
use webmamba::{
    CacheConfig, Engine, GenerateOptions, GpuContext, GpuModelOptions, Logits, Retention, Runtime,
};

/// Greedy batches the GPU engine submitted from a buffer recorded while the batch before ran.
fn prepared_used(e: &Engine) -> u64 {
    match e {
        Engine::Gpu(m) => m.prepared_batches_used(),
        Engine::Cpu { .. } => panic!("a GPU engine"),
    }
}

const PROMPT: usize = 5;
const GEN: usize = 40;
const BLOCK: usize = 16;

async fn engine(ctx: &GpuContext, f: &Fixture) -> Engine {
    Engine::gpu(ctx, &f.checkpoint(), GpuModelOptions { max_tokens: 64, ..Default::default() }).await.unwrap()
}

fn options(n: usize) -> GenerateOptions {
    GenerateOptions { max_tokens: n, stop_at_eos: false }
}

/// The first index of the largest value (torch.argmax).
fn first_max(values: &[f32]) -> u32 {
    (0..values.len()).fold(0, |best, i| if values[i] > values[best] { i } else { best }) as u32
}

/// A token-by-token run: the tokens, the logits after each, the state after each.
struct Reference {
    tokens: Vec<u32>,
    logits: Vec<Vec<f32>>,
    states: Vec<Vec<f32>>,
}

async fn reference(e: &mut Engine, prompt: &[u32]) -> Reference {
    e.reset();
    let mut logits = e.forward(prompt, Logits::Last).await.unwrap();
    let mut r = Reference { tokens: Vec::new(), logits: Vec::new(), states: Vec::new() };
    for _ in 0..GEN {
        let t = first_max(&logits);
        logits = e.forward(&[t], Logits::Last).await.unwrap();
        r.tokens.push(t);
        r.logits.push(logits.clone());
        r.states.push(e.read_state().await.unwrap().to_flat());
    }
    r
}

/// The session's logits and the working state, which must be the reference's after `n` tokens.
async fn assert_exact(rt: &Runtime, id: webmamba::SessionId, r: &Reference, n: usize, what: &str) {
    let logits = rt.logits(id).unwrap().expect("logits after generating");
    assert!(logits == &r.logits[n - 1][..], "{what}: logits after {n} tokens differ from token by token");
    let state = rt.engine().read_state().await.unwrap().to_flat();
    assert!(state == r.states[n - 1], "{what}: state after {n} tokens differs from token by token");
}

dual_test! {
    async fn greedy_batches_give_hf_tokens() {
        let Some(ctx) = gpu("greedy_batches_give_hf_tokens").await else { return };
        for f in fixtures::all() {
            let r = f.reference();
            let mut rt = Runtime::new(engine(&ctx, &f).await, CacheConfig::default()).unwrap();
            let s = rt.new_session().unwrap();
            rt.append(s, &r.prompt_ids).await.unwrap();
            let got = rt.generate(s, &mut Sampler::greedy(), options(r.greedy_ids.len()), |_| true).await.unwrap();
            assert_eq!(got, r.greedy_ids, "{}: greedy batches vs HF", f.name);
        }
    }

    async fn greedy_batches_stop_anywhere_exactly() {
        let Some(ctx) = gpu("greedy_batches_stop_anywhere_exactly").await else { return };
        let f = fixtures::all().into_iter().find(|f| f.name == "medium-bf16").unwrap();
        let prompt: Vec<u32> = f.reference().ids[..PROMPT].to_vec();
        let want = reference(&mut engine(&ctx, &f).await, &prompt).await;
        let cache = CacheConfig { block_size: BLOCK, retention: Retention::Dense, budget_bytes: 64 << 20 };
        let mut rt = Runtime::new(engine(&ctx, &f).await, cache).unwrap();
        assert_eq!(rt.greedy_batch(), webmamba::GREEDY_BATCH);
        let a = rt.new_session().unwrap();
        rt.append(a, &prompt).await.unwrap();
        let got = rt.generate(a, &mut Sampler::greedy(), options(GEN), |_| true).await.unwrap();
        assert_eq!(got, want.tokens, "default batches: tokens");
        assert_exact(&rt, a, &want, GEN, "default batches").await;
        // Batches of 8 from 16 to 40: the three after the first ran from buffers recorded
        // while the one before them ran (5..13 and 13..16 differ in steps from their next).
        assert_eq!(prepared_used(rt.engine()), 2, "prepared greedy batches");
        // The block boundaries reached while decoding (16, 32) were kept with the right
        // states: a new session resumes at 32 and matches the reference after 30 tokens.
        let mut history = prompt.clone();
        history.extend(&want.tokens[..30]);
        let b = rt.new_session().unwrap();
        let out = rt.append(b, &history).await.unwrap();
        assert_eq!((out.resumed_from, out.prefilled), (Some(32), 3), "resumed from the decode's checkpoint");
        assert_close("resumed at 32", rt.logits(b).unwrap().unwrap(), &want.logits[29], 1e-5, 1e-5);
        for batch in [1, 3, 64, 0] {
            rt.set_greedy_batch(batch).unwrap();
            rt.rewind(a, PROMPT).await.unwrap();
            let got = rt.generate(a, &mut Sampler::greedy(), options(GEN), |_| true).await.unwrap();
            assert_eq!(got, want.tokens, "batch {batch}: tokens");
            assert_exact(&rt, a, &want, GEN, &format!("batch {batch}")).await;
        }
        rt.set_greedy_batch(webmamba::GREEDY_BATCH).unwrap();
        // Stop after k tokens (inside a batch, at its end, at a block boundary), then go on.
        for k in [1, 2, 7, 8, 9, 11, 12, 13, 20, 27] {
            rt.rewind(a, PROMPT).await.unwrap();
            let mut seen = 0;
            let mut got = rt
                .generate(a, &mut Sampler::greedy(), options(GEN), |_| {
                    seen += 1;
                    seen < k
                })
                .await
                .unwrap();
            assert_eq!(got, want.tokens[..k], "stopped after {k}");
            assert_eq!(rt.history(a).unwrap().len(), PROMPT + k);
            assert_exact(&rt, a, &want, k, &format!("stopped after {k}")).await;
            got.extend(rt.generate(a, &mut Sampler::greedy(), options(GEN - k), |_| true).await.unwrap());
            assert_eq!(got, want.tokens, "stopped after {k}, went on");
            assert_exact(&rt, a, &want, GEN, &format!("stopped after {k}, went on")).await;
        }
        assert_eq!(rt.set_greedy_batch(65).unwrap_err().code(), "InvalidInput");
        assert!(rt.generate(a, &mut Sampler::greedy(), options(0), |_| true).await.unwrap().is_empty());
        assert!(ctx.take_uncaptured_error().is_none(), "no stray GPU error");
    }

    async fn prepared_batches_equal_token_by_token_runs() {
        let Some(ctx) = gpu("prepared_batches_equal_token_by_token_runs").await else { return };
        // A Mamba model and hybrids with attention (each step at its own position).
        for name in ["medium-bf16", "jamba-moe-bf16", "granite-h-rope-moe-f32"] {
            let f = fixtures::all().into_iter().chain(fixtures::hybrids()).find(|f| f.name == name).unwrap();
            let prompt: Vec<u32> = f.reference().ids[..PROMPT].to_vec();
            let want = reference(&mut engine(&ctx, &f).await, &prompt).await;
            let mut e = engine(&ctx, &f).await;
            let first = first_max(&e.forward(&prompt, Logits::Last).await.unwrap());
            let mut got = vec![first];
            // Three batches of 8 back to back: the second and third were recorded ahead.
            for _ in 0..3 {
                let last = *got.last().unwrap();
                got.extend(e.device_picks().unwrap().greedy(last, 8).await.unwrap());
            }
            assert_eq!(prepared_used(&e), 2, "{name}: prepared batches");
            assert_eq!(got[..], want.tokens[..25], "{name}: prepared batches' tokens");
            // 24 tokens fed (the last pick is the next to feed).
            let logits = e.device_picks().unwrap().last_logits().await.unwrap();
            assert!(logits == want.logits[23], "{name}: logits after the prepared batches");
            let state = e.read_state().await.unwrap().to_flat();
            assert!(state == want.states[23], "{name}: state after the prepared batches");
            // Rewound into the last batch: the next call is at another position, so the buffer
            // recorded for the position after the batch is not used.
            e.device_picks().unwrap().rewind().unwrap();
            let picks = e.device_picks().unwrap().greedy(want.tokens[16], 8).await.unwrap();
            assert_eq!(picks[..], want.tokens[17..25], "{name}: a batch after a rewind");
            assert_eq!(prepared_used(&e), 2, "{name}: nothing prepared for that position");
        }
        assert!(ctx.take_uncaptured_error().is_none(), "no stray GPU error");
    }
}
