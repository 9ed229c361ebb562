//! Sampling: the scores a draw is made from equal those of HF transformers' logits processors
//! (repetition penalty, temperature, top-k, top-p — tests/fixtures/sampling_cases.json, made by
//! tools/fixtures/make_sampling_cases.py); draws follow softmax of them; a seed gives the same
//! tokens on the CPU and the GPU; stop strings end text where they begin. Native and in the
//! browser.

mod common;

use common::fixtures;
use webmamba::sampling::{LogitsTop, Sampler, SamplingOptions, StopStrings};
use webmamba::{CacheConfig, Engine, GenerateOptions, GpuContext, GpuModelOptions, Runtime};

const CASES: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/sampling_cases.json"));

fn options(case: &serde_json::Value) -> SamplingOptions {
    let f = |k: &str| case[k].as_f64().unwrap() as f32;
    SamplingOptions {
        temperature: f("temperature"),
        top_k: case["top_k"].as_u64().unwrap() as usize,
        top_p: f("top_p"),
        repetition_penalty: f("repetition_penalty"),
    }
}

async fn sampled(ctx: Option<&GpuContext>, seed: u64) -> Vec<u32> {
    let f = &fixtures::all()[0];
    let engine = match ctx {
        Some(ctx) => {
            Engine::gpu(ctx, &f.checkpoint(), GpuModelOptions { max_tokens: 64, ..Default::default() })
                .await
                .unwrap()
        }
        None => Engine::cpu(f.checkpoint().weights().unwrap()),
    };
    let mut rt = Runtime::new(engine, CacheConfig::default()).unwrap();
    let s = rt.new_session().unwrap();
    rt.append(s, &[5, 17, 3, 99, 42, 7]).await.unwrap();
    let o = SamplingOptions { temperature: 0.9, top_k: 40, top_p: 0.95, repetition_penalty: 1.2 };
    let mut sampler = Sampler::new(o, seed).unwrap();
    let options = GenerateOptions { max_tokens: 24, stop_at_eos: false };
    rt.generate(s, &mut sampler, options, |_| true).await.unwrap()
}

dual_test! {
    async fn scores_match_hf_logits_processors() {
        let v: serde_json::Value = serde_json::from_str(CASES).unwrap();
        for (i, case) in v["cases"].as_array().unwrap().iter().enumerate() {
            let o = options(case);
            let floats = |k: &str| -> Vec<f32> {
                case[k].as_array().unwrap().iter().map(|x| x.as_f64().map_or(f32::NEG_INFINITY, |v| v as f32)).collect()
            };
            let history: Vec<u32> = case["history"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect();
            let got = Sampler::new(o, 0).unwrap().scores(&floats("logits"), &history);
            let want = floats("scores");
            for (j, (g, w)) in got.iter().zip(&want).enumerate() {
                let same = if w.is_infinite() { g == w } else { (g - w).abs() <= 1e-5 * w.abs().max(1.0) };
                assert!(same, "case {i} {o:?}: token {j}: got {g}, HF {w}");
            }
        }
    }

    async fn draws_follow_the_scores() {
        let logits = [2.0f32, 1.0, 0.5, -1.0, 3.0];
        let o = SamplingOptions { temperature: 1.3, top_k: 4, ..Default::default() };
        let mut sampler = Sampler::new(o, 9).unwrap();
        let scores = sampler.scores(&logits, &[]);
        let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let total: f32 = scores.iter().map(|s| (s - max).exp()).sum();
        let n = 20_000;
        let mut counts = [0usize; 5];
        for _ in 0..n {
            counts[sampler.sample(&logits, &[]).unwrap() as usize] += 1;
        }
        for (i, &c) in counts.iter().enumerate() {
            let p = ((scores[i] - max).exp() / total) as f64;
            let sd = (p * (1.0 - p) / n as f64).sqrt();
            let seen = c as f64 / n as f64;
            assert!((seen - p).abs() <= 5.0 * sd + 1e-9, "token {i}: drawn {seen:.4}, probability {p:.4}");
        }
        assert_eq!(counts[3], 0, "top-k 4 never draws the least likely");

        let mut a = Sampler::new(o, 123).unwrap();
        let mut b = Sampler::new(o, 123).unwrap();
        let draws = |s: &mut Sampler| (0..64).map(|_| s.sample(&logits, &[]).unwrap()).collect::<Vec<_>>();
        assert_eq!(draws(&mut a), draws(&mut b), "a seed fixes the draws");
        for bad in [
            SamplingOptions { temperature: -1.0, ..Default::default() },
            SamplingOptions { top_p: 0.0, ..Default::default() },
            SamplingOptions { top_p: 1.5, ..Default::default() },
            SamplingOptions { repetition_penalty: 0.0, ..Default::default() },
            SamplingOptions { temperature: f32::NAN, ..Default::default() },
        ] {
            assert_eq!(Sampler::new(bad, 0).err().map(|e| e.code()), Some("InvalidInput"), "{bad:?}");
        }
    }

    async fn a_seed_gives_the_same_tokens_on_cpu_and_gpu() {
        let cpu = sampled(None, 7).await;
        assert_eq!(cpu, sampled(None, 7).await, "the same seed twice");
        assert_ne!(cpu, sampled(None, 8).await, "another seed, other tokens");
        if let Some(ctx) = common::gpu("a_seed_gives_the_same_tokens_on_cpu_and_gpu").await {
            assert_eq!(sampled(Some(&ctx), 7).await, cpu, "GPU and CPU, seed 7");
        }
    }

    async fn drawing_from_the_top_equals_drawing_from_all_logits() {
        use rand::{Rng, SeedableRng, rngs::SmallRng};
        let mut rng = SmallRng::seed_from_u64(9);
        let v = 1000;
        for (case, (temperature, top_k, top_p)) in
            [(0.5, 1, 1.0), (1.0, 5, 1.0), (1.3, 50, 0.8), (3.0, 50, 1.0), (0.7, 999, 0.9)].into_iter().enumerate()
        {
            let o = SamplingOptions { temperature, top_k, top_p, repetition_penalty: 1.0 };
            let (mut all, mut top) = (Sampler::new(o, case as u64).unwrap(), Sampler::new(o, case as u64).unwrap());
            assert_eq!(top.top_only(v), Some(top_k));
            for _ in 0..50 {
                let logits: Vec<f32> = (0..v).map(|_| rng.random_range(-8.0..8.0)).collect();
                let mut sorted = logits.clone();
                sorted.sort_by(|a, b| b.total_cmp(a));
                let kth = sorted[top_k - 1];
                let entries = logits.iter().enumerate().filter(|e| *e.1 >= kth).map(|(i, &x)| (i as u32, x)).collect();
                let below = sorted.get(top_k).copied();
                let summary = LogitsTop { vocab: v, entries, below };
                let want = all.sample(&logits, &[]).unwrap();
                assert_eq!(top.sample_top(&summary, &[]).expect("decided by the top").unwrap(), want, "{o:?}");
            }
        }
        // Not decidable from the top: fewer than k entries, or the temperature rounding the
        // next logit onto the k-th (top-k over all logits would keep it too).
        let o = SamplingOptions { temperature: 3.0, top_k: 2, top_p: 1.0, repetition_penalty: 1.0 };
        let mut s = Sampler::new(o, 1).unwrap();
        let one = LogitsTop { vocab: 10, entries: vec![(3, 2.0)], below: Some(1.0) };
        assert!(s.sample_top(&one, &[]).is_none());
        let mut kth = 1.0f32;
        while (kth - f32::EPSILON) / 3.0 != kth / 3.0 {
            kth = f32::from_bits(kth.to_bits() + 1);
        }
        let merged = LogitsTop { vocab: 10, entries: vec![(3, 2.0), (5, kth)], below: Some(kth - f32::EPSILON) };
        assert!(s.sample_top(&merged, &[]).is_none(), "{kth} and the one below round together at T=3");
        // Greedy and penalised samplers are not served from the top.
        assert_eq!(Sampler::greedy().top_only(10), None);
        let penalised = SamplingOptions { repetition_penalty: 1.2, ..o };
        assert_eq!(Sampler::new(penalised, 1).unwrap().top_only(10), None);
    }

    async fn stop_strings_end_the_text_where_they_begin() {
        let mut s = StopStrings::new(vec!["\n\n".into(), "END".into()]).unwrap();
        let mut shown = String::new();
        let mut stopped = false;
        for piece in ["Hello", " E", "N", "d of", " it\n", "\nmore"] {
            let (text, reached) = s.push(piece);
            shown.push_str(&text);
            if reached {
                stopped = true;
                break;
            }
        }
        assert!(stopped);
        assert_eq!(shown, "Hello ENd of it", "held back \"E\", then released it; cut at the blank line");

        let mut s = StopStrings::new(vec!["ab".into()]).unwrap();
        let (a, _) = s.push("xa");
        assert_eq!(a, "x", "a possible start of a stop string waits");
        let (b, reached) = s.push("c");
        assert_eq!((b.as_str(), reached), ("ac", false));
        let (c, _) = s.push("é a");
        assert_eq!((c.as_str(), s.finish().as_str()), ("é ", "a"), "what waits comes out at the end");
        assert!(StopStrings::new(vec![String::new()]).is_err());
    }
}
