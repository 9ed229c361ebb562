//! A hybrid's checkpoints in the cache (issue 27), on the CPU reference and on the GPU
//! (natively and in headless Chromium): a checkpoint is the Mamba layers' state plus references
//! to the key/value pages of its whole blocks, shared by every checkpoint and session whose
//! history passes through them; only the partial last block is copied. The resume suite over
//! these checkpoints is `hybrid_sessions` in `tests/session.rs`; the soak test with a budget of
//! a few pages is `tests/soak_hybrid.rs`.

mod common;

use common::fixtures::{self, Fixture};
use common::{assert_close, log};
use webmamba::sampling::Sampler;
use webmamba::{
    CacheConfig, Engine, Error, GenerateOptions, GpuContext, GpuModelOptions, Logits, Retention, Runtime,
    SessionId,
};

async fn engine(f: &Fixture, ctx: Option<&GpuContext>) -> Engine {
    let c = f.checkpoint();
    match ctx {
        Some(ctx) => {
            Engine::gpu(ctx, &c, GpuModelOptions { max_tokens: 256, ..Default::default() }).await.unwrap()
        }
        None => Engine::cpu(c.weights().unwrap()),
    }
}

fn fixture(name: &str) -> Fixture {
    fixtures::hybrids().into_iter().find(|f| f.name == name).unwrap_or_else(|| panic!("fixture {name}"))
}

/// What an uninterrupted, uncached run gives: logits after `prompt` and `n` greedy tokens.
async fn reference(e: &mut Engine, prompt: &[u32], n: usize) -> (Vec<f32>, Vec<u32>) {
    e.reset();
    let first = e.forward(prompt, Logits::Last).await.unwrap();
    let (mut logits, mut out) = (first.clone(), Vec::new());
    for _ in 0..n {
        let t = webmamba::cpu::ops::argmax(&logits).unwrap() as u32;
        out.push(t);
        logits = e.forward(&[t], Logits::Last).await.unwrap();
    }
    (first, out)
}

async fn greedy(rt: &mut Runtime, id: SessionId, n: usize) -> Vec<u32> {
    let options = GenerateOptions { max_tokens: n, stop_at_eos: false };
    rt.generate(id, &mut Sampler::greedy(), options, |_| true).await.unwrap()
}

fn logits(rt: &Runtime, id: SessionId) -> Vec<f32> {
    rt.logits(id).unwrap().expect("logits after the history").to_vec()
}

/// Bytes of one key/value page: B positions of every attention layer's keys and values.
fn page_bytes(e: &Engine, block: usize) -> u64 {
    (block * e.config().state_layout().per_token_floats() * e.kv_value_bytes()) as u64
}

/// The seed's regression (vLLM v0.31.0rc2) on hybrids: sparse retention and a prompt whose
/// length is not a multiple of the interval. The prompt-end checkpoint — its state, its logits,
/// its partial last block, over the pages before it — is kept, so a rewind to the prompt end
/// (regenerate) prefills nothing, the next turn prefills its own tokens only, and an identical
/// resend prefills nothing; every one of them gives the uncached run's logits and tokens.
async fn prompt_end_survives_sparse_retention(ctx: Option<&GpuContext>) {
    let names: &[&str] = match ctx {
        Some(_) => &["jamba-moe-bf16", "lfm2-f32", "qwen35-text-f32"],
        None => &[
            "jamba-moe-bf16",
            "granite-h-nope-legacy-bf16",
            "falcon-h1-mup-bf16",
            "lfm2-f32",
            "qwen35-text-f32",
        ],
    };
    for name in names {
        let f = fixture(name);
        let mut plain = engine(&f, ctx).await;
        let config = CacheConfig { block_size: 4, retention: Retention::Sparse(2), budget_bytes: 16 << 20 };
        let mut rt = Runtime::new(engine(&f, ctx).await, config).unwrap();
        let what = |s: &str| format!("{name} ({}): {s}", rt_name(ctx));
        let prompt: Vec<u32> = (0..13).map(|i| (i * 17 + 3) % 300).collect();
        let (want_logits, want) = reference(&mut plain, &prompt, 5).await;

        let a = rt.new_session().unwrap();
        let out = rt.append(a, &prompt).await.unwrap();
        assert_eq!((out.prefilled, out.resumed_from), (13, None));
        // Blocks of 4, every 2nd boundary kept (8), and the prompt end (13) over 3 pages.
        assert_eq!(rt.stats(a).unwrap().checkpoints, vec![8, 13], "{}", what("checkpoints"));
        assert_eq!(rt.cache_stats().pages, 3, "{}", what("the prompt's 3 whole blocks, one page each"));
        assert_eq!(greedy(&mut rt, a, 5).await, want, "{}", what("generate"));

        // Regenerate: rewind to the prompt end.
        let out = rt.rewind(a, 13).await.unwrap();
        assert_eq!((out.prefilled, out.resumed_from), (0, Some(13)), "{}", what("regenerate prefills 0"));
        assert_close(&what("regenerate"), &logits(&rt, a), &want_logits, 1e-5, 1e-5);
        assert_eq!(greedy(&mut rt, a, 5).await, want, "{}", what("regenerate"));

        // The next turn sent whole by a stateless client: only its own tokens run.
        let turn2: Vec<u32> = prompt.iter().copied().chain([5, 6, 7, 8, 9]).collect();
        let (turn2_logits, turn2_want) = reference(&mut plain, &turn2, 5).await;
        let b = rt.new_session().unwrap();
        let out = rt.append(b, &turn2).await.unwrap();
        assert_eq!((out.prefilled, out.resumed_from), (5, Some(13)), "{}", what("next turn"));
        assert_close(&what("next turn"), &logits(&rt, b), &turn2_logits, 1e-5, 1e-5);
        assert_eq!(greedy(&mut rt, b, 5).await, turn2_want, "{}", what("next turn"));

        // An identical resend prefills nothing.
        let c = rt.new_session().unwrap();
        let out = rt.append(c, &prompt).await.unwrap();
        assert_eq!((out.prefilled, out.resumed_from), (0, Some(13)), "{}", what("identical resend"));
        assert_eq!(greedy(&mut rt, c, 5).await, want, "{}", what("identical resend"));
        log(&what(&format!("{:?}", rt.cache_stats())));
    }
}

fn rt_name(ctx: Option<&GpuContext>) -> &'static str {
    if ctx.is_some() { "gpu" } else { "cpu" }
}

/// Eight sessions over one 2,048-token prefix, each with a question of its own: the first reads
/// the prefix, the others only their questions, and the cache holds one copy of the prefix's
/// 32 pages (bytes from `cacheStats`), not eight. Interleaved follow-ups read only their own
/// tokens, and tokens equal the uncached run's.
async fn sessions_over_one_prefix_share_its_pages(ctx: Option<&GpuContext>) {
    const PREFIX: usize = 2048;
    const BLOCK: usize = 64;
    let f = fixture("jamba-moe-bf16");
    let mut plain = engine(&f, ctx).await;
    let config = CacheConfig { block_size: BLOCK, retention: Retention::Dense, budget_bytes: 64 << 20 };
    let mut rt = Runtime::new(engine(&f, ctx).await, config).unwrap();
    let page = page_bytes(rt.engine(), BLOCK);
    let prefix: Vec<u32> = (0..PREFIX as u32).map(|i| (i * 31 + 7) % 300).collect();
    let question = |s: u32| -> Vec<u32> { (0..8).map(|i| (s * 37 + i * 11 + 1) % 300).collect() };
    let mut ids = Vec::new();
    for s in 0..8u32 {
        let prompt: Vec<u32> = prefix.iter().copied().chain(question(s)).collect();
        let id = rt.new_session().unwrap();
        let out = rt.append(id, &prompt).await.unwrap();
        let want = if s == 0 { (PREFIX + 8, None) } else { (8, Some(PREFIX)) };
        assert_eq!((out.prefilled, out.resumed_from), want, "session {s} reads its question only");
        // The uncached run of two of them (each is 2,056 tokens of prefill).
        if s == 0 || s == 7 {
            let (want_logits, want_tokens) = reference(&mut plain, &prompt, 4).await;
            assert_close(&format!("session {s}"), &logits(&rt, id), &want_logits, 1e-5, 1e-5);
            assert_eq!(greedy(&mut rt, id, 4).await, want_tokens, "session {s}'s tokens");
        }
        ids.push(id);
    }
    let stats = rt.cache_stats();
    let one_copy = (PREFIX / BLOCK) as u64 * page;
    log(&format!(
        "[hybrid cache] {}: 8 sessions over {PREFIX} tokens: {} pages, {} page bytes (one copy: {one_copy}; \
         eight: {}); {:?}",
        rt_name(ctx),
        stats.pages,
        stats.page_bytes,
        8 * one_copy,
        stats
    ));
    assert_eq!((stats.pages, stats.page_bytes), (PREFIX / BLOCK, one_copy), "one copy of the prefix's pages");
    if let Engine::Gpu(m) = rt.engine() {
        // What the device holds: slabs of 16 pages, filled by the prefix's 32 once.
        assert_eq!(m.memory().pages, one_copy, "GPU page slabs: one copy");
    }
    // Follow-ups in turn (each session parked between): each reads its own tokens.
    for (s, &id) in ids.iter().enumerate() {
        let out = rt.append(id, &[1, 2, 3]).await.unwrap();
        assert_eq!((out.prefilled, out.resumed_from), (3, None), "session {s}'s follow-up");
    }
    assert_eq!(rt.cache_stats().pages, PREFIX / BLOCK, "no page copied by parking or resuming");
}

/// A budget too small for a session's own pages: the call that needs more is `CacheBudget`,
/// before anything changes; the session goes on from where it was, with the uncached tokens.
async fn a_budget_short_of_the_pages_is_a_typed_error(ctx: Option<&GpuContext>) {
    const BLOCK: usize = 16;
    let f = fixture("granite-h-nope-legacy-bf16");
    let mut plain = engine(&f, ctx).await;
    let probe = engine(&f, ctx).await;
    let c = probe.config();
    let row = (c.state_layout().per_token_floats() * probe.kv_value_bytes()) as u64;
    let end = webmamba::State::bytes(c) as u64 + 4 * c.vocab_size as u64 + (BLOCK as u64 - 1) * row;
    // Two prompt-ends and three pages.
    let budget = 2 * end + 3 * page_bytes(&probe, BLOCK);
    let config = CacheConfig { block_size: BLOCK, retention: Retention::Sparse(1000), budget_bytes: budget };
    let mut rt = Runtime::new(engine(&f, ctx).await, config).unwrap();
    let prompt: Vec<u32> = (0..40).map(|i| (i * 7 + 2) % 300).collect();
    let id = rt.new_session().unwrap();
    rt.append(id, &prompt).await.unwrap(); // 2 pages
    let more: Vec<u32> = (0..40).map(|i| (i * 5 + 9) % 300).collect();
    let e = rt.append(id, &more).await.unwrap_err(); // 5 pages: more than the budget holds
    assert!(matches!(e, Error::CacheBudget { .. }), "{e}");
    assert_eq!(rt.history(id).unwrap(), &prompt[..], "the history is unchanged");
    let (want_logits, want) = reference(&mut plain, &prompt, 6).await;
    assert_close("after CacheBudget", &logits(&rt, id), &want_logits, 1e-5, 1e-5);
    assert_eq!(greedy(&mut rt, id, 6).await, want, "the session goes on with the uncached tokens");
}

/// An export names the architecture and the layer pattern: a hybrid's state imported into a
/// model of another architecture, or of the same one with other layers, is `StateMismatch`
/// saying which; into the same model it continues exactly (its key/value caches travel with it).
async fn exports_name_the_architecture_and_the_layers(ctx: Option<&GpuContext>) {
    let export = async |name: &str| {
        let mut rt = Runtime::new(engine(&fixture(name), ctx).await, CacheConfig::default()).unwrap();
        let id = rt.new_session().unwrap();
        rt.append(id, &(0..70).map(|i| (i * 3 + 1) % 300).collect::<Vec<u32>>()).await.unwrap();
        (rt.export_state(id).await.unwrap(), greedy(&mut rt, id, 4).await)
    };
    let import = async |name: &str, bytes: &[u8]| {
        let mut rt = Runtime::new(engine(&fixture(name), ctx).await, CacheConfig::default()).unwrap();
        let id = rt.new_session().unwrap();
        rt.import_state(id, bytes).await.map(|()| (rt, id))
    };
    let (jamba, want) = export("jamba-moe-bf16").await;
    let e = import("granite-h-nope-legacy-bf16", &jamba).await.err().expect("another architecture");
    assert!(matches!(&e, Error::StateMismatch(m) if m.contains("jamba")), "{e}");
    let (dense, _) = export("nemotron-h-dense-f32").await;
    let e = import("nemotron-h-moe-bf16", &dense).await.err().expect("other layers");
    assert!(matches!(&e, Error::StateMismatch(m) if m.contains("layers [") && m.contains("mlp")), "{e}");
    let (mut rt, id) = import("jamba-moe-bf16", &jamba).await.unwrap();
    assert_eq!(greedy(&mut rt, id, 4).await, want, "the imported session continues exactly");
}

dual_backend_test!(
    exports_name_the_architecture_and_the_layers,
    prompt_end_survives_sparse_retention,
    sessions_over_one_prefix_share_its_pages,
    a_budget_short_of_the_pages_is_a_typed_error,
);
