//! Sessions that survive a page reload: `session.save(name)` keeps the session's exported state
//! (history, logits, state and the model's fingerprint: `session::export`) in IndexedDB
//! (database `webmamba`, store `sessions`, key = name); `model.restoreSession(name)` imports it
//! into a new session — whose next `append` prefills only the new tokens — and a state saved
//! with another model is `StateMismatch`. The IndexedDB calls are a small JS snippet (IndexedDB's
//! request/event API is all callbacks); the logic stays in Rust.

use js_sys::{Array, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use crate::error::{Error, Result};

#[wasm_bindgen(inline_js = r#"
function open() {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open('webmamba', 1);
    req.onupgradeneeded = () => req.result.createObjectStore('sessions');
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}
async function run(mode, f) {
  const db = await open();
  try {
    return await new Promise((resolve, reject) => {
      const tx = db.transaction('sessions', mode);
      let result;
      const req = f(tx.objectStore('sessions'));
      req.onsuccess = () => { result = req.result; };
      tx.oncomplete = () => resolve(result);
      tx.onerror = () => reject(tx.error ?? req.error);
      tx.onabort = () => reject(tx.error ?? req.error);
    });
  } finally {
    db.close();
  }
}
export function idb_put(name, bytes) { return run('readwrite', (s) => s.put(bytes, name)); }
export function idb_get(name) { return run('readonly', (s) => s.get(name)); }
export function idb_keys() { return run('readonly', (s) => s.getAllKeys()); }
export function idb_delete(name) { return run('readwrite', (s) => s.delete(name)); }
"#)]
extern "C" {
    #[wasm_bindgen(catch)]
    fn idb_put(name: &str, bytes: &Uint8Array) -> std::result::Result<js_sys::Promise, JsValue>;
    #[wasm_bindgen(catch)]
    fn idb_get(name: &str) -> std::result::Result<js_sys::Promise, JsValue>;
    #[wasm_bindgen(catch)]
    fn idb_keys() -> std::result::Result<js_sys::Promise, JsValue>;
    #[wasm_bindgen(catch)]
    fn idb_delete(name: &str) -> std::result::Result<js_sys::Promise, JsValue>;
}

/// Waits for an IndexedDB call; a failure is [`Error::Storage`] saying what was done and why
/// (a full quota says `QuotaExceededError`).
async fn wait(what: &str, call: std::result::Result<js_sys::Promise, JsValue>) -> Result<JsValue> {
    let promise = call.map_err(|e| storage(what, &e))?;
    JsFuture::from(promise).await.map_err(|e| storage(what, &e))
}

/// A rejected storage call (IndexedDB, OPFS) as [`Error::Storage`]: the DOM error's name and message.
pub(crate) fn storage(what: &str, e: &JsValue) -> Error {
    let name = js_sys::Reflect::get(e, &"name".into()).ok().and_then(|n| n.as_string()).unwrap_or_default();
    let message = js_sys::Reflect::get(e, &"message".into()).ok().and_then(|m| m.as_string());
    let reason = match message {
        Some(m) if !name.is_empty() => format!("{name}: {m}"),
        Some(m) => m,
        None => e.as_string().unwrap_or_else(|| "the browser's storage failed".into()),
    };
    Error::Storage { what: what.into(), reason }
}

/// Stores `bytes` (an exported state) under `name`.
pub async fn put(name: &str, bytes: &[u8]) -> Result<()> {
    wait(&format!("saving session {name:?}"), idb_put(name, &Uint8Array::from(bytes))).await.map(|_| ())
}

/// The bytes saved under `name`; `Error::InvalidInput` when there are none.
pub async fn get(name: &str) -> Result<Vec<u8>> {
    let v = wait(&format!("reading session {name:?}"), idb_get(name)).await?;
    match crate::wasm::args::uint8_array(&v) {
        Some(a) => Ok(a.to_vec()),
        None => Err(Error::InvalidInput(format!("no saved session named {name:?}"))),
    }
}

/// The names saved.
pub async fn names() -> Result<Vec<String>> {
    let keys = wait("listing saved sessions", idb_keys()).await?;
    Ok(Array::from(&keys).iter().filter_map(|k| k.as_string()).collect())
}

/// Forgets `name`; whether it was there.
pub async fn delete(name: &str) -> Result<bool> {
    let was = names().await?.iter().any(|n| n == name);
    wait(&format!("deleting session {name:?}"), idb_delete(name)).await?;
    Ok(was)
}
