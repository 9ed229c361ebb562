//! Top-k sampling with the top of the logits taken on the GPU (`shaders/top_k.wgsl`): the kernel
//! against the definition (every logit at least the k-th largest, ties included; the largest
//! below), and generation drawing from it against generation from all the logits — the same
//! tokens, logits and state, bit for bit. Under a grammar's mask (changing every token) the
//! picks drawn from the device's top equal those drawn from all the masked logits, falling back
//! to all of them where the top holds no allowed token.

mod common;

use common::fixtures;
use common::gpu;
use rand::{Rng, SeedableRng, rngs::SmallRng};
use webmamba::kernels::TopK;
use webmamba::kernels::top_k::{SLICE, Top};
use webmamba::sampling::{LogitsTop, Sampler, SamplingOptions, TokenMask};
use webmamba::session::{Decoding, Pace};
use webmamba::{CacheConfig, Engine, GenerateOptions, GpuModelOptions, Runtime};

/// The definition: entries ≥ the k-th largest (ascending by index), and the largest below.
fn top_by_definition(logits: &[f32], k: usize) -> LogitsTop {
    let mut sorted = logits.to_vec();
    sorted.sort_by(|a, b| b.total_cmp(a));
    let kth = sorted[k - 1];
    let entries = logits.iter().enumerate().filter(|e| *e.1 >= kth).map(|(i, &v)| (i as u32, v)).collect();
    let below = logits
        .iter()
        .copied()
        .filter(|&v| v < kth)
        .fold(None, |m: Option<f32>, v| Some(m.map_or(v, |m| m.max(v))));
    LogitsTop { vocab: logits.len(), entries, below }
}

dual_test! {
    async fn top_k_kernel_keeps_the_top_and_ties() {
        let Some(ctx) = gpu("top_k_kernel_keeps_the_top_and_ties").await else { return };
        let kernel = TopK::new(&ctx).await.expect("compile top_k");
        let mut rng = SmallRng::seed_from_u64(3);
        // Within one slice of the first pass (top_k::SLICE = 2048 logits), across a few, and a
        // 130M vocabulary.
        for v in [1usize, 5, 256, 300, 2047, 2049, 4096, 6145, 50_280] {
            for k in [1usize, 2, 40, 256, 512] {
                if k > v {
                    continue;
                }
                // Logits of both signs, a few exact ties, a few of the most negative finite value.
                let mut logits: Vec<f32> = (0..v).map(|_| rng.random_range(-30.0..10.0)).collect();
                for _ in 0..v / 50 {
                    let (i, j) = (rng.random_range(0..v), rng.random_range(0..v));
                    logits[i] = logits[j];
                }
                for x in logits.iter_mut().step_by(97) {
                    *x = f32::MIN;
                }
                let got = kernel.run(&ctx, &logits, k, 512).await.unwrap();
                let want = top_by_definition(&logits, k);
                if want.entries.len() > 512 {
                    assert_eq!(got, Top::TooManyTies, "V={v} k={k}: more ties than room");
                } else {
                    assert_eq!(got, Top::Found(want), "V={v} k={k}");
                }
            }
        }
        // The whole top in one slice (the others keep their own k, all below it), the largest
        // below it there too or in another slice; ties at the threshold spread over slices.
        let v = 5 * SLICE + 77;
        for k in [1usize, 40, 512] {
            let mut logits: Vec<f32> = (0..v).map(|_| rng.random_range(-5.0..5.0)).collect();
            for j in 0..=k {
                logits[2 * SLICE + 3 * j] = 100.0 + j as f32;
            }
            let want = top_by_definition(&logits, k);
            assert_eq!(kernel.run(&ctx, &logits, k, 512).await.unwrap(), Top::Found(want), "k={k}, one slice");
            logits[2 * SLICE] = -10.0; // the (k+1)-th is gone: the largest below is in another slice
            logits[4 * SLICE + 5] = 99.5;
            let want = top_by_definition(&logits, k);
            assert_eq!(kernel.run(&ctx, &logits, k, 512).await.unwrap(), Top::Found(want), "k={k}, below elsewhere");
            for s in 0..5 {
                logits[s * SLICE + 11] = 101.0; // ties with the k-th, one per slice
            }
            let want = top_by_definition(&logits, k);
            let got = kernel.run(&ctx, &logits, k, 512).await.unwrap();
            match want.entries.len() > 512 {
                true => assert_eq!(got, Top::TooManyTies, "k={k}, ties across"),
                false => assert_eq!(got, Top::Found(want), "k={k}, ties across"),
            }
        }
        // Many ties at the threshold: kept while they fit, refused beyond the room.
        let flat = vec![1.5f32; 1000];
        assert_eq!(kernel.run(&ctx, &flat, 3, 1000).await.unwrap(), Top::Found(top_by_definition(&flat, 3)));
        assert_eq!(kernel.run(&ctx, &flat, 3, 512).await.unwrap(), Top::TooManyTies);
        let flat = vec![-0.5f32; 3 * SLICE];
        assert_eq!(kernel.run(&ctx, &flat, 40, 512).await.unwrap(), Top::TooManyTies);
        // A NaN or ±Inf, in the top or below it: the model overflowed (NonFiniteOutput).
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            for (v, at) in [(700, 0), (700, 650), (3 * SLICE, 2 * SLICE + 1)] {
                let mut logits = vec![0.25f32; v];
                logits[3] = 2.0;
                logits[at] = bad;
                assert_eq!(kernel.run(&ctx, &logits, 5, 512).await.unwrap(), Top::NonFinite, "{bad} at {at}");
            }
        }
        assert!(ctx.take_uncaptured_error().is_none(), "no stray GPU error");
    }

    async fn top_k_sampling_on_the_gpu_equals_sampling_from_all_logits() {
        let Some(ctx) = gpu("top_k_sampling_on_the_gpu_equals_sampling_from_all_logits").await else { return };
        let f = fixtures::all().into_iter().find(|f| f.name == "medium-bf16").unwrap();
        let prompt = f.reference().ids[..6].to_vec();
        let engine = || async {
            Engine::gpu(&ctx, &f.checkpoint(), GpuModelOptions { max_tokens: 64, ..Default::default() }).await.unwrap()
        };
        let cache = CacheConfig { block_size: 16, ..Default::default() };
        let (mut on_gpu, mut from_all) = (Runtime::new(engine().await, cache).unwrap(), Runtime::new(engine().await, cache).unwrap());
        from_all.set_greedy_batch(0).unwrap(); // every token drawn from all V logits, read back
        let (a, b) = (on_gpu.new_session().unwrap(), from_all.new_session().unwrap());
        on_gpu.append(a, &prompt).await.unwrap();
        from_all.append(b, &prompt).await.unwrap();
        let samplers = [(0.8, 20, 0.9), (1.0, 1, 1.0), (1.7, 50, 1.0), (0.3, 512, 0.95)];
        for (case, &(temperature, top_k, top_p)) in samplers.iter().enumerate() {
            let o = SamplingOptions { temperature, top_k, top_p, repetition_penalty: 1.0 };
            for stop_after in [usize::MAX, 7] {
                let what = format!("T={temperature} top_k={top_k} top_p={top_p} stop after {stop_after}");
                let (mut s1, mut s2) = (Sampler::new(o, case as u64).unwrap(), Sampler::new(o, case as u64).unwrap());
                let options = GenerateOptions { max_tokens: 30, stop_at_eos: false };
                let mut n = 0;
                let mut got = on_gpu.generate(a, &mut s1, options, |_| { n += 1; n < stop_after }).await.unwrap();
                let mut n = 0;
                let mut want = from_all.generate(b, &mut s2, options, |_| { n += 1; n < stop_after }).await.unwrap();
                assert_eq!(got, want, "{what}");
                // Going on with the same samplers: the generators were left in the same state.
                got.extend(on_gpu.generate(a, &mut s1, options, |_| true).await.unwrap());
                want.extend(from_all.generate(b, &mut s2, options, |_| true).await.unwrap());
                assert_eq!(got, want, "{what}, then 30 more");
                assert!(on_gpu.logits(a).unwrap() == from_all.logits(b).unwrap(), "{what}: last logits");
                let (x, y) = (on_gpu.engine().read_state().await.unwrap(), from_all.engine().read_state().await.unwrap());
                assert!(x.to_flat() == y.to_flat(), "{what}: state");
                on_gpu.rewind(a, prompt.len()).await.unwrap();
                from_all.rewind(b, prompt.len()).await.unwrap();
            }
        }
        assert!(ctx.take_uncaptured_error().is_none(), "no stray GPU error");
    }

    async fn masked_picks_from_the_gpu_top_equal_masked_picks_from_all_logits() {
        let Some(ctx) = gpu("masked_picks_from_the_gpu_top_equal_masked_picks_from_all_logits").await else { return };
        let f = fixtures::all().into_iter().find(|f| f.name == "medium-bf16").unwrap();
        let prompt = f.reference().ids[..6].to_vec();
        let engine = || async {
            Engine::gpu(&ctx, &f.checkpoint(), GpuModelOptions { max_tokens: 64, ..Default::default() }).await.unwrap()
        };
        let cache = CacheConfig { block_size: 16, ..Default::default() };
        let (mut on_gpu, mut from_all) = (Runtime::new(engine().await, cache).unwrap(), Runtime::new(engine().await, cache).unwrap());
        from_all.set_greedy_batch(0).unwrap(); // every pick from all V logits, masked on the host
        let (a, b) = (on_gpu.new_session().unwrap(), from_all.new_session().unwrap());
        on_gpu.append(a, &prompt).await.unwrap();
        from_all.append(b, &prompt).await.unwrap();
        let vocab = f.checkpoint().config.vocab_size;
        let words = vocab.div_ceil(32);
        let mask_of = |allowed: &dyn Fn(usize) -> bool| {
            let mut m = TokenMask { words: vec![0; words] };
            (0..vocab).filter(|&t| allowed(t)).for_each(|t| m.words[t / 32] |= 1 << (t % 32));
            m
        };
        let samplers = [(0.0, 0, 1.0), (0.8, 20, 0.9), (1.0, 1, 1.0), (1.7, 50, 1.0)];
        for (case, &(temperature, top_k, top_p)) in samplers.iter().enumerate() {
            let o = SamplingOptions { temperature, top_k, top_p, repetition_penalty: 1.0 };
            let what = format!("T={temperature} top_k={top_k} top_p={top_p}");
            let (mut s1, mut s2) = (Sampler::new(o, case as u64).unwrap(), Sampler::new(o, case as u64).unwrap());
            let options = GenerateOptions { max_tokens: 24, stop_at_eos: false };
            let (mut d1, mut d2) = (Decoding::new(options, Pace::ToEnd), Decoding::new(options, Pace::ToEnd));
            let mut rng = SmallRng::seed_from_u64(case as u64);
            for step in 0..24 {
                // Even tokens; a tenth at random; only the least likely token (no top holds
                // it: the picks fall back to all V logits); any token.
                let mask = match step % 4 {
                    0 => mask_of(&|t| t % 2 == 0),
                    1 => {
                        let keep: Vec<bool> = (0..vocab).map(|_| rng.random_bool(0.1)).collect();
                        mask_of(&|t| keep[t])
                    }
                    2 => {
                        let logits = from_all.logits(b).unwrap().unwrap();
                        let least = (0..vocab).min_by(|&x, &y| logits[x].total_cmp(&logits[y])).unwrap();
                        mask_of(&|t| t == least)
                    }
                    _ => mask_of(&|_| true),
                };
                d1.set_mask(Some(mask.clone()));
                d2.set_mask(Some(mask.clone()));
                let t1 = on_gpu.decode_next(a, &mut d1, &mut s1).await.unwrap().unwrap();
                let t2 = from_all.decode_next(b, &mut d2, &mut s2).await.unwrap().unwrap();
                assert_eq!(t1, t2, "{what}: step {step}");
                assert!(mask.allows(t1), "{what}: step {step}: token {t1} is masked");
            }
            on_gpu.end_decoding(a, &mut d1).await.unwrap();
            from_all.end_decoding(b, &mut d2).await.unwrap();
            // Steps 2, 6, … always fall back; most under the even or the full mask are decided
            // by the top (the device reads back at least 4k), some under the sparse one.
            let from_top = d1.picked_from_top();
            eprintln!("{what}: {from_top} of 24 picks from the top");
            assert!((8..=18).contains(&from_top), "{what}: {from_top} of 24 from the top");
            assert_eq!(d2.picked_from_top(), 0);
            assert!(on_gpu.logits(a).unwrap() == from_all.logits(b).unwrap(), "{what}: last logits");
            let (x, y) = (on_gpu.engine().read_state().await.unwrap(), from_all.engine().read_state().await.unwrap());
            assert!(x.to_flat() == y.to_flat(), "{what}: state");
            on_gpu.rewind(a, prompt.len()).await.unwrap();
            from_all.rewind(b, prompt.len()).await.unwrap();
        }
        assert!(ctx.take_uncaptured_error().is_none(), "no stray GPU error");
    }
}
