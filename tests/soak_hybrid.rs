//! Soak on a hybrid (in `npm test`: seconds): 2,000 generated tokens of a Jamba-shaped fixture
//! (Mamba, attention and mixture-of-experts blocks) over dozens of turns in 8 interleaved
//! sessions (regenerates among them) on a checkpoint cache with room for the key/value pages the
//! sessions' pinned prompt-ends reference and a few pages more, so checkpoints and pages are
//! evicted all the time. Every turn's tokens must equal those of a fresh run without any cache
//! (the CPU reference with one plain state per session, its attention caches growing), the cache
//! must stay within its budget, and the heap must not grow beyond what the cache may still fill
//! and the histories themselves. Native, CPU backend.
#![cfg(not(target_arch = "wasm32"))]

use common::counting::{self, Counting};
use rand::{Rng, SeedableRng, rngs::SmallRng};
use webmamba::sampling::Sampler;
use webmamba::{CacheConfig, CpuModel, Engine, GenerateOptions, Logits, Retention, Runtime, State};

mod common;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const SESSIONS: usize = 8;
const TOTAL: usize = 2_000;
const BLOCK: usize = 16;
const SEED: u64 = 27;

/// One turn: the session, the user's tokens, the tokens to generate.
fn turns(vocab: u32) -> Vec<(usize, Vec<u32>, usize)> {
    let mut rng = SmallRng::seed_from_u64(SEED);
    let (mut out, mut generated) = (Vec::new(), 0);
    while generated < TOTAL {
        let i = rng.random_range(0..SESSIONS);
        let user: Vec<u32> = (0..rng.random_range(3..20)).map(|_| rng.random_range(0..vocab)).collect();
        let n = rng.random_range(10..40).min(TOTAL - generated);
        generated += n;
        out.push((i, user, n));
    }
    out
}

#[test]
fn soak_hybrid_with_a_budget_of_a_few_pages() {
    let f = common::fixtures::hybrids().into_iter().find(|f| f.name == "jamba-moe-bf16").unwrap();
    let reference = CpuModel::new(f.checkpoint().weights().unwrap());
    let c = reference.config().clone();
    let plan = turns(c.vocab_size as u32);
    // What the pinned prompt-ends need at the end: each session's state, logits and partial
    // last block, and the pages of its whole blocks; then a few pages (and states) more.
    let row = 4 * c.state_layout().per_token_floats() as u64;
    let (page, state) = (BLOCK as u64 * row, State::bytes(&c) as u64);
    let mut lengths = [0usize; SESSIONS];
    plan.iter().for_each(|(i, user, n)| lengths[*i] += user.len() + n);
    let pinned_pages: u64 = lengths.iter().map(|&l| (l / BLOCK) as u64).sum();
    let end = state + 4 * c.vocab_size as u64 + (BLOCK as u64 - 1) * row;
    let budget = SESSIONS as u64 * end + (pinned_pages + 6) * page + 3 * state;
    let cache = CacheConfig { block_size: BLOCK, retention: Retention::Dense, budget_bytes: budget };
    let mut rt = Runtime::new(Engine::cpu(f.checkpoint().weights().unwrap()), cache).unwrap();
    let ids: Vec<_> = (0..SESSIONS).map(|_| rt.new_session().unwrap()).collect();
    let mut plain: Vec<State> = (0..SESSIONS).map(|_| State::zeros(&c)).collect();
    let (mut turn, mut after_first_round, mut room_then) = (0, 0usize, 0u64);
    let started = std::time::Instant::now();
    for (i, user, n) in &plan {
        let (i, n) = (*i, *n);
        pollster::block_on(rt.append(ids[i], user)).unwrap();
        let options = GenerateOptions { max_tokens: n, stop_at_eos: false };
        let got = pollster::block_on(rt.generate(ids[i], &mut Sampler::greedy(), options, |_| true)).unwrap();

        let mut logits = reference.forward(user, &mut plain[i], Logits::Last).unwrap();
        let mut want = Vec::with_capacity(n);
        for _ in 0..n {
            let t = webmamba::cpu::ops::argmax(&logits).unwrap() as u32;
            want.push(t);
            logits = reference.forward(&[t], &mut plain[i], Logits::Last).unwrap();
        }
        assert_eq!(got, want, "turn {turn} (session {i}): tokens differ from the uncached run");
        turn += 1;

        // Now and then: regenerate the last turn (rewind to its prompt) — it must repeat itself.
        if turn % 5 == 0 {
            let len = rt.history(ids[i]).unwrap().len() - n;
            pollster::block_on(rt.rewind(ids[i], len)).unwrap();
            let again =
                pollster::block_on(rt.generate(ids[i], &mut Sampler::greedy(), options, |_| true)).unwrap();
            assert_eq!(again, want, "turn {turn}: a regenerate differs");
        }
        let stats = rt.cache_stats();
        assert!(stats.bytes_used <= budget, "cache over its budget: {} > {budget}", stats.bytes_used);
        if turn == 2 * SESSIONS {
            (after_first_round, room_then) = (counting::live(), budget - stats.bytes_used);
        }
    }
    let history: usize = ids.iter().map(|&s| rt.history(s).unwrap().len()).sum();
    let longest = ids.iter().map(|&s| rt.history(s).unwrap().len()).max().unwrap_or(0);
    let live = counting::live();
    let stats = rt.cache_stats();
    eprintln!(
        "soak (hybrid): {TOTAL} tokens in {turn} turns over {SESSIONS} sessions in {:.1} s; {} evictions; \
         cache {} of {budget} bytes ({} pages, {} page bytes); heap {:.2} MB after the first rounds, \
         {:.2} MB at the end (histories: {history} tokens)",
        started.elapsed().as_secs_f64(),
        stats.evictions,
        stats.bytes_used,
        stats.pages,
        stats.page_bytes,
        after_first_round as f64 / 1e6,
        live as f64 / 1e6,
    );
    assert!(stats.evictions > 20, "the budget was meant to force evictions: {}", stats.evictions);
    // Growth allowed: what the cache could still fill after the first rounds, the histories
    // (4 bytes a token, in Vecs that double, and their block keys) and the working state's
    // attention caches (in Vecs that double) for the longest history, and the uncached
    // reference's eight states (theirs for every history); freed slots and pages keep their
    // vectors for reuse, one slot's tail at most per slot.
    let tails = (budget / state) * (BLOCK as u64 - 1) * row;
    let allowed = room_then as usize
        + tails as usize
        + 2 * 4 * history
        + 2 * 32 * (history / BLOCK)
        + 2 * longest * row as usize
        + 2 * history * row as usize
        + (1 << 20);
    assert!(
        live <= after_first_round + allowed,
        "heap grew from {after_first_round} to {live} bytes (allowed {allowed})"
    );
}
