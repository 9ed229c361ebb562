//! Long prompts on the CPU backend: memory stays flat however long the prompt (the forward pass
//! runs in chunks of `CHUNK_TOKENS`), and chunking changes nothing in what is computed.
//!
//! This binary counts every allocation (a global allocator wrapping the system's) to measure the
//! peak heap during a call. Native only.
#![cfg(not(target_arch = "wasm32"))]

use common::counting::{self, Counting};
use safetensors::tensor::Dtype;
use webmamba::cpu::CHUNK_TOKENS;
use webmamba::{Checkpoint, Config, CpuModel, Logits, State};

mod common;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn tiny() -> CpuModel {
    let c = Config::from_json(
        br#"{"model_type":"mamba","vocab_size":50,"hidden_size":16,"num_hidden_layers":2,
             "state_size":4,"expand":2,"conv_kernel":4,"time_step_rank":2}"#,
    )
    .unwrap();
    CpuModel::new(Checkpoint::random(&c, 3, Dtype::F32).unwrap().weights().unwrap())
}

fn ids(n: usize) -> Vec<u32> {
    (0..n).map(|i| ((i * 7919) % 50) as u32).collect()
}

/// A 1M-token prompt (its ids: 4 MB) runs in under 16 MB of heap beyond what was live before.
/// Before the chunking the activations of every token were kept at once: ~1 KB per token of
/// this tiny model, 1 GB here (7.4 GB for the default model, which aborted the process).
#[test]
fn a_long_prompt_runs_in_flat_memory() {
    let model = tiny();
    let prompt = ids(1_000_000);
    let mut state = State::zeros(model.config());
    let before = counting::reset_peak();
    let logits = model.forward(&prompt, &mut state, Logits::Last).unwrap();
    let peak = counting::peak() - before;
    common::log(&format!("1,000,000 tokens: peak heap {:.1} MB above the start", peak as f64 / 1e6));
    assert_eq!(logits.len(), 50);
    assert!(logits.iter().all(|v| v.is_finite()));
    assert!(peak < 16 << 20, "peak heap {peak} bytes during a 1M-token forward");
}

/// Calls crossing chunk boundaries give what one token at a time gives — logits at every
/// position and states captured on either side of a boundary.
#[test]
fn chunking_changes_nothing() {
    let model = tiny();
    let n = 2 * CHUNK_TOKENS + 37;
    let prompt = ids(n);
    let positions = [0, CHUNK_TOKENS - 1, CHUNK_TOKENS, 2 * CHUNK_TOKENS + 5, n - 1];
    let mut state = State::zeros(model.config());
    let (all, captured) = model.forward_capturing(&prompt, &mut state, Logits::All, &positions).unwrap();
    assert_eq!((all.len(), captured.len()), (n * 50, positions.len()));

    let mut one = State::zeros(model.config());
    let mut want = Vec::new();
    let mut states = Vec::new();
    for (i, &t) in prompt.iter().enumerate() {
        want.extend(model.forward(&[t], &mut one, Logits::Last).unwrap());
        if positions.contains(&i) {
            states.push(one.to_flat());
        }
    }
    common::assert_close("chunked logits vs one token at a time", &all, &want, 1e-5, 1e-5);
    for (got, want) in captured.iter().zip(&states) {
        common::assert_close("captured state", &got.to_flat(), want, 1e-5, 1e-5);
    }
    common::assert_close("final state", &state.to_flat(), &one.to_flat(), 1e-5, 1e-5);

    let mut last_state = State::zeros(model.config());
    let last = model.forward(&prompt, &mut last_state, Logits::Last).unwrap();
    // the LM head of one row is a GEMV, of all rows a GEMM: the same sums in another order
    common::assert_close(
        "Logits::Last vs the last row of Logits::All",
        &last,
        &all[(n - 1) * 50..],
        1e-6,
        1e-6,
    );
}
