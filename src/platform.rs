//! The few things that differ between the browser and native targets outside wgpu itself.

/// Writes a diagnostic line to the browser console or to stderr.
pub(crate) fn log_error(message: &str) {
    #[cfg(target_arch = "wasm32")]
    web_sys::console::error_1(&message.into());
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("{message}");
}

/// In a browser: fails with a readable reason when this global scope has no `navigator.gpu`
/// (no WebGPU in this browser, WebGPU disabled, or not a window/dedicated worker).
/// Natively there is nothing to check here: adapter enumeration says what is missing.
pub(crate) fn check_webgpu_present() -> Result<(), String> {
    #[cfg(target_arch = "wasm32")]
    {
        use wasm_bindgen::JsValue;
        let global = js_sys::global();
        let navigator = js_sys::Reflect::get(&global, &JsValue::from_str("navigator"))
            .ok()
            .filter(|n| n.is_object())
            .ok_or("this JavaScript context has no `navigator` (use a window or a worker)")?;
        let gpu = js_sys::Reflect::get(&navigator, &JsValue::from_str("gpu")).ok().filter(|g| g.is_object());
        if gpu.is_none() {
            return Err("`navigator.gpu` is undefined: this browser has no WebGPU or it is \
                        disabled (it needs a secure context: https or localhost)"
                .into());
        }
    }
    Ok(())
}

/// In a browser, wgpu names the adapter by `GPUAdapterInfo.description`, which Chromium leaves
/// empty; this asks WebGPU directly for `vendor`, `architecture`, `device` and `description`
/// and joins the non-empty ones (e.g. "google swiftshader"). Natively: `None`.
pub(crate) async fn browser_adapter_name() -> Option<String> {
    #[cfg(target_arch = "wasm32")]
    {
        use js_sys::{Function, Promise, Reflect};
        use wasm_bindgen::{JsCast, JsValue};
        let get = |obj: &JsValue, key: &str| Reflect::get(obj, &JsValue::from_str(key)).ok();
        let navigator = get(&js_sys::global(), "navigator")?;
        let gpu = get(&navigator, "gpu").filter(|g| g.is_object())?;
        let request: Function = get(&gpu, "requestAdapter")?.dyn_into().ok()?;
        let options = js_sys::Object::new();
        Reflect::set(&options, &"powerPreference".into(), &"high-performance".into()).ok()?;
        let promise: Promise = request.call1(&gpu, &options).ok()?.dyn_into().ok()?;
        let adapter = wasm_bindgen_futures::JsFuture::from(promise).await.ok()?;
        let info = get(&adapter, "info").filter(|i| i.is_object())?;
        let parts: Vec<String> = ["vendor", "architecture", "device", "description"]
            .iter()
            .filter_map(|k| get(&info, k).and_then(|v| v.as_string()))
            .filter(|s| !s.is_empty())
            .collect();
        if parts.is_empty() { None } else { Some(parts.join(" ")) }
    }
    #[cfg(not(target_arch = "wasm32"))]
    None
}

#[cfg(target_arch = "wasm32")]
#[wasm_bindgen::prelude::wasm_bindgen(inline_js = r#"
let channel = null;
let next = 0;
const waiting = new Map();
export function yield_task() {
  if (typeof MessageChannel !== 'function') return new Promise((resolve) => setTimeout(resolve, 0));
  if (channel === null) {
    channel = new MessageChannel();
    channel.port1.onmessage = (event) => waiting.get(event.data)?.();
  }
  return new Promise((resolve) => {
    const id = next++;
    const done = () => {
      clearTimeout(lost);
      waiting.delete(id);
      resolve();
    };
    const lost = setTimeout(done, 1000);
    waiting.set(id, done);
    channel.port2.postMessage(id);
  });
}"#)]
extern "C" {
    /// A promise that resolves in a new task (a message on one MessageChannel kept for the
    /// global's life), after the tasks already queued: input, timers, a worker's messages. Not
    /// `setTimeout(0)`: browsers clamp nested timeouts to 4 ms, which held decoding under 250
    /// tokens/s whatever the model; not `scheduler.yield()`: its continuation runs ahead of other
    /// tasks, which could starve a page's timers for a whole generation; not a new MessageChannel
    /// per call: WebKit keeps every one it made, and each new one costs more (in-page decoding
    /// fell from ~400 to ~50 tok/s over 2,000 tokens: docs/BENCHMARKS.md). A message the engine
    /// loses (Safari has been seen to: comlink#600) ends the wait after a second through a timer
    /// instead of never: a generation pauses, it does not hang.
    fn yield_task() -> js_sys::Promise;
}

/// Lets the browser's event loop run (paint, handle a Stop click, deliver a worker's messages)
/// between decode steps; a no-op natively.
pub(crate) async fn yield_now() {
    #[cfg(target_arch = "wasm32")]
    {
        // The promise cannot reject.
        let _ = wasm_bindgen_futures::JsFuture::from(yield_task()).await;
    }
}
