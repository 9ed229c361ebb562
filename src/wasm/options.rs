//! Options as JavaScript passes them: plain objects, every field optional — load options
//! (`{ backend: "gpu", weights: "int8", onProgress, signal, stallTimeoutMs, integrity }`) and generate
//! options (`{ maxTokens: 40, temperature: 0.8, seed: 1 }`). Wrong types are `InvalidInput`
//! errors naming the field.

use js_sys::{Function, Object, Reflect};
use wasm_bindgen::{JsCast, JsValue};

use crate::cache::{CacheConfig, Retention};
use crate::cpu::threads::Threads;
use crate::error::{Error, Result};
use crate::gpu_model::{GpuModelOptions, KvFormat, WeightFormat};
use crate::load::integrity::Integrity;
use crate::load::{Progress, Reporter};
use crate::model::Config;
use crate::sampling::{Sampler, SamplingOptions};
use crate::session::GenerateOptions;
use crate::store::StoreConfig;
use crate::wasm::args;
use crate::wasm::watch::STALL_TIMEOUT_MS;

/// Everything a loader needs to know, parsed.
pub(crate) struct LoadConfig {
    /// "auto", "gpu" or "cpu".
    pub backend: String,
    pub weights: WeightFormat,
    /// Keep downloads in the Cache API.
    pub cache: bool,
    pub max_tokens: u32,
    pub block_size: usize,
    pub retention: Retention,
    /// `None`: the model's default ([`CacheConfig::for_model`]).
    pub budget_bytes: Option<u64>,
    pub on_progress: Option<Function>,
    /// Ends the load (rejecting with `AbortError`) when it fires.
    pub signal: Option<web_sys::AbortSignal>,
    /// No bytes for this long is a stalled download (`stallTimeoutMs`).
    pub stall_ms: u32,
    /// The most tokens of context (`maxContext`; `None`: the model's default).
    pub max_context: Option<usize>,
    /// How the GPU's key/value caches store keys and values (`kvFormat`).
    pub kv_format: KvFormat,
    /// The persistent state store (`store: true | { budgetBytes, sparseEvery }`); `None`: off.
    pub store: Option<StoreConfig>,
    /// The CPU backend's threads (`threads`; `None`: every core where threads can run).
    pub threads: Option<usize>,
    /// What files must hash to (`integrity: { "model.safetensors": "sha256-…" }`).
    pub integrity: Integrity,
}

impl LoadConfig {
    /// The CPU backend's threads: the Web Workers the package's worker started for it
    /// (`initThreadPool` in the `wasm-threads` build, in a cross-origin-isolated page), else one —
    /// with a warning when `threads` asked for more than it got.
    pub fn cpu_threads(&self) -> (Threads, Option<String>) {
        let threads = Threads::global();
        let warning = match self.threads {
            Some(asked) if asked > threads.count() && threads.count() == 1 => Some(format!(
                "threads: {asked} asked for, but the CPU backend runs on one thread here (wasm threads \
                 need the worker mode, {{ worker: true }}, in a cross-origin-isolated page)"
            )),
            Some(asked) if asked > threads.count() => {
                Some(format!("threads: {asked} asked for, {} started", threads.count()))
            }
            _ => None,
        };
        (threads, warning)
    }

    /// Parses `options` (undefined/null: all defaults).
    pub fn parse(options: &JsValue) -> Result<Self> {
        let field = |name: &str| field(options, name, "load options");
        let string = |name: &str, default: &str| -> Result<String> {
            match field(name)? {
                None => Ok(default.into()),
                Some(v) => v.as_string().ok_or_else(|| wrong(name, "a string")),
            }
        };
        let number = |name: &str, default: f64| -> Result<f64> {
            match field(name)? {
                None => Ok(default),
                Some(v) => v.as_f64().filter(|n| *n >= 0.0).ok_or_else(|| wrong(name, "a number ≥ 0")),
            }
        };
        let whole = |name: &str, default: u32| -> Result<u32> {
            let n = number(name, default as f64)?;
            if n.fract() != 0.0 || n > u32::MAX as f64 {
                return Err(wrong(name, "a whole number"));
            }
            Ok(n as u32)
        };
        let backend = string("backend", "auto")?;
        if !matches!(backend.as_str(), "auto" | "gpu" | "cpu") {
            return Err(Error::InvalidInput(format!("backend must be auto, gpu or cpu, not {backend:?}")));
        }
        let sparse_every = whole("sparseEvery", 0)? as usize;
        let cache = match field("cache")? {
            None => true,
            Some(v) => v.as_bool().ok_or_else(|| wrong("cache", "true or false"))?,
        };
        let on_progress = match field("onProgress")? {
            None => None,
            Some(v) => Some(v.dyn_into::<Function>().map_err(|_| wrong("onProgress", "a function"))?),
        };
        let signal = match field("signal")? {
            None => None,
            Some(v) => {
                Some(v.dyn_into::<web_sys::AbortSignal>().map_err(|_| wrong("signal", "an AbortSignal"))?)
            }
        };
        // setTimeout's limit: a longer delay would fire at once.
        let stall_ms = match field("stallTimeoutMs")? {
            None => STALL_TIMEOUT_MS,
            Some(v) => args::whole(&v, "options.stallTimeoutMs", i32::MAX as u64)
                .ok()
                .filter(|&ms| ms > 0)
                .ok_or_else(|| {
                    wrong("stallTimeoutMs", &format!("a whole number of milliseconds from 1 to {}", i32::MAX))
                })? as u32,
        };
        let store = store(field("store")?)?;
        let max = crate::cpu::threads::MAX_THREADS;
        let threads =
            match field("threads")? {
                None => None,
                Some(v) => {
                    Some(args::whole(&v, "options.threads", max as u64).ok().filter(|&n| n > 0).ok_or_else(
                        || wrong("threads", &format!("a whole number of threads from 1 to {max}")),
                    )? as usize)
                }
            };
        let integrity = match field("integrity")? {
            None => Integrity::default(),
            Some(v) => integrity(&v)?,
        };
        Ok(Self {
            integrity,
            threads,
            store,
            backend,
            weights: WeightFormat::parse(&string("weights", "auto")?)?,
            cache,
            // The Rust defaults: one set for the JS API, the CLI and Rust.
            max_tokens: whole("maxTokens", GpuModelOptions::default().max_tokens as u32)?.max(1),
            block_size: whole("blockSize", CacheConfig::default().block_size as u32)? as usize,
            retention: if sparse_every == 0 { Retention::Dense } else { Retention::Sparse(sparse_every) },
            budget_bytes: match field("budgetBytes")? {
                None => None,
                Some(_) => Some(number("budgetBytes", 0.0)?.min(u64::MAX as f64) as u64),
            },
            on_progress,
            signal,
            stall_ms,
            kv_format: KvFormat::parse(&string("kvFormat", "f32")?)?,
            max_context: match field("maxContext")? {
                None => None,
                Some(v) => Some(
                    args::whole(&v, "options.maxContext", u32::MAX as u64)
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or_else(|| wrong("maxContext", "a whole number of tokens ≥ 1"))?
                        as usize,
                ),
            },
        })
    }

    /// The cache settings for model `c`: the budget asked for, else the model's default.
    pub fn cache_config(&self, c: &Config) -> CacheConfig {
        let default = CacheConfig::for_model(c);
        CacheConfig {
            block_size: self.block_size,
            retention: self.retention,
            budget_bytes: self.budget_bytes.unwrap_or(default.budget_bytes),
        }
    }

    /// A reporter that calls `onProgress({ phase, file, loaded, total, warning? })`.
    pub fn reporter(&self) -> Reporter {
        let Some(f) = self.on_progress.clone() else { return Reporter::silent() };
        Reporter::new(move |p: &Progress| {
            // A throwing callback must not break the load: it is the page's bug, logged.
            if let Err(e) = f.call1(&JsValue::NULL, &event(p)) {
                web_sys::console::error_2(&"webmamba: onProgress threw:".into(), &e);
            }
        })
    }
}

/// `store`: absent, `false` or `null` → off; `true` → the defaults; `{ budgetBytes, sparseEvery }`.
fn store(v: Option<JsValue>) -> Result<Option<StoreConfig>> {
    let Some(v) = v else { return Ok(None) };
    if let Some(on) = v.as_bool() {
        return Ok(on.then(StoreConfig::default));
    }
    let bad = || wrong("store", "true, false or { budgetBytes, sparseEvery }");
    if !v.is_object() || v.is_function() || js_sys::Array::is_array(&v) {
        return Err(bad());
    }
    let mut config = StoreConfig::default();
    if let Some(b) = field(&v, "budgetBytes", "store options")? {
        let n = b.as_f64().filter(|n| *n >= 0.0).ok_or_else(|| wrong("store.budgetBytes", "a number ≥ 0"))?;
        config.budget_bytes = n.min(u64::MAX as f64) as u64;
    }
    if let Some(k) = field(&v, "sparseEvery", "store options")? {
        config.sparse_every = args::whole(&k, "options.store.sparseEvery", u32::MAX as u64)
            .ok()
            .filter(|&k| k >= 1)
            .ok_or_else(|| wrong("store.sparseEvery", "a whole number ≥ 1"))?
            as usize;
    }
    Ok(Some(config))
}

/// `integrity`: a plain object of file name → SRI metadata (`"sha256-<base64>"`), read through
/// its own enumerable string keys (symbol keys are not names); anything else is `InvalidInput`.
/// "Plain" is told by its prototype chain (`Object.prototype`, then null; or null), not by
/// `instanceof`, so an object of another realm (an iframe, Firefox's WebDriver sandbox) counts,
/// and a `Map` (whose entries are no properties: it would check nothing) of any realm does not.
fn integrity(v: &JsValue) -> Result<Integrity> {
    let what = "a plain object of file name → SRI digest ({ 'model.safetensors': 'sha256-…' })";
    let plain = v.is_object()
        && !v.is_function()
        && Reflect::get_prototype_of(v)
            .is_ok_and(|p| p.is_null() || Reflect::get_prototype_of(&p).is_ok_and(|pp| pp.is_null()));
    if !plain {
        return Err(args::wrong("options.integrity", what, v));
    }
    let unreadable = || Error::InvalidInput("options.integrity could not be read".into());
    let object: &Object = v.unchecked_ref();
    let keys = Reflect::own_keys(object).map_err(|_| unreadable())?;
    let mut entries = Vec::new();
    for key in keys.iter() {
        let Some(name) = key.as_string() else { continue };
        // Only enumerable own properties, as `Object.entries` reads them.
        let descriptor = Reflect::get_own_property_descriptor(object, &key).map_err(|_| unreadable())?;
        if !Reflect::get(&descriptor, &"enumerable".into()).is_ok_and(|e| e.is_truthy()) {
            continue;
        }
        if entries.len() > crate::load::integrity::MAX_INTEGRITY_ENTRIES {
            break; // `Integrity::parse` says there are too many
        }
        let value = Reflect::get(object, &key).map_err(|_| unreadable())?;
        let sri = value.as_string().ok_or_else(|| {
            args::wrong(&format!("options.integrity[{name:?}]"), "an SRI string such as 'sha256-…'", &value)
        })?;
        entries.push((name, sri));
    }
    Integrity::parse(entries)
}

/// The JS object of a progress event.
fn event(p: &Progress) -> JsValue {
    let o = Object::new();
    let set = |k: &str, v: JsValue| {
        // Setting a property on a fresh plain object cannot fail.
        let _ = Reflect::set(&o, &k.into(), &v);
    };
    set("phase", p.phase.name().into());
    set("file", p.file.as_str().into());
    set("loaded", (p.loaded as f64).into());
    set("total", (p.total as f64).into());
    if let Some(w) = &p.warning {
        set("warning", w.as_str().into());
    }
    o.into()
}

fn wrong(name: &str, what: &str) -> Error {
    Error::InvalidInput(format!("options.{name} must be {what}"))
}

/// Field `name` of `options` (`None` when it or `options` is undefined/null); `options` must be
/// an object (`what` names it in the error).
pub(crate) fn field(options: &JsValue, name: &str, what: &str) -> Result<Option<JsValue>> {
    if options.is_undefined() || options.is_null() {
        return Ok(None);
    }
    if !options.is_object() || options.is_function() || js_sys::Array::is_array(options) {
        return Err(args::wrong(what, "an object", options));
    }
    let v = Reflect::get(options, &name.into())
        .map_err(|_| Error::InvalidInput(format!("options.{name} could not be read")))?;
    Ok((!v.is_undefined() && !v.is_null()).then_some(v))
}

/// `session.generate(options, onToken)`, parsed: `{ maxTokens = 64, temperature = 0, topK = 0,
/// topP = 1, repetitionPenalty = 1, seed, stop = [], stopAtEos = true, onToken }` (`onToken`
/// also as the second argument).
pub(crate) struct GenerateConfig {
    pub max_tokens: usize,
    pub sampling: SamplingOptions,
    /// Reseed the sampler (otherwise it continues its random stream).
    pub seed: Option<u64>,
    /// Stop strings.
    pub stop: Vec<String>,
    pub stop_at_eos: bool,
    pub on_token: Option<Function>,
    /// Stops between tokens once aborted.
    pub signal: Option<web_sys::AbortSignal>,
    /// onToken's third argument: a chat turn whose reply begins inside a think block
    /// ([`crate::chat::reasoning::opens_thinking`]); false elsewhere.
    pub thinking: bool,
}

impl GenerateConfig {
    /// The sampler for this call: the session's `kept` one (whose random stream then continues,
    /// so stop + generate again equals one run) unless a seed or other settings ask for a new one.
    pub fn sampler(&self, kept: Option<Sampler>) -> Result<Sampler> {
        match kept {
            Some(s) if self.seed.is_none() && s.options() == self.sampling => Ok(s),
            _ => Sampler::new(self.sampling, self.seed.unwrap_or(0)),
        }
    }

    /// Whether the caller's signal has fired.
    pub fn aborted(&self) -> bool {
        self.signal.as_ref().is_some_and(web_sys::AbortSignal::aborted)
    }

    /// Hands a generated piece of text (`token`'s) to onToken, if any and the text is not
    /// empty; whether generation goes on: false when onToken threw, `stop` was set or the
    /// signal fired.
    pub fn show(&self, stop: &std::cell::Cell<bool>, text: &str, token: u32) -> bool {
        let shown = match &self.on_token {
            Some(f) if !text.is_empty() => {
                f.call3(&JsValue::NULL, &text.into(), &token.into(), &self.thinking.into()).is_ok()
            }
            _ => true,
        };
        shown && !stop.get() && !self.aborted()
    }
}

impl GenerateConfig {
    pub fn parse(options: &JsValue, on_token: &JsValue) -> Result<Self> {
        let field = |name: &str| field(options, name, "generate options");
        let max_tokens = match field("maxTokens")? {
            None => GenerateOptions::DEFAULT_MAX_TOKENS,
            Some(v) => args::whole(&v, "options.maxTokens", u32::MAX as u64)? as usize,
        };
        // A number field checked by `ok`, or `default`.
        let real = |name: &str, default: f32, what: &str, ok: fn(f64) -> bool| -> Result<f32> {
            match field(name)? {
                None => Ok(default),
                Some(v) => match v.as_f64() {
                    Some(x) if ok(x) => Ok(x as f32),
                    _ => Err(args::wrong(&format!("options.{name}"), what, &v)),
                },
            }
        };
        let sampling = SamplingOptions {
            temperature: real("temperature", 0.0, "a finite number ≥ 0", |t| t.is_finite() && t >= 0.0)?,
            top_k: match field("topK")? {
                None => 0,
                Some(v) => args::whole(&v, "options.topK", u32::MAX as u64)? as usize,
            },
            top_p: real("topP", 1.0, "a number in (0, 1]", |p| p > 0.0 && p <= 1.0)?,
            repetition_penalty: real("repetitionPenalty", 1.0, "a finite number > 0", |r| {
                r.is_finite() && r > 0.0
            })?,
        };
        let stop = match field("stop")? {
            None => Vec::new(),
            Some(v) if v.is_string() => vec![args::string(&v, "options.stop")?],
            Some(v) if js_sys::Array::is_array(&v) => js_sys::Array::from(&v)
                .iter()
                .enumerate()
                .map(|(i, s)| args::string(&s, &format!("options.stop[{i}]")))
                .collect::<Result<_>>()?,
            Some(v) => return Err(args::wrong("options.stop", "a list of strings", &v)),
        };
        if stop.iter().any(String::is_empty) {
            return Err(Error::InvalidInput("options.stop must not contain an empty string".into()));
        }
        let seed = match field("seed")? {
            None => None,
            Some(v) => Some(args::whole(&v, "options.seed", (1u64 << 53) - 1)?),
        };
        let stop_at_eos = match field("stopAtEos")? {
            None => true,
            Some(v) => v.as_bool().ok_or_else(|| args::wrong("options.stopAtEos", "true or false", &v))?,
        };
        let on_token = match args::optional_function(on_token, "onToken")? {
            Some(f) => Some(f),
            None => match field("onToken")? {
                None => None,
                Some(v) => args::optional_function(&v, "options.onToken")?,
            },
        };
        let signal = match field("signal")? {
            None => None,
            Some(v) => Some(
                v.dyn_into::<web_sys::AbortSignal>()
                    .map_err(|v| args::wrong("options.signal", "an AbortSignal", &v))?,
            ),
        };
        Ok(Self { max_tokens, sampling, seed, stop, stop_at_eos, on_token, signal, thinking: false })
    }
}
