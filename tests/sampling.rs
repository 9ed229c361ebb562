//! Sampling: the scores a draw is made from equal those of HF transformers' logits processors
//! (repetition penalty, temperature, top-k, top-p — tests/fixtures/sampling_cases.json, made by
//! tools/fixtures/make_sampling_cases.py); draws follow softmax of them; a seed gives the same
//! tokens on the CPU and the GPU; stop strings end text where they begin. Native and in the
//! browser.

mod common;

use common::fixtures;
use webmamba::sampling::{Sampler, SamplingOptions, StopStrings};
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
