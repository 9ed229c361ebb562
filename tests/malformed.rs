//! The malformed-input matrix at the Rust API, natively and in headless Chromium, on the CPU
//! and on the GPU: every case is a typed error with its code, and afterwards a session that
//! worked before still generates exactly the tokens it generated before. (The JavaScript
//! entries, with wrong-typed arguments, are covered by tests/browser/robustness.mjs.)

mod common;

use common::fixtures;
use webmamba::sampling::Sampler;
use webmamba::{
    CacheConfig, Checkpoint, Engine, GenerateOptions, GpuContext, GpuModelOptions, Logits, Runtime, SessionId,
};

const PROMPT: [u32; 11] = [5, 17, 3, 99, 42, 7, 7, 64, 1, 250, 12];
const N: usize = 8;

async fn engine(f: &fixtures::Fixture, ctx: Option<&GpuContext>) -> Engine {
    match ctx {
        Some(ctx) => {
            let options = GpuModelOptions { max_tokens: 64, ..Default::default() };
            Engine::gpu(ctx, &f.checkpoint(), options).await.unwrap()
        }
        None => Engine::cpu(f.checkpoint().weights().unwrap()),
    }
}

async fn greedy(rt: &mut Runtime, id: SessionId) -> webmamba::Result<Vec<u32>> {
    let options = GenerateOptions { max_tokens: N, stop_at_eos: false };
    rt.generate(id, &mut Sampler::greedy(), options, |_| true).await
}

/// Blob `b` with its last 32 bytes (the blake3 checksum) recomputed: damage past the checksum.
fn resealed(mut b: Vec<u8>) -> Vec<u8> {
    let body = b.len() - 32;
    let sum = *blake3::hash(&b[..body]).as_bytes();
    b[body..].copy_from_slice(&sum);
    b
}

/// Every malformed input, each a typed error, the session intact (run on both backends:
/// `malformed_inputs_leave_sessions_intact::{cpu, gpu}`).
async fn malformed_inputs_leave_sessions_intact(ctx: Option<&GpuContext>) {
    let all = fixtures::all();
    let f = &all[0];
    let mut rt =
        Runtime::new(engine(f, ctx).await, CacheConfig { block_size: 4, ..Default::default() }).unwrap();
    let backend = rt.engine().name();
    let s = rt.new_session().unwrap();
    rt.append(s, &PROMPT).await.unwrap();
    let want = greedy(&mut rt, s).await.unwrap();
    let saved = rt.export_state(s).await.unwrap();
    let mut foreign_rt = Runtime::new(engine(&all[1], ctx).await, CacheConfig::default()).unwrap();
    let foreign = foreign_rt.new_session().unwrap();
    foreign_rt.append(foreign, &[1, 2, 3]).await.unwrap();
    let foreign_state = foreign_rt.export_state(foreign).await.unwrap();
    let vocab = rt.engine().config().vocab_size as u32;

    let mut flipped = saved.clone();
    flipped[40] ^= 1;
    let mut too_many_tokens = saved.clone();
    too_many_tokens[76..84].copy_from_slice(&u64::MAX.to_le_bytes()); // n_tokens
    let too_many_tokens = resealed(too_many_tokens);
    let mut bad_token = saved.clone();
    bad_token[84..88].copy_from_slice(&vocab.to_le_bytes()); // tokens[0], prefix hash then fails
    let bad_token = resealed(bad_token);
    let truncated = resealed(saved[..saved.len() - 36].to_vec());
    let weights = f.weights[0].1;

    let mut cases: Vec<(&str, &str)> = Vec::new();
    let mut run =
        async |label: &'static str, code: &'static str, rt: &mut Runtime, r: webmamba::Result<()>| {
            let e = r.err().unwrap_or_else(|| panic!("{backend}: {label}: accepted"));
            assert_eq!(e.code(), code, "{backend}: {label}: {e}");
            rt.rewind(s, PROMPT.len()).await.unwrap();
            assert_eq!(greedy(rt, s).await.unwrap(), want, "{backend}: after {label}: the session changed");
            cases.push((label, code));
        };

    // Checkpoints that cannot load (nothing of the runtime is touched, and nothing breaks).
    let load = |config: &[u8], w: Vec<u8>| -> webmamba::Result<()> {
        Checkpoint::from_bytes(config, vec![("model.safetensors".into(), w)], None, None)?.weights()?;
        Ok(())
    };
    run("config not JSON", "Config", &mut rt, load(b"not json", weights.to_vec())).await;
    // Hybrid configs that are no model webmamba can run: typed errors before a weight is read.
    let granite = |edit: serde_json::Value| {
        let mut c = serde_json::json!({
            "model_type": "granitemoehybrid", "hidden_size": 32, "num_hidden_layers": 2, "vocab_size": 300,
            "num_attention_heads": 4, "num_key_value_heads": 2, "mamba_n_heads": 4, "mamba_d_state": 8,
            "num_local_experts": 4, "num_experts_per_tok": 2, "layer_types": ["mamba", "attention"],
        });
        c.as_object_mut().unwrap().extend(edit.as_object().unwrap().clone());
        load(c.to_string().as_bytes(), weights.to_vec())
    };
    for (label, code, edit) in [
        (
            "a hybrid with an unknown layer type",
            "UnsupportedModel",
            serde_json::json!({"layer_types": ["mamba", "sliding_attention"]}),
        ),
        ("KV heads not dividing the heads", "Config", serde_json::json!({"num_key_value_heads": 3})),
        (
            "an unknown rope_scaling type",
            "UnsupportedModel",
            serde_json::json!({"position_embedding_type": "rope", "rope_scaling": {"type": "yarn", "factor": 4.0}}),
        ),
        ("more experts per token than experts", "Config", serde_json::json!({"num_experts_per_tok": 5})),
    ] {
        run(label, code, &mut rt, granite(edit)).await;
    }
    // The newer kinds' configs (Qwen3.5's Gated DeltaNet, LFM2's short convolutions).
    let with = |base: serde_json::Value, edit: serde_json::Value| {
        let mut c = base;
        c.as_object_mut().unwrap().extend(edit.as_object().unwrap().clone());
        load(c.to_string().as_bytes(), weights.to_vec())
    };
    let qwen = serde_json::json!({
        "model_type": "qwen3_5_text", "vocab_size": 300, "hidden_size": 32, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "intermediate_size": 64,
        "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8,
        "linear_value_head_dim": 8,
    });
    let lfm2 = serde_json::json!({
        "model_type": "lfm2", "vocab_size": 300, "hidden_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 64,
        "layer_types": ["conv", "full_attention"],
    });
    for (label, code, base, edit) in [
        (
            "Gated DeltaNet: zero value heads",
            "Config",
            &qwen,
            serde_json::json!({"linear_num_value_heads": 0}),
        ),
        (
            "Gated DeltaNet: key heads not dividing value heads",
            "Config",
            &qwen,
            serde_json::json!({"linear_num_key_heads": 3}),
        ),
        ("Gated DeltaNet: 0 conv taps", "Config", &qwen, serde_json::json!({"linear_conv_kernel_dim": 0})),
        (
            "Qwen3.5: an unknown layer type",
            "UnsupportedModel",
            &qwen,
            serde_json::json!({"layer_types": ["linear_attention", "mamba2", "linear_attention", "full_attention"]}),
        ),
        ("Qwen3.5's MoE", "UnsupportedModel", &qwen, serde_json::json!({"model_type": "qwen3_5_moe"})),
        ("LFM2: 0 conv taps", "Config", &lfm2, serde_json::json!({"conv_L_cache": 0})),
        ("LFM2: zero heads", "Config", &lfm2, serde_json::json!({"num_attention_heads": 0})),
        (
            "LFM2: an unknown layer type",
            "UnsupportedModel",
            &lfm2,
            serde_json::json!({"layer_types": ["conv", "mamba"]}),
        ),
    ] {
        run(label, code, &mut rt, with(base.clone(), edit)).await;
    }
    run("truncated weights", "Safetensors", &mut rt, load(f.config, weights[..weights.len() - 9].to_vec()))
        .await;
    let mut huge = weights.to_vec();
    huge[..8].copy_from_slice(&(1u64 << 62).to_le_bytes());
    run("header length 2^62", "Safetensors", &mut rt, load(f.config, huge)).await;
    // GGUF files (llama.cpp's converter wrote the original), damaged in their header.
    for (label, code, bytes) in gguf_cases().into_iter().filter(|c| !c.1.is_empty()) {
        let r = Checkpoint::from_gguf_bytes("m.gguf", bytes).and_then(|c| c.weights()).map(|_| ());
        run(label, code, &mut rt, r).await;
    }
    let (_, _, good) = gguf_cases().pop().unwrap();
    // Undamaged, the file loads: each case fails for its damage alone.
    Checkpoint::from_gguf_bytes("m.gguf", good.clone()).and_then(|c| c.weights()).unwrap();
    let r = Checkpoint::from_gguf_bytes("m-00001-of-00002.gguf", good.clone()).map(|_| ());
    run("GGUF: a split set with a missing part", "Io", &mut rt, r).await;
    let r = Checkpoint::from_gguf_bytes("m-00002-of-00002.gguf", good).map(|_| ());
    run("GGUF: a later part of a split set alone", "Gguf", &mut rt, r).await;
    let tokenizer = webmamba::Tokenizer::from_bytes(br#"{"model": 5}"#).map(|_| ());
    run("tokenizer.json damaged", "Tokenizer", &mut rt, tokenizer).await;

    // Calls on the runtime.
    let r = rt.append(s, &[vocab]).await.map(|_| ());
    run("an id outside the vocabulary", "InvalidInput", &mut rt, r).await;
    let r = rt.append(s, &[1, 2, u32::MAX]).await.map(|_| ());
    run("id 2^32 − 1", "InvalidInput", &mut rt, r).await;
    let r = rt.rewind(s, PROMPT.len() + N + 1).await.map(|_| ());
    run("rewind past the history", "InvalidInput", &mut rt, r).await;
    let r = rt.edit(s, &[1, vocab + 7]).await.map(|_| ());
    run("edit with a bad id", "InvalidInput", &mut rt, r).await;
    let other = rt.new_session().unwrap();
    let r = greedy(&mut rt, other).await.map(|_| ());
    run("generate without a prompt", "InvalidInput", &mut rt, r).await;
    for (label, code, blob) in [
        ("import 10 zero bytes", "CorruptState", vec![0u8; 10]),
        ("import with a flipped bit", "CorruptState", flipped),
        ("import another model's state", "StateMismatch", foreign_state),
        ("import claiming 2^64 − 1 tokens", "CorruptState", too_many_tokens),
        ("import with a token outside the vocabulary", "CorruptState", bad_token),
        ("import cut short (resealed)", "CorruptState", truncated),
    ] {
        let r = rt.import_state(other, &blob).await;
        run(label, code, &mut rt, r).await;
        assert!(rt.history(other).unwrap().is_empty(), "{label}: the importing session is unchanged");
    }
    rt.close_session(other).unwrap();
    let r = rt.append(other, &[1]).await.map(|_| ());
    run("a closed session", "NoSession", &mut rt, r).await;
    let r = rt.close_session(other);
    run("closing it twice", "NoSession", &mut rt, r).await;
    assert_eq!(rt.cache_stats().bytes_reserved, 0, "{backend}: no reservation outlives its call");

    // The engine itself: an empty forward, checkpoint positions out of order.
    let mut e = engine(f, ctx).await;
    let r = e.forward(&[], Logits::Last).await.map(|_| ());
    run("an empty forward", "InvalidInput", &mut rt, r).await;
    let slots = e.add_slots(2).unwrap();
    let captures = [(3, slots.start), (1, slots.start + 1)];
    let r = e.forward_capturing(&PROMPT, Logits::Last, &captures).await.map(|_| ());
    run("captures out of order", "InvalidInput", &mut rt, r).await;

    // The saved state still imports, into a fresh session, and continues the same way.
    let again = rt.new_session().unwrap();
    rt.import_state(again, &saved).await.unwrap();
    assert_eq!(rt.history(again).unwrap(), rt.history(s).unwrap());
    common::log(&format!(
        "{backend}: {} malformed inputs, each a typed error, the session intact",
        cases.len()
    ));
}

dual_backend_test!(malformed_inputs_leave_sessions_intact);

/// Where GGUF string `name` (u64 length, bytes) ends in `file`: the field after it.
fn after_string(file: &[u8], name: &str) -> usize {
    let mut needle = (name.len() as u64).to_le_bytes().to_vec();
    needle.extend(name.as_bytes());
    file.windows(needle.len()).position(|w| w == needle).unwrap_or_else(|| panic!("{name} in the file"))
        + needle.len()
}

/// llama.cpp's mamba GGUF fixture damaged every way the issue lists: (label, code, bytes).
fn gguf_cases() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let good: &[u8] =
        include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gguf/mamba-tiny-F32.gguf"));
    let put = |at: usize, value: &[u8]| {
        let mut b = good.to_vec();
        b[at..at + value.len()].copy_from_slice(value);
        b
    };
    // token_embd.weight: n_dims (u32), 2 dims (u64), type (u32), offset (u64).
    let embd = after_string(good, "token_embd.weight");
    let norm = after_string(good, "output_norm.weight");
    let name = after_string(good, "general.name") + 4; // the value's type, then its length
    let norm_offset = norm + 4 + 8 + 4;
    vec![
        ("GGUF: bad magic", "Gguf", put(0, b"GGUX")),
        ("GGUF: version 1", "Gguf", put(4, &1u32.to_le_bytes())),
        ("GGUF: version 4", "Gguf", put(4, &4u32.to_le_bytes())),
        ("GGUF: 5 dimensions", "Gguf", put(embd, &5u32.to_le_bytes())),
        ("GGUF: a dimension of 2^40", "Gguf", put(embd + 4, &(1u64 << 40).to_le_bytes())),
        ("GGUF: an unknown type id", "Gguf", put(embd + 20, &77u32.to_le_bytes())),
        (
            "GGUF: a type webmamba does not compute on",
            "UnsupportedDtype",
            put(embd + 20, &16u32.to_le_bytes()),
        ),
        ("GGUF: a tensor past the end", "Gguf", put(embd + 24, &(1u64 << 40).to_le_bytes())),
        ("GGUF: overlapping tensors", "Gguf", put(norm_offset, &good[embd + 24..embd + 32])),
        ("GGUF: a metadata string of 2^40 bytes", "Gguf", put(name, &(1u64 << 40).to_le_bytes())),
        ("GGUF: truncated data", "Gguf", good[..good.len() - 100].to_vec()),
        ("GGUF: truncated header", "Gguf", good[..200].to_vec()),
        ("GGUF: an unknown architecture", "UnsupportedModel", {
            let at = after_string(good, "general.architecture") + 4 + 8;
            put(at, b"mambo")
        }),
        ("(the file as llama.cpp wrote it)", "", good.to_vec()),
    ]
}
