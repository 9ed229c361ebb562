//! What happens when things go wrong underneath a session: cache budgets far beyond the device,
//! forward chunks beyond the dispatch limits, a lost GPU device (and the documented recovery:
//! a new model, sessions re-imported from their exported state), and imported states, which
//! must stay private to the session that imported them. Native (the GPU cases on lavapipe in
//! CI); the reference tokens come from a plain forward pass without any cache.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::fixtures;
use webmamba::sampling::Sampler;
use webmamba::{
    CacheConfig, Engine, Error, GenerateOptions, GpuContext, GpuModel, GpuModelOptions, Logits, Retention,
    Runtime, SessionId,
};

const PROMPT: [u32; 11] = [5, 17, 3, 99, 42, 7, 7, 64, 1, 250, 12];

fn block(n: usize, budget_bytes: u64) -> CacheConfig {
    CacheConfig { block_size: n, retention: Retention::Dense, budget_bytes }
}

async fn gpu_engine(ctx: &GpuContext) -> Engine {
    let options = GpuModelOptions { max_tokens: 64, ..Default::default() };
    Engine::gpu(ctx, &fixtures::all()[0].checkpoint(), options).await.unwrap()
}

fn cpu_engine() -> Engine {
    Engine::cpu(fixtures::all()[0].checkpoint().weights().unwrap())
}

/// Greedy tokens after `PROMPT` from a plain forward pass (no cache, no sessions).
async fn reference(mut e: Engine, n: usize) -> Vec<u32> {
    let mut logits = e.forward(&PROMPT, Logits::Last).await.unwrap();
    let mut out = Vec::new();
    for _ in 0..n {
        let t = webmamba::cpu::ops::argmax(&logits).unwrap() as u32;
        out.push(t);
        logits = e.forward(&[t], Logits::Last).await.unwrap();
    }
    out
}

async fn greedy(rt: &mut Runtime, id: SessionId, n: usize) -> webmamba::Result<Vec<u32>> {
    let options = GenerateOptions { max_tokens: n, stop_at_eos: false };
    rt.generate(id, &mut Sampler::greedy(), options, |_| true).await
}

fn slot_bytes(rt: &Runtime) -> u64 {
    match rt.engine() {
        Engine::Gpu(m) => m.memory().slots,
        Engine::Cpu { .. } => unreachable!("GPU only"),
    }
}

/// `budgetBytes: Infinity` / `--budget 18446744073709551615`: the slots used to be created up
/// front (16,384 states: 4.6 GB for this tiny model, more than the device had under a memory
/// cap, and the refusal went unreported: wrong tokens). Now they are created as checkpoints
/// are kept, and the tokens are the uncached run's.
#[test]
fn an_unbounded_budget_allocates_only_what_is_kept() {
    let Some(ctx) = pollster::block_on(common::gpu("an_unbounded_budget_allocates_only_what_is_kept")) else {
        return;
    };
    pollster::block_on(async {
        let want = reference(gpu_engine(&ctx).await, 12).await;
        let mut rt = Runtime::new(gpu_engine(&ctx).await, block(4, u64::MAX)).unwrap();
        assert_eq!(slot_bytes(&rt), 0, "no checkpoint memory before any checkpoint");
        let s = rt.new_session().unwrap();
        rt.append(s, &PROMPT).await.unwrap();
        assert_eq!(greedy(&mut rt, s, 12).await.unwrap(), want);
        let kept = rt.cache_stats().bytes_used;
        let allocated = slot_bytes(&rt);
        common::log(&format!("checkpoints kept: {kept} bytes; slot memory allocated: {allocated} bytes"));
        assert!(allocated > 0 && allocated <= 2 * kept.max(16 * 4096) + 32 * 4096, "{allocated} bytes");
        assert!(ctx.take_uncaptured_error().is_none());
    });
}

/// One forward chunk of more tokens than a dispatch may have workgroups along one dimension
/// would be refused by the device mid-run; it is refused at load, before any allocation.
#[test]
fn chunks_beyond_the_dispatch_limit_are_refused_at_load() {
    let Some(ctx) = pollster::block_on(common::gpu("chunks_beyond_the_dispatch_limit_are_refused_at_load"))
    else {
        return;
    };
    let max = ctx.summary().max_compute_workgroups_per_dimension as usize;
    let options = GpuModelOptions { max_tokens: max + 1, ..Default::default() };
    let e = pollster::block_on(GpuModel::load(&ctx, &fixtures::all()[0].checkpoint(), options)).err();
    assert!(
        matches!(&e, Some(Error::LimitExceeded { requested, .. }) if *requested == max as u64 + 1),
        "{e:?}"
    );
    assert!(ctx.take_uncaptured_error().is_none());
}

/// A lost device: every call fails with DeviceLost (typed, no panic, no hang), a failed import
/// gives its reserved slot back, and the documented recovery — a new context and model, each
/// session re-imported from its exported state — continues with the uninterrupted run's tokens.
#[test]
fn a_lost_device_is_reported_and_sessions_recover_from_exported_state() {
    let Some(ctx) = pollster::block_on(common::gpu("a_lost_device_is_reported")) else {
        return;
    };
    pollster::block_on(async {
        let want = reference(cpu_engine(), 10).await;
        let mut rt = Runtime::new(gpu_engine(&ctx).await, block(4, 1 << 20)).unwrap();
        let s = rt.new_session().unwrap();
        rt.append(s, &PROMPT).await.unwrap();
        assert_eq!(greedy(&mut rt, s, 4).await.unwrap(), want[..4]);
        let saved = rt.export_state(s).await.unwrap();

        ctx.destroy();
        let lost = |e: Error| assert_eq!(e.code(), "DeviceLost", "{e}");
        lost(greedy(&mut rt, s, 3).await.unwrap_err());
        lost(rt.append(s, &[1, 2]).await.unwrap_err());
        lost(rt.export_state(s).await.unwrap_err());
        let other = rt.new_session().unwrap();
        lost(rt.import_state(other, &saved).await.unwrap_err());
        assert_eq!(rt.cache_stats().bytes_reserved, 0, "a failed import gives its slot back");
        assert_eq!(rt.history(s).unwrap().len(), PROMPT.len() + 4, "the history is kept");

        let fresh = GpuContext::new().await.unwrap();
        let mut rt = Runtime::new(gpu_engine(&fresh).await, block(4, 1 << 20)).unwrap();
        let s = rt.new_session().unwrap();
        rt.import_state(s, &saved).await.unwrap();
        assert_eq!(greedy(&mut rt, s, 6).await.unwrap(), want[4..]);
    });
}

/// Forges an exported state: every state value replaced by `value`, the checksum recomputed
/// (it is a plain blake3, so anyone can).
fn forge(mut blob: Vec<u8>, state_floats: usize, value: f32) -> Vec<u8> {
    let body = blob.len() - 32;
    for v in blob[body - 4 * state_floats..body].chunks_exact_mut(4) {
        v.copy_from_slice(&value.to_le_bytes());
    }
    let checksum = *blake3::hash(&blob[..body]).as_bytes();
    blob[body..].copy_from_slice(&checksum);
    blob
}

/// An imported state is trusted by its own session only: another session that reaches the same
/// tokens computes its own state (before: it resumed from the imported prompt-end — here a
/// forged one — and generated whatever the forger chose).
async fn imported_states_stay_private(ctx: Option<&GpuContext>) {
    let want = reference(cpu_engine(), 8).await;
    let (first, second, name) = match ctx {
        Some(ctx) => (gpu_engine(ctx).await, gpu_engine(ctx).await, "gpu"),
        None => (cpu_engine(), cpu_engine(), "cpu"),
    };
    let floats = webmamba::State::floats(first.config());
    // Exported by another runtime (another tab, an earlier visit): nothing here computed it.
    let mut elsewhere = Runtime::new(first, block(4, 8 << 20)).unwrap();
    let a = elsewhere.new_session().unwrap();
    elsewhere.append(a, &PROMPT).await.unwrap();
    let forged = forge(elsewhere.export_state(a).await.unwrap(), floats, 3.0);

    let mut rt = Runtime::new(second, block(4, 8 << 20)).unwrap();
    let b = rt.new_session().unwrap();
    rt.import_state(b, &forged).await.unwrap();
    let poisoned = greedy(&mut rt, b, 8).await.unwrap();
    assert_ne!(poisoned, want, "{name}: the forged state changes what its own session generates");

    let c = rt.new_session().unwrap();
    let outcome = rt.append(c, &PROMPT).await.unwrap();
    assert_eq!(outcome.prefilled, PROMPT.len(), "{name}: computed, not resumed from the import");
    assert_eq!(greedy(&mut rt, c, 8).await.unwrap(), want, "{name}: another session is unaffected");

    // The importing session resumes from its own checkpoints; emptied, it is an ordinary one.
    rt.rewind(b, PROMPT.len()).await.unwrap();
    assert_eq!(greedy(&mut rt, b, 8).await.unwrap(), poisoned, "{name}: its own checkpoints serve it");
    rt.rewind(b, 0).await.unwrap();
    let outcome = rt.append(b, &PROMPT).await.unwrap();
    assert_eq!(outcome.resumed_from, Some(PROMPT.len()), "{name}: shares again once emptied");
    assert_eq!(greedy(&mut rt, b, 8).await.unwrap(), want, "{name}");
}

dual_backend_test!(imported_states_stay_private);
