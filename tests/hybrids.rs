//! The hybrid models (Granite-4.0-H, Bamba, Nemotron-H, Jamba, Falcon-H1, Zamba2) on the CPU
//! reference against HF transformers 5.24 (committed fixtures, tools/fixtures/hybrids.py),
//! natively and in the browser: logits at every position of a sequence crossing Mamba-2's
//! chunks and two 64-token KV pages, HF's 24 greedy steps (each a whole re-run in HF, no cache)
//! token for token with their logits, and token-by-token runs equal to whole ones.

mod common;

use common::fixtures::{self, Fixture};
use common::{assert_close, gpu, log};
use webmamba::cpu::ops::argmax;
use webmamba::{CpuModel, GpuModel, GpuModelOptions, Logits, Matmul, State, WeightFormat};

fn model(f: &Fixture) -> CpuModel {
    CpuModel::new(f.checkpoint().weights().unwrap_or_else(|e| panic!("{}: {e}", f.name)))
}

dual_test! {
    async fn hybrid_logits_match_hf_at_every_position() {
        for f in fixtures::hybrids() {
            let m = model(&f);
            let r = f.reference();
            let mut state = State::zeros(m.config());
            let logits = m.forward(&r.ids, &mut state, Logits::All).unwrap();
            let what = format!("{}: CPU vs HF logits ({} positions)", f.name, r.ids.len());
            assert_close(&what, &logits, &r.logits, 1e-4, 0.0);
            assert_eq!(state.context(), Some(r.ids.len()), "{}: the caches hold every token", f.name);
        }
    }

    async fn hybrid_greedy_matches_hf_step_by_step() {
        for f in fixtures::hybrids() {
            let m = model(&f);
            let r = f.reference();
            let steps = r.step_logits.as_ref().expect("step_logits");
            let vocab = m.config().vocab_size;
            let mut state = State::zeros(m.config());
            let mut logits = m.forward(&r.prompt_ids, &mut state, Logits::Last).unwrap();
            let mut out = Vec::new();
            for (i, want) in steps.chunks_exact(vocab).enumerate() {
                assert_close(&format!("{}: step {i}'s logits", f.name), &logits, want, 1e-4, 0.0);
                let next = argmax(&logits).unwrap() as u32;
                out.push(next);
                logits = m.forward(&[next], &mut state, Logits::Last).unwrap();
            }
            assert_eq!(out.len(), 24, "{}: 24 steps", f.name);
            assert_eq!(out, r.greedy_ids, "{}: greedy continuation", f.name);
            log(&format!("[greedy] {}: {:?} matches HF", f.name, out));
        }
    }

    async fn hybrid_token_by_token_equals_whole_sequence() {
        for f in fixtures::hybrids() {
            let m = model(&f);
            let ids = &f.reference().ids[..70];
            let mut whole_state = State::zeros(m.config());
            let whole = m.forward(ids, &mut whole_state, Logits::All).unwrap();
            let mut state = State::zeros(m.config());
            let mut chunked = Vec::new();
            for chunk in [&ids[..1], &ids[1..2], &ids[2..40], &ids[40..41], &ids[41..]] {
                chunked.extend(m.forward(chunk, &mut state, Logits::All).unwrap());
            }
            assert_close(&format!("{}: chunks 1+1+38+1+29 vs whole", f.name), &chunked, &whole, 5e-5, 1e-5);
            assert_close(&format!("{}: final state", f.name), &state.to_flat(), &whole_state.to_flat(), 1e-5, 1e-5);
        }
    }
}

dual_test! {
    async fn hybrid_gpu_logits_match_hf_at_every_position() {
        let Some(ctx) = gpu("hybrid_gpu_logits_match_hf_at_every_position").await else { return };
        for matmul in [Matmul::Tiled, Matmul::Direct] {
            for f in fixtures::hybrids() {
                let options = GpuModelOptions { matmul, weights: WeightFormat::F32, max_tokens: 64, ..Default::default() };
                let mut m = match GpuModel::load(&ctx, &f.checkpoint(), options).await {
                    Ok(m) => m,
                    Err(e) => { log(&format!("[gpu] {}: {e}", f.name)); continue; }
                };
                let r = f.reference();
                let logits = m.forward(&r.ids, Logits::All).await.unwrap();
                assert_close(&format!("{} ({matmul:?}): GPU vs HF logits", f.name), &logits, &r.logits, 1e-4, 0.0);
                log(&format!("[gpu] {} ({matmul:?}): {} positions match HF", f.name, r.ids.len()));
            }
        }
    }
}

dual_test! {
    async fn hybrid_gpu_decode_matches_hf_step_by_step() {
        // Decode steps one by one (the split-context attention), then the same as one greedy
        // batch on the device (each step at its own position), then the prompt fed in pieces
        // across the caches' growth: all equal HF's.
        let Some(ctx) = gpu("hybrid_gpu_decode_matches_hf_step_by_step").await else { return };
        for f in fixtures::hybrids() {
            let options = GpuModelOptions { weights: WeightFormat::F32, max_tokens: 64, ..Default::default() };
            let Ok(mut m) = GpuModel::load(&ctx, &f.checkpoint(), options).await else { continue };
            let r = f.reference();
            let steps = r.step_logits.as_ref().expect("step_logits");
            let vocab = m.config().vocab_size;
            let mut logits = m.forward(&r.prompt_ids, Logits::Last).await.unwrap();
            let mut out = Vec::new();
            for (i, want) in steps.chunks_exact(vocab).enumerate() {
                assert_close(&format!("{}: GPU step {i}'s logits", f.name), &logits, want, 1e-4, 0.0);
                let next = argmax(&logits).unwrap() as u32;
                out.push(next);
                logits = m.forward(&[next], Logits::Last).await.unwrap();
            }
            assert_eq!(out, r.greedy_ids, "{}: GPU greedy continuation, step by step", f.name);
            m.reset_state();
            let first = argmax(&m.forward(&r.prompt_ids, Logits::Last).await.unwrap()).unwrap() as u32;
            let picks = m.greedy(first, 23).await.unwrap();
            assert_eq!([vec![first], picks].concat(), r.greedy_ids, "{}: GPU greedy batch", f.name);
            m.reset_state();
            let ids = &r.ids;
            let mut chunked = Vec::new();
            for piece in [&ids[..1], &ids[1..2], &ids[2..40], &ids[40..41], &ids[41..66], &ids[66..67], &ids[67..]] {
                chunked.extend(m.forward(piece, Logits::All).await.unwrap());
            }
            assert_close(&format!("{}: GPU pieces vs HF", f.name), &chunked, &r.logits, 1e-4, 0.0);
            log(&format!("[gpu] {}: 24 decode steps, a greedy batch and a prompt in 7 pieces match HF", f.name));
        }
    }
}
