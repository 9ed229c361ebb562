//! The embedded default model (www/models/shakespeare-mamba-3m): it loads, and greedy decoding
//! on the CPU reference and on the GPU gives exactly the tokens HF transformers gave when the
//! model was trained (hf_reference.json), natively and in headless Chromium.

mod common;

use common::{gpu, log};
use webmamba::sampling::Sampler;
use webmamba::{CacheConfig, Engine, GenerateOptions, GpuContext, GpuModelOptions, Runtime, Tokenizer};

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
