//! The hybrid models (Granite-4.0-H, Bamba, Nemotron-H, Jamba, Falcon-H1, Zamba2) on the CPU
//! reference against HF transformers 5.24 (committed fixtures, tools/fixtures/hybrids.py),
//! natively and in the browser: logits at every position of a sequence crossing Mamba-2's
//! chunks and two 64-token KV pages, HF's 24 greedy steps (each a whole re-run in HF, no cache)
//! token for token with their logits, and token-by-token runs equal to whole ones.

mod common;

use common::fixtures::{self, Fixture};
use common::{assert_close, gpu, log};
use webmamba::cpu::ops::argmax;
use webmamba::{CpuModel, Error, GpuModel, GpuModelOptions, KvFormat, Logits, Matmul, State, WeightFormat};

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
            // Tiled (real GPUs' kernels) on a sample in a browser, whose adapter picks Direct.
            let all = fixtures::hybrids();
            for f in if matmul == Matmul::Tiled { fixtures::natively_all(all, fixtures::BROWSER_HYBRIDS) } else { all } {
                let options = GpuModelOptions { matmul, weights: WeightFormat::F32, max_tokens: 64, ..Default::default() };
                let mut m = GpuModel::load(&ctx, &f.checkpoint(), options).await.unwrap_or_else(|e| panic!("{}: {e}", f.name));
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
            let mut m = GpuModel::load(&ctx, &f.checkpoint(), options).await.unwrap_or_else(|e| panic!("{}: {e}", f.name));
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
            // A decode step ran only the k experts its token chose (and read no other's weights).
            for (block, run) in m.experts_run().await.unwrap() {
                let webmamba::blocks::BlockKind::Moe(moe) = &m.config().blocks[block].kind else { unreachable!() };
                assert_eq!(run.iter().filter(|&&r| r).count(), moe.top_k, "{}: block {block}: experts run at a decode step", f.name);
            }
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

dual_test! {
    async fn hybrid_context_past_max_context_is_context_full() {
        // The CPU and the GPU: a context past maxContext fails typed before anything runs, the
        // state as it was; the default is max_position_embeddings for a model with RoPE; a
        // pure Mamba model has no limit.
        let ctx = gpu("hybrid_context_past_max_context_is_context_full").await;
        let f = fixtures::hybrids().into_iter().find(|f| f.name == "granite-h-rope-moe-f32").unwrap();
        let r = f.reference();
        let cpu = model(&f);
        let v = cpu.config().vocab_size;
        assert_eq!(cpu.max_context(), 2048, "RoPE caps the default at max_position_embeddings");
        let cpu = cpu.with_max_context(Some(100)).unwrap();
        let mut state = State::zeros(cpu.config());
        cpu.forward(&r.ids[..90], &mut state, Logits::Last).unwrap();
        let before = state.clone();
        match cpu.forward(&r.ids[90..111], &mut state, Logits::Last) {
            Err(Error::ContextFull { needed: 111, max_context: 100 }) => {}
            other => panic!("CPU past maxContext: {:?}", other.map(|l| l.len())),
        }
        assert_eq!(state, before, "CPU: the state is as it was");
        let last = cpu.forward(&r.ids[90..100], &mut state, Logits::All).unwrap();
        assert_close("CPU after a refused call", &last, &r.logits[90 * v..100 * v], 1e-4, 0.0);
        let mamba = CpuModel::new(fixtures::all()[0].checkpoint().weights().unwrap());
        assert_eq!(mamba.max_context(), usize::MAX, "no attention, no limit");
        let Some(ctx) = ctx else { return };
        let options = GpuModelOptions { weights: WeightFormat::F32, max_context: Some(100), ..Default::default() };
        let mut m = GpuModel::load(&ctx, &f.checkpoint(), options).await.unwrap();
        assert_eq!(m.max_context(), 100);
        m.forward(&r.ids[..90], Logits::Last).await.unwrap();
        for bad in [&r.ids[90..111], &r.ids[90..101]] {
            match m.forward(bad, Logits::Last).await {
                Err(Error::ContextFull { max_context: 100, .. }) => {}
                other => panic!("GPU past maxContext: {:?}", other.map(|l| l.len())),
            }
        }
        match m.greedy(r.ids[90], 11).await {
            Err(Error::ContextFull { needed: 101, max_context: 100 }) => {}
            other => panic!("GPU greedy past maxContext: {other:?}"),
        }
        assert_eq!(m.context_len(), 90, "GPU: the context is as it was");
        let last = m.forward(&r.ids[90..100], Logits::All).await.unwrap();
        assert_close("GPU after refused calls", &last, &r.logits[90 * v..100 * v], 1e-4, 0.0);
        let default = GpuModel::load(&ctx, &f.checkpoint(), GpuModelOptions::default()).await.unwrap();
        assert_eq!(default.max_context(), 2048, "GPU default: max_position_embeddings");
    }
}

dual_test! {
    async fn hybrid_gpu_f16_weights_or_kv_keep_hf_greedy_tokens() {
        // f16 weights (exact for the bf16/f16 files, rounded for the f32 ones), then f16
        // key/value caches: the logits move (reported), HF's greedy tokens do not, and a state
        // read out and written back (f16 → f32 → f16 for the caches) continues the same way.
        let Some(ctx) = gpu("hybrid_gpu_f16_weights_or_kv_keep_hf_greedy_tokens").await else { return };
        for (weights, kv_format) in [(WeightFormat::F16, KvFormat::F32), (WeightFormat::F32, KvFormat::F16)] {
            // f16 weights on every fixture; f16 caches on a sample in a browser.
            let all = fixtures::hybrids();
            for f in if kv_format == KvFormat::F16 { fixtures::natively_all(all, fixtures::BROWSER_HYBRIDS) } else { all } {
                let options = GpuModelOptions { weights, kv_format, ..Default::default() };
                let mut m = GpuModel::load(&ctx, &f.checkpoint(), options).await.unwrap_or_else(|e| panic!("{}: {e}", f.name));
                let what = format!("{} ({} weights, {} caches)", f.name, weights.name(), kv_format.name());
                let r = f.reference();
                let logits = m.forward(&r.ids, Logits::All).await.unwrap();
                let worst = logits.iter().zip(&r.logits).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
                m.reset_state();
                let first = argmax(&m.forward(&r.prompt_ids, Logits::Last).await.unwrap()).unwrap() as u32;
                let state = m.read_state().await.unwrap();
                let picks = m.greedy(first, 23).await.unwrap();
                assert_eq!([vec![first], picks.clone()].concat(), r.greedy_ids, "{what}: greedy");
                m.reset_state();
                m.write_state(&state).unwrap();
                assert_eq!(m.greedy(first, 23).await.unwrap(), picks, "{what}: state written back");
                log(&format!("[gpu] {what}: max |Δlogit| vs HF {worst:e}, HF's 24 greedy tokens"));
            }
        }
    }
}

dual_test! {
    async fn hybrid_split_matrices_in_every_format_equal_unsplit_ones() {
        // Buffers capped at 4 KiB: every matrix — attention's, the MLPs', each expert's (whose
        // indirect dispatches then cover several parts), the adapters — splits into parts; in
        // f32, f16 and int8 the logits equal the unsplit model's, prefill and decode.
        let Some(ctx) = gpu("hybrid_split_matrices_in_every_format_equal_unsplit_ones").await else { return };
        // In a browser: one with experts, one with Zamba2's adapters (4 KiB parts make hundreds of
        // dispatches a step on a software adapter).
        for f in fixtures::natively_all(fixtures::hybrids(), &["jamba-moe-bf16", "zamba2-shared-f16"]) {
            let ids = &f.reference().ids[..70];
            for weights in WeightFormat::ALL {
                let options = GpuModelOptions { weights, max_tokens: 64, ..Default::default() };
                let split_options = GpuModelOptions { max_binding_bytes: Some(4096), ..options };
                let mut logits = Vec::new();
                for o in [options, split_options] {
                    let mut m = GpuModel::load(&ctx, &f.checkpoint(), o).await.unwrap_or_else(|e| panic!("{}: {e}", f.name));
                    let mut got = m.forward(ids, Logits::All).await.unwrap();
                    got.extend(m.forward(&[1], Logits::Last).await.unwrap());
                    got.extend(m.forward(&[2], Logits::Last).await.unwrap());
                    logits.push(got);
                }
                let what = format!("{} ({} weights): 4 KiB parts vs whole matrices", f.name, weights.name());
                assert_close(&what, &logits[1], &logits[0], 1e-5, 1e-5);
            }
        }
    }
}
