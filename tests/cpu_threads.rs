//! The CPU backend's threads change nothing: on every fixture (Mamba-1, Mamba-2 and each
//! hybrid, in their stored dtypes), a 300-token prefill with every position's logits and four
//! captured states, then three decode steps, give bitwise the same logits and states on one
//! thread as on pools of 2 and 3 threads that split every loop as finely as it can be split
//! (`Threads::finest`: GEMV rows in fours, GEMM columns in sixteens, one scan channel or head,
//! one attention head per piece) and on a plain 2-thread pool. Native only: the browser build has
//! one thread.

#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::fixtures::{self, Fixture};
use common::log;
use webmamba::cpu::threads::Threads;
use webmamba::{CpuModel, Logits, State};

/// Prompt tokens: over one 256-token chunk, so the second chunk starts from carried state.
const PROMPT: usize = 300;
const CAPTURED: [usize; 4] = [0, 63, 255, 299];

/// Logits of the prefill (T, V) and of each decode step (V), and every state along the way.
struct Run {
    logits: Vec<Vec<f32>>,
    states: Vec<State>,
}

fn run(f: &Fixture, threads: Threads) -> Run {
    let model = CpuModel::new(f.checkpoint().weights().unwrap()).with_threads(threads);
    let vocab = model.config().vocab_size;
    let prompt: Vec<u32> = (0..PROMPT).map(|i| ((i * 7919 + 1) % vocab) as u32).collect();
    let mut state = State::zeros(model.config());
    let (all, mut states) = model.forward_capturing(&prompt, &mut state, Logits::All, &CAPTURED).unwrap();
    let mut logits = vec![all];
    for token in [3, 1, 4] {
        logits.push(model.forward(&[token], &mut state, Logits::Last).unwrap());
    }
    states.push(state);
    Run { logits, states }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Panics at the first value of `got` whose bits differ from `want`'s.
fn assert_same(what: &str, got: &Run, want: &Run) {
    for (i, (g, w)) in got.logits.iter().zip(&want.logits).enumerate() {
        if let Some(j) = (0..w.len()).find(|&j| g[j].to_bits() != w[j].to_bits()) {
            panic!("{what}: logits of call {i} differ at {j}: {} vs {} on one thread", g[j], w[j]);
        }
        assert_eq!(g.len(), w.len(), "{what}: logits of call {i}");
    }
    assert_eq!(got.states.len(), want.states.len());
    for (s, (g, w)) in got.states.iter().zip(&want.states).enumerate() {
        for (l, (gl, wl)) in g.layers.iter().zip(&w.layers).enumerate() {
            for (r, (gr, wr)) in gl.regions.iter().zip(&wl.regions).enumerate() {
                assert!(bits(gr) == bits(wr), "{what}: state {s}, layer {l}, region {r} differs");
            }
        }
    }
}

#[test]
fn every_thread_count_gives_the_same_bits() {
    let one = Threads::new(Some(1)).unwrap();
    assert_eq!(one.count(), 1);
    let pools = [
        ("finest 2", Threads::finest(2).unwrap()),
        ("finest 3", Threads::finest(3).unwrap()),
        ("2 threads", Threads::new(Some(2)).unwrap()),
    ];
    for (_, p) in &pools[..2] {
        assert!(p.count() >= 2);
    }
    for f in fixtures::all().iter().chain(&fixtures::hybrids()) {
        let want = run(f, one.clone());
        for (name, pool) in &pools {
            assert_same(&format!("{} on {name}", f.name), &run(f, pool.clone()), &want);
        }
        log(&format!(
            "[threads] {}: prefill {PROMPT} + 3 steps, logits and states bitwise equal on 1, 2 and 3 threads",
            f.name
        ));
    }
}

#[test]
fn a_thread_count_out_of_range_is_a_typed_error() {
    for n in [0, webmamba::cpu::threads::MAX_THREADS + 1] {
        let e = Threads::new(Some(n)).unwrap_err();
        assert!(matches!(e, webmamba::Error::InvalidInput(_)), "{n}: {e:?}");
    }
    assert_eq!(Threads::new(Some(3)).unwrap().count(), 3);
}
