//! The CPU reference against HF transformers' `MambaForCausalLM` (committed fixtures), and the
//! equivalence of whole-sequence and token-by-token runs from an explicit state.

mod common;

use common::fixtures::{self, Fixture};
use common::{assert_close, log};
use webmamba::cpu::ops::argmax;
use webmamba::{CpuModel, Logits, State};

fn model(f: &Fixture) -> CpuModel {
    CpuModel::new(f.checkpoint().weights().unwrap_or_else(|e| panic!("{}: {e}", f.name)))
}

dual_test! {
    async fn cpu_logits_match_hf_at_every_position() {
        for f in fixtures::all() {
            let m = model(&f);
            let r = f.reference();
            let mut state = State::zeros(m.config());
            let logits = m.forward(&r.ids, &mut state, Logits::All).unwrap();
            assert_close(&format!("{}: CPU vs HF logits ({} positions)", f.name, r.ids.len()), &logits, &r.logits, 1e-4, 0.0);
        }
    }

    async fn cpu_greedy_matches_hf_token_for_token() {
        for f in fixtures::all() {
            let m = model(&f);
            let r = f.reference();
            let mut state = State::zeros(m.config());
            let mut logits = m.forward(&r.prompt_ids, &mut state, Logits::Last).unwrap();
            let mut out = Vec::new();
            for _ in 0..r.greedy_ids.len() {
                let next = argmax(&logits).unwrap() as u32;
                out.push(next);
                logits = m.forward(&[next], &mut state, Logits::Last).unwrap();
            }
            assert_eq!(out, r.greedy_ids, "{}: greedy continuation", f.name);
            log(&format!("[greedy] {}: {:?} matches HF", f.name, out));
        }
    }

    async fn token_by_token_from_explicit_state_equals_whole_sequence() {
        for f in fixtures::all() {
            let m = model(&f);
            let ids = f.reference().ids;
            let mut whole_state = State::zeros(m.config());
            let whole = m.forward(&ids, &mut whole_state, Logits::All).unwrap();

            let mut state = State::zeros(m.config());
            let mut stepped = Vec::new();
            for &id in &ids {
                stepped.extend(m.forward(&[id], &mut state, Logits::All).unwrap());
            }
            // one token's products are GEMVs, a sequence's GEMMs (other summation orders, FMA or
            // not): rounding differences that grow through the layers, well inside the 1e-4 the
            // model is held to against HF
            assert_close(&format!("{}: one token at a time vs whole", f.name), &stepped, &whole, 5e-5, 1e-5);
            assert_close(&format!("{}: final SSM state", f.name), state.region(0, "ssm").unwrap(), whole_state.region(0, "ssm").unwrap(), 1e-6, 1e-6);

            // Uneven chunks resume from the state the previous chunk left.
            let mut state = State::zeros(m.config());
            let mut chunked = Vec::new();
            for chunk in [&ids[..5], &ids[5..6], &ids[6..17], &ids[17..]] {
                chunked.extend(m.forward(chunk, &mut state, Logits::All).unwrap());
            }
            assert_close(&format!("{}: chunks 5+1+11+7 vs whole", f.name), &chunked, &whole, 5e-5, 1e-5);
            // a 1-token chunk's products are GEMVs, the others' GEMMs: equal up to rounding
            assert_close(&format!("{}: chunked final state", f.name), &state.to_flat(), &whole_state.to_flat(), 1e-6, 1e-6);
        }
    }

    async fn bad_token_is_an_error_and_leaves_the_state_alone() {
        let f = &fixtures::all()[0];
        let m = model(f);
        let mut state = State::zeros(m.config());
        m.forward(&[1, 2, 3], &mut state, Logits::Last).unwrap();
        let before = state.clone();
        let vocab = m.config().vocab_size as u32;
        let err = m.forward(&[4, vocab], &mut state, Logits::Last).unwrap_err();
        assert!(matches!(err, webmamba::Error::InvalidInput(_)), "{err}");
        assert!(m.forward(&[], &mut state, Logits::Last).is_err());
        assert_eq!(state, before, "a failed call must not touch the state");
    }
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn fixture_list_matches_the_folder() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("config.json").is_file()) // model folders (chat/ holds templates)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> =
        fixtures::NAMES.iter().chain(fixtures::HYBRID_NAMES).map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(on_disk, listed, "tests/common/fixtures.rs must list every fixture folder");
    let embedded: Vec<&str> = fixtures::all().iter().map(|f| f.name).collect();
    assert_eq!(embedded, fixtures::NAMES);
    let hybrids: Vec<&str> = fixtures::hybrids().iter().map(|f| f.name).collect();
    assert_eq!(hybrids, fixtures::HYBRID_NAMES);
}
