//! [`Model`]: a checkpoint loaded in the browser (WebGPU, or the CPU reference when WebGPU is
//! missing), with its tokenizer and checkpoint cache; sessions come from it.

use std::cell::RefCell;
use std::rc::Rc;

use wasm_bindgen::prelude::*;

use crate::engine::Engine;
use crate::error::Result;
use crate::session::Runtime;
use crate::store::StoreConfig;
use crate::tokenizer::Tokenizer;
use crate::wasm::gguf_choice::{self, Choice};
use crate::wasm::info::{CacheInfo, ModelInfo};
use crate::wasm::lease::{Lease, Shared};
use crate::wasm::offline;
use crate::wasm::opfs::Opfs;
use crate::wasm::options::LoadConfig;
use crate::wasm::session::Session;
use crate::wasm::watch::abortable;
use crate::wasm::web_source::WebSource;
use crate::wasm::{args, saved, to_js};

/// `tokenizer.json`'s bytes and the chat files' settings, as a loader found them.
pub(super) type TextFiles<'a> = (Option<&'a [u8]>, &'a crate::chat::ChatConfig);

/// A loaded model.
#[wasm_bindgen]
pub struct Model {
    pub(crate) shared: Rc<Shared>,
    info: ModelInfo,
}

// The option types are written once, in the package's hand-written declarations (js/index.d.ts,
// copied next to this module by scripts/package.mjs); the wasm module's declarations use them.
#[wasm_bindgen(typescript_custom_section)]
const OPTION_TYPES: &str = r#"
import type { LoadOptions, LoadProgress, GenerateOptions } from "./index.js";
export type { LoadOptions, LoadProgress, GenerateOptions };
"#;

#[wasm_bindgen]
impl Model {
    /// Loads a Hugging Face Mamba folder from a URL — any static host, or the Hub's
    /// `https://huggingface.co/<repo>/resolve/main/`: `config.json`, `tokenizer.json`, and
    /// `model.safetensors` or `model.safetensors.index.json` + shards, streamed into the GPU
    /// (or memory) piece by piece, kept in the offline cache unless `cache: false`. Or a GGUF
    /// file: a URL ending in `.gguf` (split parts beside it), or a folder with `options.file` or
    /// `options.quant` (chosen from the Hub's file listing).
    /// `options.signal` ends the load (it rejects with `AbortError`, every download stopped);
    /// a download with no bytes for `stallTimeoutMs` (default 30 s) is an `Io` error.
    #[wasm_bindgen(js_name = fromUrl, unchecked_return_type = "Promise<Model>")]
    pub fn from_url(
        #[wasm_bindgen(js_name = baseUrl, unchecked_param_type = "string")] base_url: JsValue,
        #[wasm_bindgen(unchecked_param_type = "LoadOptions | undefined")] options: JsValue,
    ) -> js_sys::Promise {
        wasm_bindgen_futures::future_to_promise(async move {
            let base_url = args::string(&base_url, "baseUrl").map_err(to_js)?;
            let o = LoadConfig::parse(&options).map_err(to_js)?;
            let (base_url, choice) =
                Choice::parse(&options).and_then(|c| gguf_choice::locate(&base_url, c)).map_err(to_js)?;
            let store = o.store;
            let model = abortable(o.signal.clone(), async {
                let mut source = WebSource::url(&base_url, o.cache, o.stall_ms, o.integrity.clone()).await?;
                source.choice = choice;
                Self::load_source(source, o).await
            })
            .await
            .map_err(to_js)?;
            Ok(model.with_store(store).await.into())
        })
    }

    /// Loads a model folder the user picked (`<input type="file" webkitdirectory>`'s
    /// `FileList`, or an array of `File`s), read piece by piece with `File.slice`: a Hugging
    /// Face folder, or a GGUF file (with its split parts) — the only one picked, or the one
    /// `options.file` or `options.quant` names.
    #[wasm_bindgen(js_name = fromFiles, unchecked_return_type = "Promise<Model>")]
    pub fn from_files(
        #[wasm_bindgen(unchecked_param_type = "FileList | File[]")] files: JsValue,
        #[wasm_bindgen(unchecked_param_type = "LoadOptions | undefined")] options: JsValue,
    ) -> js_sys::Promise {
        wasm_bindgen_futures::future_to_promise(async move {
            let o = LoadConfig::parse(&options).map_err(to_js)?;
            let mut source = WebSource::files(&files, o.integrity.clone()).map_err(to_js)?;
            source.choice = Choice::parse(&options).map_err(to_js)?;
            let store = o.store;
            let model = abortable(o.signal.clone(), Self::load_source(source, o)).await.map_err(to_js)?;
            Ok(model.with_store(store).await.into())
        })
    }

    /// Deletes the offline copies of the files under `baseUrl`; resolves to how many.
    #[wasm_bindgen(js_name = clearCache, unchecked_return_type = "Promise<number>")]
    pub fn clear_cache(
        #[wasm_bindgen(js_name = baseUrl, unchecked_param_type = "string")] base_url: JsValue,
    ) -> js_sys::Promise {
        wasm_bindgen_futures::future_to_promise(async move {
            let base_url = args::string(&base_url, "baseUrl").map_err(to_js)?;
            offline::clear_cache(&base_url).await.map(Into::into).map_err(to_js)
        })
    }

    /// Loads a checkpoint from its files' bytes (for callers that already hold them):
    /// `config.json`, `model.safetensors` and (for text in and out) `tokenizer.json` — or
    /// `null`, a GGUF file's bytes (it holds its own config) and optionally a `tokenizer.json`
    /// to use instead of the file's.
    #[wasm_bindgen(unchecked_return_type = "Promise<Model>")]
    pub fn load(
        #[wasm_bindgen(unchecked_param_type = "Uint8Array | ArrayBuffer | null")] config: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Uint8Array | ArrayBuffer")] weights: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Uint8Array | ArrayBuffer | undefined")] tokenizer: JsValue,
        #[wasm_bindgen(unchecked_param_type = "LoadOptions | undefined")] options: JsValue,
    ) -> js_sys::Promise {
        wasm_bindgen_futures::future_to_promise(async move {
            let config = args::optional_bytes(&config, "config").map_err(to_js)?;
            let weights = args::bytes(&weights, "weights").map_err(to_js)?;
            let tokenizer = args::optional_bytes(&tokenizer, "tokenizer").map_err(to_js)?;
            let o = LoadConfig::parse(&options).map_err(to_js)?;
            if Choice::parse(&options).map_err(to_js)? != Choice::Folder {
                let why = "options.file and options.quant choose among a folder's files: Model.load takes the bytes";
                return Err(to_js(crate::error::Error::InvalidInput(why.into())));
            }
            let store = o.store;
            let model = abortable(o.signal.clone(), Self::load_bytes(config, weights, tokenizer, o))
                .await
                .map_err(to_js)?;
            Ok(model.with_store(store).await.into())
        })
    }

    /// Puts the persistent state store under the model's cache (`store` load option). A store
    /// that cannot open is a warning in `info.warnings`: the model works from memory.
    async fn with_store(mut self, config: Option<StoreConfig>) -> Model {
        let Some(config) = config else { return self };
        let shared = Rc::clone(&self.shared);
        let Ok(mut lease) = Lease::new(&shared) else { return self }; // no call can run yet
        let Ok((rt, _)) = lease.parts() else { return self };
        match Opfs::open() {
            Ok(backend) => {
                let store = rt.open_store(Box::new(backend), config);
                store.enforce_budget().await; // counts what is there, removes stale temporaries
                // A call returns before its records are written (`flushStore` waits for them).
                store.write_in_background(Rc::new(wasm_bindgen_futures::spawn_local));
                self.info.warnings.extend(store.take_warnings());
                rt.set_store(Some(store));
            }
            Err(e) => self.info.warnings.push(format!("state store off: {e}")),
        }
        drop(lease);
        self
    }

    pub(super) fn assemble(
        engine: Engine,
        adapter: String,
        (tokenizer_json, chat): TextFiles<'_>,
        o: LoadConfig,
        warnings: Vec<String>,
    ) -> Result<Model> {
        let tokenizer = tokenizer_json.map(Tokenizer::from_bytes).transpose()?;
        let cache = o.cache_config(engine.config());
        let mut rt = Runtime::new(engine, cache)?;
        // Every end-of-turn id the files name ends a generation (`stopAtEos`).
        rt.set_end_tokens(chat.end_ids(|t| tokenizer.as_ref().and_then(|k| k.token_to_id(t))));
        let info = ModelInfo::new(&rt, adapter, warnings);
        let shared = Shared {
            rt: RefCell::new(Some(rt)),
            tokenizer,
            chat: chat.clone(),
            tokenizer_json: tokenizer_json.map(<[u8]>::to_vec),
            grammars: RefCell::new(None),
            store_warnings: Default::default(),
        };
        Ok(Model { shared: Rc::new(shared), info })
    }

    /// Where the model runs and its sizes; `warnings` also holds the state store's so far.
    #[wasm_bindgen(getter)]
    pub fn info(&self) -> ModelInfo {
        let mut info = self.info.clone();
        if let Ok(kept) = self.shared.store_warnings.try_borrow() {
            info.warnings.extend(kept.iter().cloned());
        }
        info
    }

    /// Removes every record of the persistent state store (`store` load option) — this model's
    /// and any other's, in every tab of this origin; resolves to how many files went. Without
    /// a store, 0.
    #[wasm_bindgen(js_name = clearStore, unchecked_return_type = "Promise<number>")]
    pub fn clear_store(&self) -> js_sys::Promise {
        let shared = Rc::clone(&self.shared);
        wasm_bindgen_futures::future_to_promise(async move {
            let mut lease = Lease::new(&shared).map_err(to_js)?;
            let rt = lease.parts().map_err(to_js)?.0;
            let Some(store) = rt.store() else { return Ok(0.into()) };
            store.clear().await.map(|n| (n as f64).into()).map_err(to_js)
        })
    }

    /// Resolves once every record the calls so far made is written to the persistent state
    /// store (they are written after each call returns); at once without a store. Other calls
    /// may run meanwhile.
    #[wasm_bindgen(js_name = flushStore, unchecked_return_type = "Promise<void>")]
    pub fn flush_store(&self) -> js_sys::Promise {
        let shared = Rc::clone(&self.shared);
        wasm_bindgen_futures::future_to_promise(async move {
            let store = Lease::run(&shared, |rt| Ok(rt.store().cloned())).map_err(to_js)?;
            if let Some(store) = store {
                store.flush().await;
            }
            Ok(JsValue::UNDEFINED)
        })
    }

    /// The checkpoint cache's counters across sessions: checkpoints, their bytes and a
    /// hybrid's key/value pages' bytes apart, the budget, evictions.
    #[wasm_bindgen(js_name = cacheStats)]
    pub fn cache_stats(&self) -> std::result::Result<CacheInfo, JsValue> {
        let mut info = Lease::run(&self.shared, |rt| Ok(CacheInfo::new(rt))).map_err(to_js)?;
        // The lease, given back, moved the store's newest warnings into `store_warnings`.
        info.store_warnings = self.shared.store_warnings.borrow().clone();
        Ok(info)
    }

    /// Opens a session (an empty history with its own live state).
    #[wasm_bindgen(js_name = newSession)]
    pub fn new_session(&self) -> std::result::Result<Session, JsValue> {
        let id = Lease::run(&self.shared, |rt| rt.new_session()).map_err(to_js)?;
        Ok(Session::new(Rc::clone(&self.shared), id))
    }

    /// A session saved with `session.save(name)` (in this page or before a reload): its next
    /// `append` prefills only the new tokens. Another model's session is `StateMismatch`; a
    /// name never saved `InvalidInput`.
    #[wasm_bindgen(js_name = restoreSession, unchecked_return_type = "Promise<Session>")]
    pub fn restore_session(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue,
    ) -> js_sys::Promise {
        let shared = Rc::clone(&self.shared);
        wasm_bindgen_futures::future_to_promise(async move {
            let name = args::string(&name, "name").map_err(to_js)?;
            let bytes = saved::get(&name).await.map_err(to_js)?;
            let mut lease = Lease::new(&shared).map_err(to_js)?;
            let rt = lease.parts().map_err(to_js)?.0;
            let id = rt.new_session().map_err(to_js)?;
            if let Err(e) = rt.import_state(id, &bytes).await {
                let _ = rt.close_session(id);
                return Err(to_js(e));
            }
            drop(lease);
            Ok(Session::new(Rc::clone(&shared), id).into())
        })
    }

    /// The names of the sessions saved in this browser (for any model).
    #[wasm_bindgen(js_name = savedSessions, unchecked_return_type = "Promise<string[]>")]
    pub fn saved_sessions(&self) -> js_sys::Promise {
        wasm_bindgen_futures::future_to_promise(async move {
            let names = saved::names().await.map_err(to_js)?;
            Ok(names.into_iter().map(JsValue::from).collect::<js_sys::Array>().into())
        })
    }

    /// Forgets a saved session; resolves to whether it existed.
    #[wasm_bindgen(js_name = deleteSession, unchecked_return_type = "Promise<boolean>")]
    pub fn delete_session(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue,
    ) -> js_sys::Promise {
        wasm_bindgen_futures::future_to_promise(async move {
            let name = args::string(&name, "name").map_err(to_js)?;
            saved::delete(&name).await.map(JsValue::from).map_err(to_js)
        })
    }

    /// Token ids of `text` (no special-token post-processing).
    pub fn encode(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] text: JsValue,
    ) -> std::result::Result<Vec<u32>, JsValue> {
        let text = args::string(&text, "text").map_err(to_js)?;
        self.shared.tokenizer().and_then(|t| t.encode(&text, false)).map_err(to_js)
    }

    /// Text of `ids`.
    pub fn decode(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Uint32Array | number[]")] ids: JsValue,
    ) -> std::result::Result<String, JsValue> {
        let ids = args::ids(&ids, "ids").map_err(to_js)?;
        self.shared.tokenizer().and_then(|t| t.decode(&ids, true)).map_err(to_js)
    }
}
