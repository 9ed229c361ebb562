//! [`Model`]: a checkpoint loaded in the browser (WebGPU, or the CPU reference when WebGPU is
//! missing), with its tokenizer and checkpoint cache; sessions come from it.

use std::cell::RefCell;
use std::rc::Rc;

use wasm_bindgen::prelude::*;

use crate::cache::{CacheConfig, Retention};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::gpu_model::GpuModelOptions;
use crate::model::Checkpoint;
use crate::session::Runtime;
use crate::tokenizer::Tokenizer;
use crate::wasm::session::Session;
use crate::wasm::to_js;

/// How to load a model. `new LoadOptions()` gives the defaults; set fields to change them.
#[wasm_bindgen]
#[derive(Clone, Debug)]
pub struct LoadOptions {
    backend: String,
    /// Tokens per checkpoint block (B). Default 64.
    #[wasm_bindgen(js_name = blockSize)]
    pub block_size: u32,
    /// Keep every k-th block boundary (0 = every one). Prompt ends are always kept.
    #[wasm_bindgen(js_name = sparseEvery)]
    pub sparse_every: u32,
    /// Most bytes the checkpoint cache may use. Default 64 MiB.
    #[wasm_bindgen(js_name = budgetBytes)]
    pub budget_bytes: f64,
    /// Most tokens one GPU forward chunk processes. Default 256.
    #[wasm_bindgen(js_name = maxTokens)]
    pub max_tokens: u32,
}

#[wasm_bindgen]
impl LoadOptions {
    /// The defaults: backend "auto", blocks of 64, dense retention, 64 MiB budget.
    #[wasm_bindgen(constructor)]
    pub fn new() -> LoadOptions {
        LoadOptions {
            backend: "auto".into(),
            block_size: 64,
            sparse_every: 0,
            budget_bytes: 64.0 * 1048576.0,
            max_tokens: 256,
        }
    }

    /// "auto" (WebGPU, else the CPU), "gpu" or "cpu".
    #[wasm_bindgen(getter)]
    pub fn backend(&self) -> String {
        self.backend.clone()
    }

    /// Sets the backend: "auto", "gpu" or "cpu".
    #[wasm_bindgen(setter)]
    pub fn set_backend(&mut self, backend: String) {
        self.backend = backend;
    }
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self::new()
    }
}

/// What a loaded model is and where it runs.
#[wasm_bindgen(getter_with_clone)]
#[derive(Clone, Debug)]
pub struct ModelInfo {
    /// "gpu" or "cpu".
    pub backend: String,
    /// The GPU adapter ("" on the CPU), and why the CPU was chosen if it was.
    pub adapter: String,
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
}

/// What [`Model`] and its sessions share: the runtime (taken out while a call runs, see
/// [`Lease`], so a second concurrent call is a `Busy` error rather than a panic) and the
/// tokenizer.
pub(crate) struct Shared {
    pub rt: RefCell<Option<Runtime>>,
    pub tokenizer: Option<Tokenizer>,
}

impl Shared {
    /// Whether no call holds the runtime.
    pub fn is_idle(&self) -> bool {
        self.rt.try_borrow().is_ok_and(|r| r.is_some())
    }

    pub fn tokenizer(&self) -> Result<&Tokenizer> {
        self.tokenizer
            .as_ref()
            .ok_or_else(|| Error::Tokenizer("the model was loaded without tokenizer.json".into()))
    }
}

/// The runtime, taken out of [`Shared`] for the whole of one call. An asynchronous call takes
/// it when the call is made, not when its future first runs, so a call made while another is
/// pending is `Busy` on every backend (the CPU one never suspends); dropping the lease — the
/// call finished, failed or was abandoned — puts the runtime back.
pub(crate) struct Lease {
    shared: Rc<Shared>,
    rt: Option<Runtime>,
}

impl Lease {
    /// Takes the runtime out of `shared`; `Busy` while another call holds it.
    pub fn new(shared: &Rc<Shared>) -> Result<Lease> {
        let rt = shared.rt.try_borrow_mut().ok().and_then(|mut r| r.take()).ok_or_else(busy)?;
        Ok(Lease { shared: Rc::clone(shared), rt: Some(rt) })
    }

    /// The runtime and what else the model shares.
    pub fn parts(&mut self) -> Result<(&mut Runtime, &Shared)> {
        // A lease holds the runtime until it is dropped; an error, not a panic, all the same.
        Ok((self.rt.as_mut().ok_or_else(busy)?, &self.shared))
    }

    /// Runs a synchronous `f` on the runtime of `shared`.
    pub fn run<T>(shared: &Rc<Shared>, f: impl FnOnce(&mut Runtime) -> Result<T>) -> Result<T> {
        let mut lease = Lease::new(shared)?;
        f(lease.parts()?.0)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            *self.shared.rt.borrow_mut() = Some(rt);
        }
    }
}

fn busy() -> Error {
    Error::Busy("another call on this model is still running; await it first".into())
}

/// A loaded model.
#[wasm_bindgen]
pub struct Model {
    shared: Rc<Shared>,
    info: ModelInfo,
}

#[wasm_bindgen]
impl Model {
    /// Loads a Hugging Face Mamba checkpoint from its files' bytes: `config.json`,
    /// `model.safetensors` and (for text in and out) `tokenizer.json`.
    pub async fn load(
        config: Vec<u8>,
        weights: Vec<u8>,
        tokenizer: Option<Vec<u8>>,
        options: &LoadOptions,
    ) -> std::result::Result<Model, JsValue> {
        Self::load_inner(config, weights, tokenizer, options.clone()).await.map_err(to_js)
    }

    async fn load_inner(
        config: Vec<u8>,
        weights: Vec<u8>,
        tokenizer: Option<Vec<u8>>,
        o: LoadOptions,
    ) -> Result<Model> {
        let checkpoint =
            Checkpoint::from_bytes(&config, vec![("model.safetensors".into(), weights)], None, tokenizer)?;
        let tokenizer = checkpoint.tokenizer_json.as_deref().map(Tokenizer::from_bytes).transpose()?;
        let w = checkpoint.weights()?;
        let gpu_options = GpuModelOptions { max_tokens: o.max_tokens.max(1) as usize, ..Default::default() };
        // The GPU context, or why the CPU runs instead.
        let gpu = match o.backend.as_str() {
            "cpu" => Err(String::new()),
            "gpu" => Ok(GpuContext::new().await?),
            "auto" => GpuContext::new().await.map_err(|e| format!("CPU fallback: {e}")),
            other => {
                return Err(Error::InvalidInput(format!("backend must be auto, gpu or cpu, not {other:?}")));
            }
        };
        let (engine, adapter) = match gpu {
            Ok(ctx) => (Engine::gpu(&ctx, &w, gpu_options).await?, ctx.summary().to_string()),
            Err(why) => (Engine::cpu(w), why),
        };
        let c = engine.config().clone();
        let info = ModelInfo {
            backend: engine.name().into(),
            adapter,
            d_model: c.d_model as u32,
            layers: c.n_layer as u32,
            vocab: c.vocab_size as u32,
            state_bytes: crate::cpu::State::bytes(&c) as f64,
        };
        let retention =
            if o.sparse_every == 0 { Retention::Dense } else { Retention::Sparse(o.sparse_every as usize) };
        let cache = CacheConfig {
            block_size: o.block_size as usize,
            retention,
            budget_bytes: o.budget_bytes.max(0.0) as u64,
        };
        let rt = Runtime::new(engine, cache)?;
        Ok(Model { shared: Rc::new(Shared { rt: RefCell::new(Some(rt)), tokenizer }), info })
    }

    /// Where the model runs and its sizes.
    #[wasm_bindgen(getter)]
    pub fn info(&self) -> ModelInfo {
        self.info.clone()
    }

    /// Opens a session (an empty history with its own live state).
    #[wasm_bindgen(js_name = newSession)]
    pub fn new_session(&self) -> std::result::Result<Session, JsValue> {
        let id = Lease::run(&self.shared, |rt| rt.new_session()).map_err(to_js)?;
        Ok(Session::new(Rc::clone(&self.shared), id))
    }

    /// Token ids of `text` (no special-token post-processing).
    pub fn encode(&self, text: &str) -> std::result::Result<Vec<u32>, JsValue> {
        self.shared.tokenizer().and_then(|t| t.encode(text, false)).map_err(to_js)
    }

    /// Text of `ids`.
    pub fn decode(&self, ids: &[u32]) -> std::result::Result<String, JsValue> {
        self.shared.tokenizer().and_then(|t| t.decode(ids, true)).map_err(to_js)
    }
}
