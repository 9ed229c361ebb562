//! The GPU forward pass against HF transformers (the fixtures) and the CPU reference, natively
//! (lavapipe) and in headless Chromium (SwiftShader), in every weight format, and the
//! allocation-free decode step.

mod common;

use common::fixtures::{self, Fixture};
use common::{assert_close, gpu, log};
use rand::{Rng, SeedableRng, rngs::SmallRng};
use webmamba::{CpuModel, GpuContext, GpuModel, GpuModelOptions, Logits, Matmul, State, WeightFormat};

async fn load_with(ctx: &GpuContext, f: &Fixture, max_tokens: usize, matmul: Matmul) -> (CpuModel, GpuModel) {
    let options = GpuModelOptions { max_tokens, matmul, weights: f.exact_format(), ..Default::default() };
    (CpuModel::new(f.checkpoint().weights().unwrap()), f.load_gpu(ctx, options).await)
}

async fn load(ctx: &GpuContext, f: &Fixture, max_tokens: usize) -> (CpuModel, GpuModel) {
    load_with(ctx, f, max_tokens, Matmul::Auto).await
}

/// Direct (what software adapters pick) on every fixture; Tiled (real GPUs' kernels) on every
/// fixture natively, on a sample in a browser (see `fixtures::natively_all`).
fn fixtures_for(matmul: Matmul) -> Vec<Fixture> {
    match matmul {
        Matmul::Tiled => fixtures::natively_all(fixtures::all(), fixtures::BROWSER_MAMBA),
        _ => fixtures::all(),
    }
}

/// Every fixture natively; in a browser the sample, for both kernel sets: for checks of rounded
/// formats and of the GPU against the CPU, which the browser's logits-vs-HF test backs on every
/// fixture.
fn sampled() -> Vec<Fixture> {
    fixtures::natively_all(fixtures::all(), fixtures::BROWSER_MAMBA)
}

fn random_ids(seed: u64, n: usize, vocab: usize) -> Vec<u32> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(0..vocab as u32)).collect()
}

dual_test! {
    async fn gpu_logits_match_hf_at_every_position() {
        let Some(ctx) = gpu("gpu_logits_match_hf_at_every_position").await else { return };
        for matmul in [Matmul::Tiled, Matmul::Direct] {
            for f in fixtures_for(matmul) {
                // f32 storage everywhere; f16 storage wherever it is exact (bf16/f16 files).
                let mut formats = vec![WeightFormat::F32];
                formats.extend((f.exact_format() == WeightFormat::F16).then_some(WeightFormat::F16));
                for weights in formats {
                    let options = GpuModelOptions { max_tokens: 512, matmul, weights, ..Default::default() };
                    let mut m = f.load_gpu(&ctx, options).await;
                    let r = f.reference();
                    let logits = m.forward(&r.ids, Logits::All).await.unwrap();
                    let what = format!("{} ({matmul:?} matmul, {} weights): GPU vs HF logits", f.name, weights.name());
                    assert_close(&what, &logits, &r.logits, 1e-4, 0.0);
                }
            }
        }
        assert!(ctx.take_uncaptured_error().is_none());
    }

    async fn rounded_weight_formats_keep_hf_greedy_tokens() {
        // f16 storage of an f32 file and int8 storage of any file round the weights: the logits
        // move (reported), HF's greedy continuation must not.
        // Both kernel sets: the decode steps are `gemv` (Direct) or `gemv_coalesced` (Tiled).
        let Some(ctx) = gpu("rounded_weight_formats_keep_hf_greedy_tokens").await else { return };
        for (matmul, f) in [Matmul::Tiled, Matmul::Direct].into_iter().flat_map(|m| sampled().into_iter().map(move |f| (m, f))) {
            let r = f.reference();
            for weights in [WeightFormat::F16, WeightFormat::Int8] {
                if weights == f.exact_format() {
                    continue;
                }
                let mut m = f.load_gpu(&ctx, GpuModelOptions { weights, matmul, ..Default::default() }).await;
                let logits = m.forward(&r.ids, Logits::All).await.unwrap();
                let worst = logits.iter().zip(&r.logits).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
                m.reset_state();
                let mut last = m.forward(&r.prompt_ids, Logits::Last).await.unwrap();
                let mut greedy = Vec::new();
                for _ in 0..r.greedy_ids.len() {
                    let next = webmamba::cpu::ops::argmax(&last).unwrap() as u32;
                    greedy.push(next);
                    last = m.forward(&[next], Logits::Last).await.unwrap();
                }
                log(&format!("[{}] {} weights ({:?}, {matmul:?}): max |Δlogit| vs HF {worst:e}", f.name, weights.name(), m.memory().weight_format));
                assert_eq!(greedy, r.greedy_ids, "{}: {} weights ({matmul:?}): greedy tokens vs HF", f.name, weights.name());
            }
        }
    }

    async fn split_matrices_in_every_format_equal_unsplit_ones() {
        // Buffers capped at 4 KiB: the embedding/LM head (and more) split into many parts.
        let Some(ctx) = gpu("split_matrices_in_every_format_equal_unsplit_ones").await else { return };
        let f = fixtures::all().into_iter().find(|f| f.name == "medium-bf16").unwrap();
        let ids = f.reference().ids;
        for weights in WeightFormat::ALL {
            let options = GpuModelOptions { weights, ..Default::default() };
            let whole = f.load_gpu(&ctx, options).await.forward(&ids, Logits::All).await.unwrap();
            let split_options = GpuModelOptions { max_binding_bytes: Some(4096), ..options };
            let mut split = f.load_gpu(&ctx, split_options).await;
            assert!(split.memory().weights >= f.load_gpu(&ctx, options).await.memory().weights);
            let got = split.forward(&ids, Logits::All).await.unwrap();
            assert_close(&format!("{}: 4 KiB parts vs whole matrices", weights.name()), &got, &whole, 1e-5, 1e-5);
            let next = split.forward(&[1], Logits::Last).await.unwrap();
            assert_eq!(next.len(), split.config().vocab_size);
        }
    }

    async fn gpu_matches_cpu_across_scan_chunks_forward_chunks_and_decode() {
        let Some(ctx) = gpu("gpu_matches_cpu_across_scan_chunks_forward_chunks_and_decode").await else { return };
        for (matmul, f) in [Matmul::Tiled, Matmul::Direct].into_iter().flat_map(|m| sampled().into_iter().map(move |f| (m, f))) {
            // max_tokens 100: a 300-token prompt runs as 3 forward chunks of 2 scan chunks each.
            let (cpu, mut m) = load_with(&ctx, &f, 100, matmul).await;
            let vocab = cpu.config().vocab_size;
            let prompt = random_ids(7, 300, vocab);
            let mut state = State::zeros(cpu.config());
            let want = cpu.forward(&prompt, &mut state, Logits::All).unwrap();
            let got = m.forward(&prompt, Logits::All).await.unwrap();
            assert_close(&format!("{} ({matmul:?}): 300-token prefill", f.name), &got, &want, 1e-4, 0.0);
            let gpu_state = m.read_state().await.unwrap();
            for layer in 0..state.layers.len() {
                for (region, tol) in [("conv", 1e-5), ("ssm", 1e-4)] {
                    let (g, c) = (gpu_state.region(layer, region).unwrap(), state.region(layer, region).unwrap());
                    assert_close(&format!("{}: {region} state", f.name), g, c, tol, tol);
                }
            }
            let mut next = webmamba::cpu::ops::argmax(&want[want.len() - vocab..]).unwrap() as u32;
            for step in 0..8 {
                let want = cpu.forward(&[next], &mut state, Logits::Last).unwrap();
                let got = m.forward(&[next], Logits::Last).await.unwrap();
                assert_close(&format!("{}: decode step {step}", f.name), &got, &want, 1e-4, 0.0);
                next = webmamba::cpu::ops::argmax(&got).unwrap() as u32;
            }
        }
    }

    async fn in_scan_checkpoints_equal_cpu_states() {
        let Some(ctx) = gpu("in_scan_checkpoints_equal_cpu_states").await else { return };
        // A Mamba-1 and a Mamba-2 model (mamba2-f32: the SSD kernels capture too).
        for f in fixtures::all().iter().filter(|f| ["medium-bf16", "mamba2-f32"].contains(&f.name)) {
        let (cpu, mut m) = load(&ctx, f, 128).await;
        let tokens = random_ids(11, 200, cpu.config().vocab_size);
        // More checkpoints than one forward chunk can capture, across scan chunks and forward
        // chunks, including the first and the last token.
        let positions: Vec<usize> = (0..200).filter(|p| p % 3 == 0 || *p == 199).collect();
        let slots = m.add_slots(positions.len()).unwrap();
        let captures: Vec<(usize, usize)> = positions.iter().copied().zip(slots).collect();
        let got_logits = m.forward_capturing(&tokens, Logits::Last, &captures).await.unwrap();
        let mut state = State::zeros(cpu.config());
        let (want_logits, want) = cpu.forward_capturing(&tokens, &mut state, Logits::Last, &positions).unwrap();
        assert_close(&format!("{}: logits with captures", f.name), &got_logits, &want_logits, 1e-4, 0.0);
        for (&(pos, slot), want) in captures.iter().zip(&want) {
            let got = m.read_slot(slot).await.unwrap();
            assert_close(&format!("{}: checkpoint after token {pos}", f.name), &got.to_flat(), &want.to_flat(), 1e-5, 1e-4);
        }
        // A checkpoint restored into the working state continues like the CPU from there.
        m.load_state(captures[10].1).unwrap();
        let mut from = want[10].clone();
        let next = &tokens[captures[10].0 + 1..captures[10].0 + 9];
        let got = m.forward(next, Logits::All).await.unwrap();
        assert_close("continue from a checkpoint", &got, &cpu.forward(next, &mut from, Logits::All).unwrap(), 1e-4, 0.0);
        }
    }

    async fn the_capture_area_grows_to_the_checkpoints_of_a_chunk() {
        // Loaded with room for one checkpoint (capture_bytes 0), a 128-token prefill that writes
        // 8 ran as 8 forward chunks (each reading every weight again: on an H200 a 512-token
        // prefill of 2.8B took 2.5x as long with its dense checkpoints). The area now grows to 8
        // at the call: one chunk — the dispatches, logits and checkpoints of a model loaded with
        // room for 8, bit for bit — the growth in the activations' bytes, made once.
        let Some(ctx) = gpu("the_capture_area_grows_to_the_checkpoints_of_a_chunk").await else { return };
        let f = fixtures::all().into_iter().find(|f| f.name == "medium-bf16").unwrap();
        let options = GpuModelOptions { max_tokens: 128, weights: f.exact_format(), ..Default::default() };
        let mut roomy = f.load_gpu(&ctx, options).await;
        let mut small = f.load_gpu(&ctx, GpuModelOptions { capture_bytes: Some(0), ..options }).await;
        let tokens = random_ids(5, 128, roomy.config().vocab_size);
        let positions: Vec<usize> = (0..8).map(|i| 16 * i + 15).collect();
        let loaded = small.memory().activations;
        let mut runs = Vec::new();
        for m in [&mut roomy, &mut small] {
            let captures: Vec<(usize, usize)> = positions.iter().copied().zip(m.add_slots(8).unwrap()).collect();
            let before = webmamba::gpu::dispatches_recorded();
            let logits = m.forward_capturing(&tokens, Logits::Last, &captures).await.unwrap();
            let dispatches = webmamba::gpu::dispatches_recorded() - before;
            let mut states = Vec::new();
            for &(_, slot) in &captures {
                states.push(m.read_slot_fixed(slot).await.unwrap());
            }
            runs.push((logits, dispatches, states, captures));
        }
        let (roomy_run, small_run) = (&runs[0], &runs[1]);
        assert_eq!(small_run.1, roomy_run.1, "dispatches of the prefill: one forward chunk each");
        assert!(small_run.0 == roomy_run.0, "the logits, bit for bit");
        assert!(small_run.2 == roomy_run.2, "the checkpoints, bit for bit");
        let state_bytes = 4 * small_run.2[0].len() as u64;
        assert_eq!(small.memory().activations, loaded + 7 * state_bytes, "grown by 7 states");
        // At that size again: nothing more is made.
        small.reset_state();
        let objects = ctx.object_counts();
        small.forward_capturing(&tokens, Logits::Last, &small_run.3).await.unwrap();
        assert_eq!(ctx.object_counts().buffers, objects.buffers, "grown once");
        assert_eq!(small.memory().activations, loaded + 7 * state_bytes);
    }

    async fn decode_steps_create_no_gpu_objects() {
        let Some(ctx) = gpu("decode_steps_create_no_gpu_objects").await else { return };
        let f = &fixtures::all()[3];
        let (_, mut m) = load(&ctx, f, 64).await;
        m.forward(&f.reference().prompt_ids, Logits::Last).await.unwrap();
        let before = ctx.object_counts();
        let mut next = 1;
        for _ in 0..16 {
            let logits = m.forward(&[next], Logits::Last).await.unwrap();
            next = webmamba::cpu::ops::argmax(&logits).unwrap() as u32;
        }
        // Greedy batches picked on the GPU, a rewind, the last logits: nothing made either.
        for _ in 0..2 {
            next = *m.greedy(next, 8).await.unwrap().last().unwrap();
        }
        m.rewind().unwrap();
        assert_eq!(m.last_logits().await.unwrap().len(), m.config().vocab_size);
        let after = ctx.object_counts();
        log(&format!("[alloc] objects before {before:?}, after 16 decode steps and 2 greedy batches {after:?}"));
        assert!(before.buffers > 0 && before.bind_groups > 0, "the counters count");
        assert_eq!(after, before, "a decode step created GPU objects");
    }

    async fn a_model_the_kernels_cannot_run_is_refused_before_any_allocation() {
        // State sizes above the kernels' N_MAX (64); from 1025 on the scan's chunk length was 0
        // and sizing the activations divided by it (a panic natively, a trap in the browser).
        let Some(ctx) = gpu("a_model_the_kernels_cannot_run_is_refused_before_any_allocation").await else { return };
        for state_size in [65, 1025, 4096] {
            let json = format!(
                r#"{{"model_type":"mamba","vocab_size":16,"hidden_size":8,"num_hidden_layers":1,
                    "state_size":{state_size},"expand":2,"conv_kernel":4,"time_step_rank":1}}"#
            );
            let config = webmamba::Config::from_json(json.as_bytes()).unwrap();
            let c = webmamba::Checkpoint::random(&config, 1, safetensors::Dtype::F32).unwrap();
            let before = ctx.object_counts();
            let e = GpuModel::load(&ctx, &c, GpuModelOptions::default()).await.err().expect("refused");
            assert_eq!(e.code(), "UnsupportedModel", "state_size {state_size}: {e}");
            assert_eq!(ctx.object_counts().buffers, before.buffers, "nothing allocated");
            // The CPU reference runs it.
            let logits = CpuModel::new(c.weights().unwrap()).forward(&[1, 2, 3], &mut State::zeros(&config), Logits::Last).unwrap();
            assert!(logits.iter().all(|v| v.is_finite()));
        }
    }

    async fn bad_tokens_fail_and_leave_the_gpu_state_alone() {
        let Some(ctx) = gpu("bad_tokens_fail_and_leave_the_gpu_state_alone").await else { return };
        let f = &fixtures::all()[0];
        let (_, mut m) = load(&ctx, f, 64).await;
        m.forward(&[1, 2, 3], Logits::Last).await.unwrap();
        let before = m.read_state().await.unwrap();
        let vocab = m.config().vocab_size as u32;
        assert_eq!(m.forward(&[1, vocab], Logits::Last).await.unwrap_err().code(), "InvalidInput");
        assert_eq!(m.forward(&[], Logits::Last).await.unwrap_err().code(), "InvalidInput");
        assert_eq!(m.read_state().await.unwrap(), before);
    }
}
