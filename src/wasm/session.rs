//! [`Session`] for JavaScript: a thin wrapper over a [`crate::session::Runtime`] session.
//! Text goes in and out through the model's tokenizer; generation streams pieces of text to an
//! `onToken` callback and can be stopped between tokens with `stop()`.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use crate::error::{Error, Result};
use crate::sampling::Sampler;
use crate::session::{GenerateOptions as NativeOptions, Generation, Pace, Runtime, SessionId};
use crate::wasm::constrained::{self, Guided, Unfinished};
use crate::wasm::lease::{Lease, Shared};
use crate::wasm::options::{GenerateConfig, field};
use crate::wasm::stream::TokenStream;
use crate::wasm::{args, to_js};

/// What an operation did: tokens run through the model and the checkpoint it resumed from.
#[wasm_bindgen(inspectable)]
#[derive(Clone, Copy, Debug)]
pub struct Outcome {
    /// Tokens run through the model.
    pub prefilled: u32,
    /// Length of the prefix whose cached checkpoint was restored (undefined if none).
    #[wasm_bindgen(js_name = resumedFrom)]
    pub resumed_from: Option<u32>,
}

impl From<crate::session::Outcome> for Outcome {
    fn from(o: crate::session::Outcome) -> Self {
        Outcome { prefilled: o.prefilled as u32, resumed_from: o.resumed_from.map(|r| r as u32) }
    }
}

/// A session's counters, its checkpoints and the cache's.
#[wasm_bindgen(getter_with_clone, inspectable)]
#[derive(Clone, Debug)]
pub struct Stats {
    /// Tokens run through the model for this session.
    #[wasm_bindgen(js_name = tokensPrefilled)]
    pub tokens_prefilled: f64,
    /// Operations that restored a cached checkpoint.
    pub hits: f64,
    /// Operations that started from zeros.
    pub misses: f64,
    /// Operations that resumed from a checkpoint read from the persistent state store.
    #[wasm_bindgen(js_name = storeHits)]
    pub store_hits: f64,
    /// Positions of cached states on this session's history.
    pub checkpoints: Vec<u32>,
    /// Bytes of one checkpoint.
    #[wasm_bindgen(js_name = checkpointBytes)]
    pub checkpoint_bytes: f64,
    /// Tokens in the history.
    #[wasm_bindgen(js_name = historyLength)]
    pub history_length: u32,
    /// Entries in the shared cache.
    #[wasm_bindgen(js_name = cacheEntries)]
    pub cache_entries: u32,
    /// Bytes the shared cache uses.
    #[wasm_bindgen(js_name = cacheBytes)]
    pub cache_bytes: f64,
    /// The cache's budget.
    #[wasm_bindgen(js_name = cacheBudget)]
    pub cache_budget: f64,
    /// A hybrid's: of `cacheBytes`, the key/value pages' (each counted once).
    #[wasm_bindgen(js_name = cachePageBytes)]
    pub cache_page_bytes: f64,
    /// A hybrid's: the blocks of this history (block b: tokens b·blockSize..(b+1)·blockSize)
    /// whose key/value page is cached.
    #[wasm_bindgen(js_name = kvPages)]
    pub kv_pages: Vec<u32>,
}

/// A conversation: a token history and its live state on the model.
#[wasm_bindgen]
pub struct Session {
    pub(crate) shared: Rc<Shared>,
    pub(crate) id: SessionId,
    pub(crate) stop: Rc<Cell<bool>>,
    pub(crate) sampler: Rc<RefCell<Option<Sampler>>>,
    /// The text the history stands for as of the last chat turn (`chat.rs`).
    pub(crate) chat: Rc<RefCell<crate::chat::ChatHistory>>,
    /// The last constrained generation, when it stopped unfinished (`constrained.rs`).
    pub(crate) unfinished: Rc<RefCell<Option<Unfinished>>>,
}

impl Session {
    pub(crate) fn new(shared: Rc<Shared>, id: SessionId) -> Self {
        Session {
            shared,
            id,
            stop: Rc::new(Cell::new(false)),
            sampler: Rc::new(RefCell::new(None)),
            chat: Rc::default(),
            unfinished: Rc::default(),
        }
    }

    pub(crate) fn promise<T: Into<JsValue>>(
        &self,
        f: impl AsyncFnOnce(&mut Runtime, &Shared, SessionId) -> Result<T> + 'static,
    ) -> js_sys::Promise {
        let (lease, id) = (Lease::new(&self.shared), self.id);
        future_to_promise(async move {
            let mut lease = lease.map_err(to_js)?;
            let (rt, shared) = lease.parts().map_err(to_js)?;
            f(rt, shared, id).await.map(Into::into).map_err(to_js)
        })
    }
}

#[wasm_bindgen]
impl Session {
    /// Feeds `text` after the history; resolves when its state is ready.
    #[wasm_bindgen(unchecked_return_type = "Promise<Outcome>")]
    pub fn append(&self, #[wasm_bindgen(unchecked_param_type = "string")] text: JsValue) -> js_sys::Promise {
        self.promise(async move |rt: &mut Runtime, shared: &Shared, id| {
            let tokens = shared.tokenizer()?.encode(&args::string(&text, "text")?, false)?;
            Ok(Outcome::from(rt.append(id, &tokens).await?))
        })
    }

    /// Feeds token ids after the history.
    #[wasm_bindgen(js_name = appendTokens, unchecked_return_type = "Promise<Outcome>")]
    pub fn append_tokens(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Uint32Array | number[]")] ids: JsValue,
    ) -> js_sys::Promise {
        self.promise(async move |rt: &mut Runtime, _: &Shared, id| {
            Ok(Outcome::from(rt.append(id, &args::ids(&ids, "ids")?).await?))
        })
    }

    /// Generates after the history, calling `onToken(text, id)` for each piece of text as it
    /// arrives; resolves to the generated text. `stop()` ends it between tokens. It runs the
    /// session's [`Generation`] to the end (its error policy: a detokenizer error rejects with
    /// code `Tokenizer`, the tokens generated staying in the history).
    #[wasm_bindgen(unchecked_return_type = "Promise<string>")]
    pub fn generate(
        &self,
        #[wasm_bindgen(unchecked_param_type = "GenerateOptions | undefined")] options: JsValue,
        #[wasm_bindgen(js_name = onToken, unchecked_param_type = "((text: string, id: number) => void) | undefined")]
        on_token: JsValue,
    ) -> js_sys::Promise {
        let (stop, sampler, unfinished) =
            (Rc::clone(&self.stop), Rc::clone(&self.sampler), Rc::clone(&self.unfinished));
        if self.shared.is_idle() {
            stop.set(false); // not when this call will be Busy: a running generate keeps its stop
        }
        self.promise(async move |rt: &mut Runtime, shared: &Shared, id| {
            let config = GenerateConfig::parse(&options, &on_token)?;
            let guided = match constrained::response_format(&options)? {
                None => None,
                Some(format) => Some(Guided::resume(shared, rt, format, rt.history(id)?, &unfinished)?),
            };
            run_generate(rt, shared, id, &config, &stop, &sampler, guided).await
        })
    }

    /// Generates like `generate`, as an async iterator of `{ text, id }`, one per token (`text`
    /// may be empty: a token inside a character, or held back as the start of a stop string).
    /// `for await (const { text } of session.stream({ maxTokens: 40, signal }))`; `break`, the
    /// signal or `stop()` end it between tokens, and the session continues from there.
    #[wasm_bindgen(unchecked_return_type = "AsyncIterableIterator<{ text: string; id: number }>")]
    pub fn stream(
        &self,
        #[wasm_bindgen(unchecked_param_type = "GenerateOptions | undefined")] options: JsValue,
    ) -> std::result::Result<JsValue, JsValue> {
        if field(&options, "responseFormat", "generate options").map_err(to_js)?.is_some() {
            return Err(to_js(Error::InvalidInput(
                "responseFormat is for generate and chat; stream does not take it".into(),
            )));
        }
        let options = GenerateConfig::parse(&options, &JsValue::UNDEFINED).map_err(to_js)?;
        let (sampler, stop) = (Rc::clone(&self.sampler), Rc::clone(&self.stop));
        let stream =
            TokenStream::new(Rc::clone(&self.shared), self.id, sampler, stop, options).map_err(to_js)?;
        Ok(crate::wasm::stream::async_iterable(JsValue::from(stream)))
    }

    /// Stops a running `generate` after the current token (the state stays at the last token
    /// emitted, so `generate` again continues exactly).
    pub fn stop(&self) {
        self.stop.set(true);
    }

    /// Truncates the history to `length` tokens (regenerate, undo), resuming from the nearest
    /// checkpoint.
    #[wasm_bindgen(unchecked_return_type = "Promise<Outcome>")]
    pub fn rewind(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] length: JsValue,
    ) -> js_sys::Promise {
        self.promise(async move |rt: &mut Runtime, _: &Shared, id| {
            let length = args::whole(&length, "length", u32::MAX as u64)? as usize;
            Ok(Outcome::from(rt.rewind(id, length).await?))
        })
    }

    /// Replaces the history with `text` (an edited prompt), resuming from its longest cached
    /// prefix.
    #[wasm_bindgen(unchecked_return_type = "Promise<Outcome>")]
    pub fn edit(&self, #[wasm_bindgen(unchecked_param_type = "string")] text: JsValue) -> js_sys::Promise {
        self.promise(async move |rt: &mut Runtime, shared: &Shared, id| {
            let tokens = shared.tokenizer()?.encode(&args::string(&text, "text")?, false)?;
            Ok(Outcome::from(rt.edit(id, &tokens).await?))
        })
    }

    /// The history's token ids.
    pub fn tokens(&self) -> std::result::Result<Vec<u32>, JsValue> {
        Lease::run(&self.shared, |rt| Ok(rt.history(self.id)?.to_vec())).map_err(to_js)
    }

    /// The logits after the history's last token (V), `undefined` before any token: for
    /// scoring, or for a sampler of your own. Throws `NonFiniteOutput` where the model
    /// computed NaN or ±Inf (see `Runtime::logits`).
    pub fn logits(&self) -> std::result::Result<Option<Vec<f32>>, JsValue> {
        Lease::run(&self.shared, |rt| Ok(rt.logits(self.id)?.map(<[f32]>::to_vec))).map_err(to_js)
    }

    /// The history as text.
    pub fn text(&self) -> std::result::Result<String, JsValue> {
        let tokens = self.tokens()?;
        self.shared.tokenizer().and_then(|t| t.decode(&tokens, true)).map_err(to_js)
    }

    /// Counters and checkpoints.
    pub fn stats(&self) -> std::result::Result<Stats, JsValue> {
        Lease::run(&self.shared, |rt| {
            let s = rt.stats(self.id)?;
            let c = rt.cache_stats();
            Ok(Stats {
                tokens_prefilled: s.tokens_prefilled as f64,
                hits: s.hits as f64,
                misses: s.misses as f64,
                store_hits: s.store_hits as f64,
                checkpoints: s.checkpoints.iter().map(|&p| p as u32).collect(),
                checkpoint_bytes: s.checkpoint_bytes as f64,
                history_length: rt.history(self.id)?.len() as u32,
                cache_entries: c.entries as u32,
                cache_bytes: c.bytes_used as f64,
                cache_budget: c.budget_bytes as f64,
                cache_page_bytes: c.page_bytes as f64,
                kv_pages: s.pages.iter().map(|&b| b as u32).collect(),
            })
        })
        .map_err(to_js)
    }

    /// The history, logits and state as bytes (keep them across a reload).
    #[wasm_bindgen(js_name = exportState, unchecked_return_type = "Promise<Uint8Array>")]
    pub fn export_state(&self) -> js_sys::Promise {
        self.promise(async move |rt: &mut Runtime, _: &Shared, id| {
            let bytes = rt.export_state(id).await?;
            Ok(js_sys::Uint8Array::from(bytes.as_slice()))
        })
    }

    /// Keeps this session (history, logits, state, the model's fingerprint) in the browser's
    /// IndexedDB under `name`, replacing what was saved there; `model.restoreSession(name)`
    /// brings it back after a reload. A full quota is a `Storage` error.
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn save(&self, #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue) -> js_sys::Promise {
        self.promise(async move |rt: &mut Runtime, _: &Shared, id| {
            let name = args::string(&name, "name")?;
            let bytes = rt.export_state(id).await?;
            crate::wasm::saved::put(&name, &bytes).await?;
            Ok(JsValue::UNDEFINED)
        })
    }

    /// Restores exported bytes into this session (typed errors for another model or damage).
    #[wasm_bindgen(js_name = importState, unchecked_return_type = "Promise<void>")]
    pub fn import_state(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Uint8Array | ArrayBuffer")] bytes: JsValue,
    ) -> js_sys::Promise {
        self.promise(async move |rt: &mut Runtime, _: &Shared, id| {
            rt.import_state(id, &args::bytes(&bytes, "bytes")?).await?;
            Ok(JsValue::UNDEFINED)
        })
    }

    /// A new session at this one's position — its history, logits and state — sharing its
    /// checkpoints, so nothing is read again: for branching chats, best-of-n and tree search.
    /// The two go on independently. `Busy` while a call on the model runs.
    pub fn fork(&self) -> std::result::Result<Session, JsValue> {
        let id = Lease::run(&self.shared, |rt| rt.fork(self.id)).map_err(to_js)?;
        Ok(Session::new(Rc::clone(&self.shared), id))
    }

    /// Closes the session (its checkpoints become evictable).
    pub fn close(&self) -> std::result::Result<(), JsValue> {
        Lease::run(&self.shared, |rt| rt.close_session(self.id)).map_err(to_js)
    }
}

/// Runs a generation of `options` on session `id` to its end — free text, or held to `guided`'s
/// constraint — as `generate` and `chat` do: the sampler kept for the next call; `stop` and the
/// signal end it between tokens (the signal then rejects with `Aborted`); a constrained text
/// that ends unfinished is remembered for a `generate` to continue. The generated text.
pub(crate) async fn run_generate(
    rt: &mut Runtime,
    shared: &Shared,
    id: SessionId,
    options: &GenerateConfig,
    stop: &Cell<bool>,
    sampler: &RefCell<Option<Sampler>>,
    guided: Option<Guided<'_>>,
) -> Result<String> {
    let kept = sampler.borrow_mut().take();
    let chosen = options.sampler(kept)?;
    let tokenizer = shared.tokenizer()?;
    let native = NativeOptions { max_tokens: options.max_tokens, stop_at_eos: options.stop_at_eos };
    let mut generation = Generation::new(tokenizer, chosen, native, options.stop.clone(), Pace::ToEnd)?;
    let mut after = None;
    if let Some(Guided { format, constraint, start, unfinished }) = guided {
        generation = generation.with_constraint(constraint);
        after = Some((format, start, unfinished));
    }
    let mut text = String::new();
    let ran = generation
        .run(rt, id, tokenizer, |piece| {
            text.push_str(&piece.text);
            options.show(stop, &piece.text, piece.token)
        })
        .await;
    let complete = ran.is_ok() && generation.is_complete();
    *sampler.borrow_mut() = Some(generation.into_sampler());
    if let Some((format, start, unfinished)) = after {
        constrained::remember(unfinished, format, start, rt.history(id)?, complete);
    }
    let tail = ran?;
    if options.aborted() {
        return Err(Error::Aborted("generate stopped by its AbortSignal".into()));
    }
    text.push_str(&tail);
    Ok(text)
}
