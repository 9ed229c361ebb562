//! Soak (in `npm test`: about 25 s here): 10,000 generated tokens of the default model over hundreds of turns in 8
//! interleaved sessions (regenerates and rewinds among them) on a checkpoint cache with room for
//! three states beyond the sessions' pinned prompt-ends, so entries are evicted all the time. Every turn's tokens must equal those of a fresh
//! run without any cache (the CPU reference with one plain state per session), and the heap
//! must stay flat: the cache within its budget and, beyond the histories themselves, no growth
//! after the first round. Native, CPU backend (where chunked prefill is exact, so tokens can be
//! compared one for one however a prefix was reached).
#![cfg(not(target_arch = "wasm32"))]

use common::counting::{self, Counting};
use rand::{Rng, SeedableRng, rngs::SmallRng};
use webmamba::sampling::Sampler;
use webmamba::{
    CacheConfig, Checkpoint, CpuModel, Engine, GenerateOptions, Logits, Retention, Runtime, State,
};

mod common;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const SESSIONS: usize = 8;
const TOTAL: usize = 10_000;

/// Greedy continuation of `state` (already after the prompt, whose last logits are `logits`).
fn reference_turn(
    model: &CpuModel,
    state: &mut State,
    mut logits: Vec<f32>,
    n: usize,
) -> (Vec<u32>, Vec<f32>) {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = webmamba::cpu::ops::argmax(&logits).unwrap() as u32;
        out.push(t);
        logits = model.forward(&[t], state, Logits::Last).unwrap();
    }
    (out, logits)
}

#[test]
fn soak_ten_thousand_tokens_with_eviction() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/www/models/shakespeare-mamba-3m");
    let checkpoint = Checkpoint::from_dir(dir).unwrap();
    let reference = CpuModel::new(checkpoint.weights().unwrap());
    let c = reference.config().clone();
    let entry = State::bytes(&c) as u64 + 4 * c.vocab_size as u64;
    // Each live session pins its latest prompt-end; room for three more entries beyond those, so
    // block checkpoints are evicted all the time.
    let budget = (SESSIONS as u64 + 3) * entry;
    let cache = CacheConfig { block_size: 16, retention: Retention::Dense, budget_bytes: budget };
    let mut rt = Runtime::new(Engine::cpu(checkpoint.weights().unwrap()), cache).unwrap();
    let ids: Vec<_> = (0..SESSIONS).map(|_| rt.new_session().unwrap()).collect();
    // The fresh run: one plain state per session, never cached.
    let mut plain: Vec<(State, Option<Vec<f32>>)> = (0..SESSIONS).map(|_| (State::zeros(&c), None)).collect();
    let mut rng = SmallRng::seed_from_u64(11);
    let (mut generated, mut turns, mut after_first_round) = (0, 0, 0usize);
    let started = std::time::Instant::now();
    while generated < TOTAL {
        let i = rng.random_range(0..SESSIONS);
        let user: Vec<u32> =
            (0..rng.random_range(3..40)).map(|_| rng.random_range(0..c.vocab_size as u32)).collect();
        let n = rng.random_range(10..60).min(TOTAL - generated);
        pollster::block_on(rt.append(ids[i], &user)).unwrap();
        let options = GenerateOptions { max_tokens: n, stop_at_eos: false };
        let got = pollster::block_on(rt.generate(ids[i], &mut Sampler::greedy(), options, |_| true)).unwrap();

        let (state, last) = &mut plain[i];
        let logits = reference.forward(&user, state, Logits::Last).unwrap();
        let (want, end) = reference_turn(&reference, state, logits, n);
        *last = Some(end);
        assert_eq!(got, want, "turn {turns} (session {i}): tokens differ from the uncached run");
        generated += n;
        turns += 1;

        // Now and then: regenerate the last turn (rewind to its prompt) — it must repeat itself.
        if turns % 7 == 0 {
            let len = rt.history(ids[i]).unwrap().len() - n;
            pollster::block_on(rt.rewind(ids[i], len)).unwrap();
            let again =
                pollster::block_on(rt.generate(ids[i], &mut Sampler::greedy(), options, |_| true)).unwrap();
            assert_eq!(again, want, "turn {turns}: a regenerate differs");
        }
        let stats = rt.cache_stats();
        assert!(stats.bytes_used <= budget, "cache over its budget: {} > {budget}", stats.bytes_used);
        if turns == 2 * SESSIONS {
            after_first_round = counting::live();
        }
    }
    let history: usize = ids.iter().map(|&s| rt.history(s).unwrap().len()).sum();
    let live = counting::live();
    let stats = rt.cache_stats();
    eprintln!(
        "soak: {generated} tokens in {turns} turns over {SESSIONS} sessions in {:.0} s; {} evictions; \
         cache {} of {budget} bytes; heap {:.2} MB after the first rounds, {:.2} MB at the end \
         (histories: {history} tokens)",
        started.elapsed().as_secs_f64(),
        stats.evictions,
        stats.bytes_used,
        after_first_round as f64 / 1e6,
        live as f64 / 1e6,
    );
    assert!(stats.evictions > 100, "the budget was meant to force evictions: {}", stats.evictions);
    // Growth allowed: the histories (4 bytes a token, in Vecs that double) and their block keys.
    let allowed = 2 * 4 * history + 2 * 32 * (history / 16) + (1 << 20);
    assert!(live <= after_first_round + allowed, "heap grew from {after_first_round} to {live} bytes");
}
