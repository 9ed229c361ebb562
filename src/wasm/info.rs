//! [`ModelInfo`]: what a loaded model is, where it runs and what memory it takes, for pages to
//! show (the demo's model table) and check.

use wasm_bindgen::prelude::*;

use crate::engine::Engine;
use crate::session::Runtime;

/// What a loaded model is and where it runs (`toJSON()` gives it as a plain object).
#[wasm_bindgen(getter_with_clone, inspectable)]
#[derive(Clone, Debug)]
pub struct ModelInfo {
    /// "gpu" or "cpu".
    pub backend: String,
    /// The GPU adapter ("" on the CPU), and why the CPU was chosen if it was.
    pub adapter: String,
    /// The architecture, as config.json's `model_type` ("mamba", "falcon_mamba", "mamba2",
    /// "granitemoehybrid", "bamba", "nemotron_h", "jamba", "falcon_h1", "zamba2").
    pub architecture: String,
    /// Width of the residual stream.
    #[wasm_bindgen(js_name = dModel)]
    pub d_model: u32,
    /// Blocks.
    pub layers: u32,
    /// Vocabulary size.
    pub vocab: u32,
    /// Bytes of one recurrent state (one checkpoint).
    #[wasm_bindgen(js_name = stateBytes)]
    pub state_bytes: f64,
    /// How weight matrices are stored: "f32", "f16", "int8" or "q4" on the GPU; on the CPU the
    /// checkpoint's dtype ("bf16", "f16", "f32": kept as stored).
    #[wasm_bindgen(js_name = weightFormat)]
    pub weight_format: String,
    /// Every format the weight matrices are stored in: on the GPU `weightFormat` and, for a
    /// GGUF file, its quantized types computed on as stored ("f16", "Q4_K", "Q6_K"); on the
    /// CPU `[weightFormat]`.
    #[wasm_bindgen(js_name = weightFormats)]
    pub weight_formats: Vec<String>,
    /// Bytes the weights take (GPU buffers, or memory on the CPU).
    #[wasm_bindgen(js_name = weightBytes)]
    pub weight_bytes: f64,
    /// GPU bytes of activation buffers (0 on the CPU).
    #[wasm_bindgen(js_name = activationBytes)]
    pub activation_bytes: f64,
    /// GPU bytes of the working state and the checkpoint-cache slots (0 on the CPU).
    #[wasm_bindgen(js_name = stateSlotBytes)]
    pub state_slot_bytes: f64,
    /// f16 storage: nonzero weights below f16's normal range (rounded; 0 for f32/int8).
    #[wasm_bindgen(js_name = f16Subnormal)]
    pub f16_subnormal: f64,
    /// f16 storage: weights beyond ±65504 (clamped).
    #[wasm_bindgen(js_name = f16Overflow)]
    pub f16_overflow: f64,
    /// Tokens per checkpoint block of the state cache: block checkpoints sit at its multiples,
    /// prompt-end checkpoints anywhere.
    #[wasm_bindgen(js_name = blockSize)]
    pub block_size: u32,
    /// The most tokens of context the model may hold (its attention layers' key/value caches:
    /// `maxContext`); `Infinity` for a model without attention.
    #[wasm_bindgen(js_name = maxContext)]
    pub max_context: f64,
    /// Bytes the key/value caches grow by per token of context (0 without attention).
    #[wasm_bindgen(js_name = kvBytesPerToken)]
    pub kv_bytes_per_token: f64,
    /// How the key/value caches store keys and values: "f32" or "f16" ("f32" on the CPU).
    #[wasm_bindgen(js_name = kvFormat)]
    pub kv_format: String,
    /// Bytes of one key/value page of the checkpoint cache: `blockSize` positions of every
    /// attention layer's keys and values, shared by every checkpoint after them (0 without
    /// attention).
    #[wasm_bindgen(js_name = pageBytes)]
    pub page_bytes: f64,
    /// Threads of the CPU backend's forward pass (1 on the GPU): more than one only in a
    /// worker of a cross-origin-isolated page (`threads`).
    pub threads: u32,
    /// The wasm module's vector instructions: "relaxed" for the relaxed-SIMD module (the CPU
    /// backend's matrix products then use fused multiply-adds where the CPU has them, so its
    /// results may differ in the last bits from another machine's), else "simd128".
    pub simd: String,
    /// What went wrong without stopping the load (e.g. the offline cache is full).
    pub warnings: Vec<String>,
}

impl ModelInfo {
    pub(crate) fn new(rt: &Runtime, adapter: String, warnings: Vec<String>) -> Self {
        let e = rt.engine();
        let c = e.config();
        let mut info = ModelInfo {
            backend: e.name().into(),
            adapter,
            architecture: c.arch.name().into(),
            d_model: c.d_model as u32,
            layers: c.n_layer() as u32,
            vocab: c.vocab_size as u32,
            state_bytes: crate::model::State::bytes(c) as f64,
            weight_format: String::new(),
            weight_formats: Vec::new(),
            weight_bytes: 0.0,
            activation_bytes: 0.0,
            state_slot_bytes: 0.0,
            f16_subnormal: 0.0,
            f16_overflow: 0.0,
            block_size: rt.cache_config().block_size as u32,
            max_context: match e.max_context() {
                usize::MAX => f64::INFINITY,
                n => n as f64,
            },
            kv_bytes_per_token: crate::model::context::kv_bytes_per_position(c) as f64,
            kv_format: "f32".into(),
            page_bytes: 0.0,
            threads: e.cpu_threads().unwrap_or(1) as u32,
            simd: if cfg!(target_feature = "relaxed-simd") { "relaxed" } else { "simd128" }.into(),
            warnings,
        };
        match e {
            Engine::Gpu(m) => {
                let mem = m.memory();
                info.weight_format = mem.weight_format.name().into();
                info.weight_formats = m.weight_formats().iter().map(|f| f.name().to_string()).collect();
                info.weight_bytes = mem.weights as f64;
                info.activation_bytes = mem.activations as f64;
                info.state_slot_bytes = (mem.state + mem.slots) as f64;
                info.f16_subnormal = mem.conversion.f16_subnormal as f64;
                info.f16_overflow = mem.conversion.f16_overflow as f64;
                info.kv_format = m.kv_format().name().into();
                info.kv_bytes_per_token *= m.kv_format().bytes() as f64 / 4.0;
            }
            Engine::Cpu { model, .. } => {
                let w = model.weights();
                info.weight_format = w.embedding.dtype_name().into();
                info.weight_formats = vec![info.weight_format.clone()];
                info.weight_bytes = w.bytes() as f64;
            }
        }
        info.page_bytes = info.kv_bytes_per_token * f64::from(info.block_size);
        info
    }
}

/// The checkpoint cache's counters, across sessions (`model.cacheStats()`).
#[wasm_bindgen(getter_with_clone, inspectable)]
#[derive(Clone, Debug)]
pub struct CacheInfo {
    /// Checkpoints held.
    pub entries: u32,
    /// Bytes they take: `stateBytes` + `pageBytes`, within `budgetBytes`.
    #[wasm_bindgen(js_name = bytesUsed)]
    pub bytes_used: f64,
    /// Of `bytesUsed`, the checkpoints' own: states, prompt-end logits, partial last blocks.
    #[wasm_bindgen(js_name = stateBytes)]
    pub state_bytes: f64,
    /// Of `bytesUsed`, the key/value pages' (a hybrid's), each counted once however many
    /// checkpoints and sessions share it.
    #[wasm_bindgen(js_name = pageBytes)]
    pub page_bytes: f64,
    /// Key/value pages held.
    pub pages: u32,
    /// The budget.
    #[wasm_bindgen(js_name = budgetBytes)]
    pub budget_bytes: f64,
    /// Checkpoints evicted so far.
    pub evictions: f64,
    /// Whether the persistent state store is on (`store` load option, and it opened).
    pub store: bool,
    /// Bytes of the store's records on disk, as this model last counted them (other tabs'
    /// writes since are not in it); 0 without a store.
    #[wasm_bindgen(js_name = storeBytes)]
    pub store_bytes: f64,
    /// Records read from the store and used.
    #[wasm_bindgen(js_name = storeHits)]
    pub store_hits: f64,
    /// Records written to the store.
    #[wasm_bindgen(js_name = storeWrites)]
    pub store_writes: f64,
    /// Records found unusable (damaged, cut, another model's): each was removed.
    #[wasm_bindgen(js_name = storeMisses)]
    pub store_misses: f64,
    /// Records removed to keep the store within its budget.
    #[wasm_bindgen(js_name = storeEvictions)]
    pub store_evictions: f64,
    /// The store's warnings so far (failed writes, a full quota, damaged records removed),
    /// newest last; the most recent 32.
    #[wasm_bindgen(js_name = storeWarnings)]
    pub store_warnings: Vec<String>,
}

impl CacheInfo {
    pub(crate) fn new(rt: &Runtime) -> Self {
        let c = rt.cache_stats();
        let store = rt.store();
        let (on, bytes, s) = match store {
            Some(s) => (true, s.counted_bytes().unwrap_or(0), s.stats()),
            None => (false, 0, Default::default()),
        };
        CacheInfo {
            store: on,
            store_bytes: bytes as f64,
            store_hits: s.hits as f64,
            store_writes: s.writes as f64,
            store_misses: s.misses as f64,
            store_evictions: s.evictions as f64,
            store_warnings: Vec::new(),
            entries: c.entries as u32,
            bytes_used: c.bytes_used as f64,
            state_bytes: (c.bytes_used - c.page_bytes) as f64,
            page_bytes: c.page_bytes as f64,
            pages: c.pages as u32,
            budget_bytes: c.budget_bytes as f64,
            evictions: c.evictions as f64,
        }
    }
}
