//! The embedded default model (www/models/shakespeare-mamba-3m): it loads, and greedy decoding
//! on the CPU reference and on the GPU gives exactly the tokens HF transformers gave when the
//! model was trained (hf_reference.json), natively and in headless Chromium; and rounding its
//! GPU weights to int8 costs under 2% of perplexity on held-out text (The Tempest, not in the
//! training data).

mod common;

use common::{gpu, log, perplexity};
use webmamba::sampling::Sampler;
use webmamba::{
    CacheConfig, Engine, GenerateOptions, GpuContext, GpuModel, GpuModelOptions, Logits, Runtime, Tokenizer,
    WeightFormat,
};

// The very module the CLI embeds the model with.
#[path = "../src/bin/webmamba/default_model.rs"]
mod default_model;

struct Reference {
    prompt: String,
    prompt_ids: Vec<u32>,
    greedy_ids: Vec<u32>,
}

fn reference() -> Reference {
    let v: serde_json::Value = serde_json::from_slice(include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/www/models/shakespeare-mamba-3m/hf_reference.json"
    )))
    .unwrap();
    let ids = |k: &str| v[k].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect();
    Reference {
        prompt: v["prompt"].as_str().unwrap().into(),
        prompt_ids: ids("prompt_ids"),
        greedy_ids: ids("greedy_ids"),
    }
}

async fn greedy_matches_hf(ctx: Option<&GpuContext>) {
    let c = default_model::checkpoint().unwrap();
    let tokenizer = Tokenizer::from_bytes(c.tokenizer_json.as_deref().unwrap()).unwrap();
    let r = reference();
    assert_eq!(tokenizer.encode(&r.prompt, false).unwrap(), r.prompt_ids, "tokenizer");
    let engine = match ctx {
        Some(ctx) => Engine::gpu(ctx, &c, GpuModelOptions::default()).await.unwrap(),
        None => Engine::cpu(c.weights().unwrap()),
    };
    let name = engine.name();
    let mut rt = Runtime::new(engine, CacheConfig::default()).unwrap();
    let s = rt.new_session().unwrap();
    rt.append(s, &r.prompt_ids).await.unwrap();
    let n = r.greedy_ids.len();
    let options = GenerateOptions { max_tokens: n, stop_at_eos: true };
    let got = rt.generate(s, &mut Sampler::greedy(), options, |_| true).await.unwrap();
    assert_eq!(got, r.greedy_ids[..got.len()], "{name}: greedy tokens vs HF");
    assert!(got.len() == n || got.last() == Some(&0), "{name}: stopped early without end-of-text");
    log(&format!("[{}] {name}: {:?}", default_model::NAME, tokenizer.decode(&got, true).unwrap()));
}

dual_test! {
    async fn default_model_greedy_matches_hf_on_the_cpu() {
        greedy_matches_hf(None).await
    }

    async fn default_model_greedy_matches_hf_on_the_gpu() {
        let Some(ctx) = gpu("default_model_greedy_matches_hf_on_the_gpu").await else { return };
        greedy_matches_hf(Some(&ctx)).await
    }
}

/// The opening of The Tempest (one of the two plays held out of training).
const HELD_OUT: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/www/models/shakespeare-mamba-3m/heldout-tempest.txt"));

dual_test! {
    async fn int8_weights_keep_perplexity_within_two_percent_of_f32() {
        let Some(ctx) = gpu("int8_weights_keep_perplexity_within_two_percent_of_f32").await else { return };
        let c = default_model::checkpoint().unwrap();
        let tokenizer = Tokenizer::from_bytes(c.tokenizer_json.as_deref().unwrap()).unwrap();
        let tokens = tokenizer.encode(HELD_OUT, false).unwrap();
        let tokens = &tokens[..tokens.len().min(2048)];
        let vocab = c.config.vocab_size;
        let mut results = Vec::new();
        for weights in WeightFormat::ALL {
            let mut m = GpuModel::load(&ctx, &c, GpuModelOptions { weights, ..Default::default() }).await.unwrap();
            let logits = m.forward(&tokens[..tokens.len() - 1], Logits::All).await.unwrap();
            let ppl = perplexity(&logits, tokens, vocab);
            let memory = m.memory();
            log(&format!(
                "[{}] {} weights: perplexity {ppl:.3} over {} held-out tokens; {} bytes of GPU weights",
                default_model::NAME,
                weights.name(),
                tokens.len() - 1,
                memory.weights
            ));
            results.push((weights, ppl, memory.weights));
        }
        let (f32_ppl, int8_ppl) = (results[0].1, results[2].1);
        assert!(f32_ppl > 1.0 && f32_ppl < 200.0, "the f32 model predicts the text: perplexity {f32_ppl}");
        assert!((int8_ppl / f32_ppl - 1.0).abs() <= 0.02, "int8 perplexity {int8_ppl} vs f32 {f32_ppl}");
        assert!(results[2].2 < results[1].2 && results[1].2 < results[0].2, "int8 < f16 < f32 bytes");
    }
}
