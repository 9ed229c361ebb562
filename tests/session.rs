//! Sessions over the checkpoint cache, on the CPU reference and on the GPU (natively and in
//! headless Chromium): resuming from any checkpoint gives what an uninterrupted run gives.

mod common;

use common::fixtures::{self, Fixture};
use common::{assert_close, log};
use rand::{Rng, SeedableRng, rngs::SmallRng};
use webmamba::cpu::threads::Threads;
use webmamba::sampling::Sampler;
use webmamba::{
    CacheConfig, Engine, Error, GenerateOptions, GpuContext, GpuModelOptions, Logits, Retention, Runtime,
    SessionId,
};

const GEN: usize = 6;

async fn engine(f: &Fixture, ctx: Option<&GpuContext>) -> Engine {
    let c = f.checkpoint();
    match ctx {
        Some(ctx) => {
            Engine::gpu(ctx, &c, GpuModelOptions { max_tokens: 256, ..Default::default() }).await.unwrap()
        }
        None => Engine::cpu(c.weights().unwrap()),
    }
}

/// What an uninterrupted run gives: logits after the prompt and `GEN` greedy tokens.
async fn reference(e: &mut Engine, prompt: &[u32]) -> (Vec<f32>, Vec<u32>) {
    e.reset();
    let first = e.forward(prompt, Logits::Last).await.unwrap();
    let (mut logits, mut out) = (first.clone(), Vec::new());
    for _ in 0..GEN {
        let t = webmamba::cpu::ops::argmax(&logits).unwrap() as u32;
        out.push(t);
        logits = e.forward(&[t], Logits::Last).await.unwrap();
    }
    (first, out)
}

fn options(n: usize) -> GenerateOptions {
    GenerateOptions { max_tokens: n, stop_at_eos: false }
}

async fn greedy(rt: &mut Runtime, id: SessionId, n: usize) -> Vec<u32> {
    rt.generate(id, &mut Sampler::greedy(), options(n), |_| true).await.unwrap()
}

fn prompt_logits(rt: &Runtime, id: SessionId) -> Vec<f32> {
    rt.logits(id).unwrap().expect("logits after the prompt").to_vec()
}

/// Every way of reaching the same prompt gives the uninterrupted run's logits and tokens: on a
/// Mamba-1 fixture at five block sizes, on a Falcon-Mamba one at two, and on Mamba-2 ones (G = 2
/// and G = 4) at three (prompts up to 3·64 + 1 tokens cross the GPU's 64-token SSD chunks).
async fn resume_equivalence(ctx: Option<&GpuContext>) {
    let all = fixtures::all();
    let dense = Retention::Dense;
    resume_equivalence_on(&all[0], &[1, 3, 8, 16, 64], dense, ctx).await;
    let named = |name: &str| all.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("fixture {name}"));
    resume_equivalence_on(named("falcon-f32"), &[3, 16], dense, ctx).await;
    resume_equivalence_on(named("mamba2-f32"), &[1, 5, 64], dense, ctx).await;
    // Sparse retention (every 2nd boundary, and always the prompt end) on Mamba-2.
    resume_equivalence_on(named("mamba2-f32"), &[4], Retention::Sparse(2), ctx).await;
    resume_equivalence_on(named("mamba2-groups-f16"), &[8], dense, ctx).await;
}

async fn resume_equivalence_on(
    f: &Fixture,
    blocks: &[usize],
    retention: Retention,
    ctx: Option<&GpuContext>,
) {
    let mut reference_engine = engine(f, ctx).await;
    let vocab = reference_engine.config().vocab_size as u32;
    let backend = reference_engine.name();
    let mut rng = SmallRng::seed_from_u64(5);
    for &block in blocks {
        let config = CacheConfig { block_size: block, retention, budget_bytes: 64 << 20 };
        let mut rt = Runtime::new(engine(f, ctx).await, config).unwrap();
        let lengths =
            [block.saturating_sub(1).max(1), block, 3 * block, 3 * block - 1, 3 * block + 1, 2 * block + 2];
        for (case, &p) in lengths.iter().enumerate() {
            let prompt: Vec<u32> = (0..p).map(|_| rng.random_range(0..vocab)).collect();
            let (want_logits, want) = reference(&mut reference_engine, &prompt).await;
            let what = |s: &str| format!("{backend}: B={block} P={p} {s}");
            let check = |rt: &Runtime, id, s: &str| {
                assert_close(&what(s), &prompt_logits(rt, id), &want_logits, 1e-5, 1e-5);
            };

            // Split feeding at a random point, then generate.
            let a = rt.new_session().unwrap();
            let split = rng.random_range(0..=p);
            rt.append(a, &prompt[..split]).await.unwrap();
            let out = rt.append(a, &prompt[split..]).await.unwrap();
            assert_eq!(out.prefilled, p - split, "{}", what("a follow-up reads its own tokens"));
            check(&rt, a, "split");
            assert_eq!(greedy(&mut rt, a, GEN).await, want, "{}", what("split + generate"));

            // Regenerate: rewind to the prompt end (a prompt-end checkpoint), generate again.
            let out = rt.rewind(a, p).await.unwrap();
            assert_eq!(out.prefilled, 0, "{}", what("rewind to the prompt end prefills nothing"));
            check(&rt, a, "regenerate");
            assert_eq!(greedy(&mut rt, a, GEN).await, want, "{}", what("regenerate"));

            // Stop after k tokens, continue: the same tokens as one uninterrupted run.
            rt.rewind(a, p).await.unwrap();
            let k = rng.random_range(1..GEN);
            let mut seen = 0;
            let mut got = rt
                .generate(a, &mut Sampler::greedy(), options(GEN), |_| {
                    seen += 1;
                    seen < k
                })
                .await
                .unwrap();
            assert_eq!(got.len(), k, "{}", what("stopped between steps"));
            got.extend(greedy(&mut rt, a, GEN - k).await);
            assert_eq!(got, want, "{}", what(&format!("stop after {k}, continue")));

            // Rewind to any point, feed the rest again.
            let r = rng.random_range(0..=p);
            rt.rewind(a, r).await.unwrap();
            rt.append(a, &prompt[r..]).await.unwrap();
            check(&rt, a, &format!("rewind to {r} + re-feed"));
            assert_eq!(greedy(&mut rt, a, GEN).await, want, "{}", what("rewind + re-feed"));

            // A second session sending the same prompt: nothing to prefill.
            let b = rt.new_session().unwrap();
            let out = rt.append(b, &prompt).await.unwrap();
            assert_eq!((out.prefilled, out.resumed_from), (0, Some(p)), "{}", what("identical resend"));
            check(&rt, b, "identical resend");
            assert_eq!(greedy(&mut rt, b, GEN).await, want, "{}", what("identical resend"));

            // Edit one token anywhere: resume at or before it, and match a fresh run.
            let e = rng.random_range(0..p);
            let mut edited = prompt.clone();
            edited[e] = (edited[e] + 1) % vocab;
            let (edit_logits, edit_want) = reference(&mut reference_engine, &edited).await;
            let out = rt.edit(b, &edited).await.unwrap();
            assert!(out.resumed_from.unwrap_or(0) <= e, "{}", what("edit resumes before the edit"));
            assert!(out.prefilled >= p - e, "{}", what("edit re-prefills the edited part"));
            assert_close(&what(&format!("edit at {e}")), &prompt_logits(&rt, b), &edit_logits, 1e-5, 1e-5);
            assert_eq!(greedy(&mut rt, b, GEN).await, edit_want, "{}", what("edit + generate"));

            rt.close_session(a).unwrap();
            rt.close_session(b).unwrap();
            if case == 0 {
                log(&format!("[session] {backend} B={block}: {:?}", rt.cache_stats()));
            }
        }
    }
}

/// The vLLM v0.31.0rc2 regression: sparse retention, a prompt whose length is not a multiple of
/// the interval. The prompt-end checkpoint must exist, serve the next turn, and make an
/// identical resend prefill nothing.
async fn prompt_end_survives_sparse_retention(ctx: Option<&GpuContext>) {
    for f in fixtures::all().iter().filter(|f| ["medium-bf16", "mamba2-f32"].contains(&f.name)) {
        prompt_end_survives_sparse_retention_on(f, ctx).await;
    }
}

async fn prompt_end_survives_sparse_retention_on(f: &Fixture, ctx: Option<&GpuContext>) {
    let config = CacheConfig { block_size: 4, retention: Retention::Sparse(2), budget_bytes: 16 << 20 };
    let mut rt = Runtime::new(engine(f, ctx).await, config).unwrap();
    let prompt: Vec<u32> = (0..13).map(|i| (i * 17 + 3) % 300).collect();
    let a = rt.new_session().unwrap();
    let out = rt.append(a, &prompt).await.unwrap();
    assert_eq!((out.prefilled, out.resumed_from), (13, None));
    // Sparse: blocks of 4, every 2nd boundary kept (8), plus the prompt end (13).
    assert_eq!(rt.stats(a).unwrap().checkpoints, vec![8, 13]);

    // Next turn, sent whole by a stateless client (a new session): only the new tokens run.
    let turn2: Vec<u32> = prompt.iter().copied().chain([5, 6, 7, 8, 9]).collect();
    let b = rt.new_session().unwrap();
    let out = rt.append(b, &turn2).await.unwrap();
    assert_eq!((out.prefilled, out.resumed_from), (5, Some(13)), "the prompt-end served the next turn");
    // The same session's own next turn (different tokens) continues its live state.
    let out = rt.append(a, &[10, 11, 12, 13, 14]).await.unwrap();
    assert_eq!((out.prefilled, out.resumed_from), (5, None));

    // An identical resend prefills nothing.
    let c = rt.new_session().unwrap();
    let out = rt.append(c, &prompt).await.unwrap();
    assert_eq!((out.prefilled, out.resumed_from), (0, Some(13)));
    let stats = rt.stats(c).unwrap();
    assert_eq!((stats.tokens_prefilled, stats.hits), (0, 1));
}

/// A long history and a short follow-up: the follow-up prefills only itself.
async fn long_history_short_follow_up(ctx: Option<&GpuContext>) {
    let f = &fixtures::all()[0];
    let config = CacheConfig { block_size: 64, retention: Retention::Sparse(4), budget_bytes: 16 << 20 };
    let mut rt = Runtime::new(engine(f, ctx).await, config).unwrap();
    let history: Vec<u32> = (0..2048).map(|i| (i * 31 + 7) % 300).collect();
    let follow: Vec<u32> = (0..16).map(|i| (i * 13 + 1) % 300).collect();
    let a = rt.new_session().unwrap();
    assert_eq!(rt.append(a, &history).await.unwrap().prefilled, 2048);
    assert!(rt.append(a, &follow).await.unwrap().prefilled <= 16);
    // Stateless resend of everything in a new session: the same.
    let b = rt.new_session().unwrap();
    let all: Vec<u32> = history.iter().chain(&follow).copied().collect();
    let out = rt.append(b, &all).await.unwrap();
    assert!(out.prefilled <= 16, "{out:?}");
    let fresh = rt.new_session().unwrap();
    rt.append(fresh, &history[..100]).await.unwrap();
    log(&format!("[session] 2048+16: {:?}, stats {:?}", out, rt.stats(b).unwrap()));
}

/// The smallest budget the runtime accepts serves turn after turn: one prompt-end's worth is
/// refused at construction (it used to be accepted, and the second turn failed with
/// CacheBudget); two prompt-ends' worth serves three turns.
async fn the_smallest_budget_serves_every_turn(ctx: Option<&GpuContext>) {
    let f = &fixtures::all()[3];
    let one = {
        let e = engine(f, ctx).await;
        let c = e.config();
        webmamba::State::bytes(c) as u64 + 4 * c.vocab_size as u64
    };
    let small = |budget_bytes| CacheConfig { block_size: 4, retention: Retention::Dense, budget_bytes };
    let e = Runtime::new(engine(f, ctx).await, small(one)).err().expect("one prompt-end is too small");
    assert_eq!(e.code(), "CacheBudget", "{e}");
    let mut rt = Runtime::new(engine(f, ctx).await, small(2 * one)).unwrap();
    let s = rt.new_session().unwrap();
    for turn in 0..3u32 {
        rt.append(s, &[1 + turn, 2, 3, 4, 5, 6, 7]).await.unwrap_or_else(|e| panic!("turn {turn}: {e}"));
        let out = rt.generate(s, &mut Sampler::greedy(), options(3), |_| true).await.unwrap();
        assert_eq!(out.len(), 3, "turn {turn}");
    }
    assert!(rt.cache_stats().bytes_used <= 2 * one);
}

/// Eviction never drops a live session's pinned prompt-end and never exceeds the budget; a
/// prompt-end that cannot be kept is a typed error that changes nothing.
async fn eviction_respects_pins_and_budget(ctx: Option<&GpuContext>) {
    let f = &fixtures::all()[0];
    let e = engine(f, ctx).await;
    let state_bytes = webmamba::State::bytes(e.config()) as u64;
    let logits_bytes = 4 * e.config().vocab_size as u64;
    // Room for 4 prompt-ends (state + logits), or more bare block states.
    let budget = 4 * (state_bytes + logits_bytes);
    let config = CacheConfig { block_size: 2, retention: Retention::Dense, budget_bytes: budget };
    let mut rt = Runtime::new(e, config).unwrap();
    let mut rng = SmallRng::seed_from_u64(9);
    let sessions: Vec<SessionId> = (0..3).map(|_| rt.new_session().unwrap()).collect();
    let mut prompts = vec![Vec::new(); 3];
    for round in 0..12 {
        let i = round % 3;
        let extra: Vec<u32> = (0..rng.random_range(1..9)).map(|_| rng.random_range(0..300)).collect();
        rt.append(sessions[i], &extra).await.unwrap();
        prompts[i].extend(extra);
        let stats = rt.cache_stats();
        assert!(stats.bytes_used <= budget, "round {round}: {stats:?}");
        // Every live session's latest prompt-end is still there: a resend prefills nothing.
        for (j, &s) in sessions.iter().enumerate().filter(|(j, _)| !prompts[*j].is_empty()) {
            assert!(
                rt.stats(s).unwrap().checkpoints.contains(&prompts[j].len()),
                "round {round}: session {j}"
            );
        }
    }
    assert!(rt.cache_stats().evictions > 0, "the budget forced evictions");

    // A 4th and 5th session pin 2 more prompt-ends: the 5th cannot fit (4 fit), fails cleanly.
    let d = rt.new_session().unwrap();
    rt.append(d, &[1, 2, 3]).await.unwrap();
    let x = rt.new_session().unwrap();
    let err = rt.append(x, &[4, 5, 6]).await.unwrap_err();
    assert!(matches!(err, Error::CacheBudget { .. }), "{err}");
    assert_eq!(rt.history(x).unwrap(), &[] as &[u32], "a failed call changes nothing");
    assert!(rt.cache_stats().bytes_used <= budget);
    // Closing a session unpins its checkpoint; the call then succeeds.
    rt.close_session(d).unwrap();
    assert_eq!(rt.append(x, &[4, 5, 6]).await.unwrap().prefilled, 3);
    // And every session still continues exactly.
    for (j, &s) in sessions.iter().enumerate() {
        let out = rt.edit(s, &prompts[j]).await.unwrap();
        assert_eq!(out.prefilled, 0, "session {j}");
    }
}

/// Export, import elsewhere (also into another backend of the same model), reject mismatches.
async fn export_import(ctx: Option<&GpuContext>) {
    let all = fixtures::all();
    let (bytes, rest) = export_import_on(&all[3], ctx).await;
    let mamba2 = all.iter().find(|f| f.name == "mamba2-f32").unwrap();
    export_import_on(mamba2, ctx).await;
    let mut other = Runtime::new(engine(&all[3], None).await, CacheConfig::default()).unwrap();

    // The format names the architecture: other architectures refuse a Mamba state by it.
    for (name, arch) in [("falcon-bias-bf16", "falcon_mamba"), ("mamba2-f32", "mamba2")] {
        let f = all.iter().find(|f| f.name == name).unwrap();
        let mut rt = Runtime::new(engine(f, None).await, CacheConfig::default()).unwrap();
        let d = rt.new_session().unwrap();
        let e = rt.import_state(d, &bytes).await.unwrap_err();
        assert!(e.to_string().contains(&format!("from a mamba model; this one is {arch}")), "{e}");
    }

    // States of version 1 (before the architecture field: Mamba-1) and 2 (before the layer
    // pattern) still import.
    let field = |at: usize| 4 + u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let arch_end = 12 + field(12);
    let pattern_end = arch_end + field(arch_end);
    let body = &bytes[pattern_end..bytes.len() - 32];
    let older = [
        [&bytes[..8], &1u32.to_le_bytes()[..], body].concat(),
        [&bytes[..8], &2u32.to_le_bytes()[..], &bytes[12..arch_end], body].concat(),
    ];
    for mut old in older {
        let checksum = *blake3::hash(&old).as_bytes();
        old.extend_from_slice(&checksum);
        let e2 = other.new_session().unwrap();
        other.import_state(e2, &old).await.unwrap();
        assert_eq!(greedy(&mut other, e2, 5).await, rest);
    }
}

/// Exports a session of `f` and imports it into a fresh CPU runtime: the same history and next
/// tokens; damaged and foreign bytes are refused. Returns the export and the tokens after it.
async fn export_import_on(f: &Fixture, ctx: Option<&GpuContext>) -> (Vec<u8>, Vec<u32>) {
    let mut rt = Runtime::new(engine(f, ctx).await, CacheConfig::default()).unwrap();
    let a = rt.new_session().unwrap();
    rt.append(a, &f.reference().prompt_ids).await.unwrap();
    let first = greedy(&mut rt, a, 3).await;
    let bytes = rt.export_state(a).await.unwrap();
    let rest = greedy(&mut rt, a, 5).await;

    // Into a fresh runtime on the CPU reference: continues with the same tokens.
    let mut other = Runtime::new(engine(f, None).await, CacheConfig::default()).unwrap();
    let b = other.new_session().unwrap();
    other.import_state(b, &bytes).await.unwrap();
    let mut want_history = f.reference().prompt_ids;
    want_history.extend(&first);
    assert_eq!(other.history(b).unwrap(), &want_history[..]);
    assert_eq!(greedy(&mut other, b, 5).await, rest);

    let mut damaged = bytes.clone();
    damaged[200] ^= 1;
    assert_eq!(other.import_state(b, &damaged).await.unwrap_err().code(), "CorruptState");
    assert_eq!(other.import_state(b, &bytes[..100]).await.unwrap_err().code(), "CorruptState");
    let mut foreign = Runtime::new(engine(&fixtures::all()[1], None).await, CacheConfig::default()).unwrap();
    let c = foreign.new_session().unwrap();
    assert_eq!(foreign.import_state(c, &bytes).await.unwrap_err().code(), "StateMismatch");

    (bytes, rest)
}

/// Sessions on the hybrid fixtures (every one on the CPU natively, one per block kind on the GPU,
/// three families in a browser), their
/// checkpoints over shared key/value pages: split prompts, regenerate, stop/continue, rewind +
/// re-feed, identical resends and edits equal an uninterrupted run (with dense retention, and
/// sparse on three families), and an export imported into a new model continues the same — the
/// attention caches travel with the state.
async fn hybrid_sessions(ctx: Option<&GpuContext>) {
    // On the GPU, one fixture per block kind the CPU runs (every kind, each routing, Mamba-1 and
    // Mamba-2): their sessions take minutes on a software adapter.
    let on_gpu = [
        "granite-h-rope-moe-f32",
        "jamba-moe-bf16",
        "falcon-h1-mup-bf16",
        "zamba2-shared-f16",
        "lfm2-bf16",
        "qwen35-vl-bf16",
    ];
    // Sparse retention (every 2nd boundary, and always the prompt end) on five families.
    let sparse =
        ["granite-h-rope-moe-f32", "jamba-moe-bf16", "falcon-h1-mup-bf16", "lfm2-f32", "qwen35-vl-bf16"];
    // In a browser, the first three families on both backends (the native run covers the rest).
    let all = fixtures::hybrids();
    let here = fixtures::natively_all(all, &sparse[..3]);
    for f in here.into_iter().filter(|f| ctx.is_none() || on_gpu.contains(&f.name)) {
        resume_equivalence_on(&f, &[16], Retention::Dense, ctx).await;
        if sparse.contains(&f.name) {
            resume_equivalence_on(&f, &[4], Retention::Sparse(2), ctx).await;
        }
        export_import_on(&f, ctx).await;
        log(&format!(
            "[session] {} ({}): resumes and exports exactly",
            f.name,
            if ctx.is_some() { "gpu" } else { "cpu" }
        ));
    }
}

/// A hybrid whose maxContext is the prompt + 5: generation hands out 5 tokens (HF's), then
/// stops with ContextFull keeping them; an append past it is refused and changes nothing; after
/// a rewind generation goes on.
async fn generation_stops_at_max_context(ctx: Option<&GpuContext>) {
    let f = fixtures::hybrids().into_iter().find(|f| f.name == "granite-h-rope-moe-f32").unwrap();
    let r = f.reference();
    let max = r.prompt_ids.len() + 5;
    let c = f.checkpoint();
    let engine = match ctx {
        Some(ctx) => {
            let options = GpuModelOptions { max_context: Some(max), ..Default::default() };
            Engine::gpu(ctx, &c, options).await.unwrap()
        }
        None => Engine::cpu_with(c.weights().unwrap(), Some(max), Threads::new(None).unwrap()).unwrap(),
    };
    let mut rt = Runtime::new(engine, CacheConfig::default()).unwrap();
    let id = rt.new_session().unwrap();
    rt.append(id, &r.prompt_ids).await.unwrap();
    let mut seen = Vec::new();
    match rt
        .generate(id, &mut Sampler::greedy(), options(10), |t| {
            seen.push(t);
            true
        })
        .await
    {
        Err(Error::ContextFull { needed, max_context }) => {
            assert_eq!((needed, max_context), (max as u64 + 1, max as u64));
        }
        other => panic!("generation past maxContext: {other:?}"),
    }
    assert_eq!(seen, r.greedy_ids[..5], "the tokens before the limit are HF's");
    assert_eq!(rt.history(id).unwrap().len(), max, "and they stay");
    let before = rt.history(id).unwrap().to_vec();
    assert!(matches!(rt.append(id, &[1]).await, Err(Error::ContextFull { .. })));
    assert_eq!(rt.history(id).unwrap(), &before[..], "a refused append changes nothing");
    rt.rewind(id, r.prompt_ids.len()).await.unwrap();
    assert_eq!(greedy(&mut rt, id, 5).await, r.greedy_ids[..5], "after a rewind: HF's tokens again");
}

/// A hybrid's prompt-end checkpoint is charged its state, its logits and the key/value rows
/// before it in the caches' own format: 4 bytes a value on the CPU, 2 with f16 caches on the GPU.
async fn checkpoints_are_charged_their_key_value_rows(ctx: Option<&GpuContext>) {
    let f = fixtures::hybrids().into_iter().find(|f| f.name == "granite-h-rope-moe-f32").unwrap();
    let c = f.checkpoint();
    let (engine, value_bytes) = match ctx {
        Some(ctx) => {
            let options = GpuModelOptions { kv_format: webmamba::KvFormat::F16, ..Default::default() };
            (Engine::gpu(ctx, &c, options).await.unwrap(), 2)
        }
        None => (Engine::cpu(c.weights().unwrap()), 4),
    };
    let config = engine.config().clone();
    // Blocks longer than the prompt: the prompt-end is the only checkpoint.
    let mut rt = Runtime::new(engine, CacheConfig { block_size: 256, ..Default::default() }).unwrap();
    let id = rt.new_session().unwrap();
    let n = 40;
    rt.append(id, &f.reference().ids[..n]).await.unwrap();
    let floats = config.state_layout().per_token_floats();
    assert!(floats > 0, "the fixture has attention");
    let want = webmamba::State::bytes(&config) + 4 * config.vocab_size + n * floats * value_bytes;
    assert_eq!(rt.cache_stats().bytes_used, want as u64, "{value_bytes} bytes a cached key or value");
}

dual_backend_test!(
    checkpoints_are_charged_their_key_value_rows,
    generation_stops_at_max_context,
    resume_equivalence,
    prompt_end_survives_sparse_retention,
    long_history_short_follow_up,
    eviction_respects_pins_and_budget,
    export_import,
);

dual_test! {
    async fn cpu_the_smallest_budget_serves_every_turn() { the_smallest_budget_serves_every_turn(None).await }
    async fn cpu_hybrid_sessions() { hybrid_sessions(None).await }
    async fn gpu_hybrid_sessions() {
        let Some(ctx) = common::gpu("gpu_hybrid_sessions").await else { return };
        hybrid_sessions(Some(&ctx)).await
    }
}
