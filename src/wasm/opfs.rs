//! The state store's records in the browser (`store: true`): one file each in the origin
//! private file system (OPFS), folder `webmamba-store`, shared by every tab and worker of the
//! origin and never sent anywhere.
//!
//! A record is written whole under a temporary name (`<name>.<writer>-<n>.tmp`) and then moved
//! onto its name, so a reader in another tab never sees half of one and two writers of one
//! record leave one whole copy (a record's bytes depend only on its key and the model, so either
//! is right). In a worker the bytes go through a sync access handle; in the page through
//! `createWritable()`. An engine without `move()` writes through `createWritable()` straight to
//! the name: its `close()` commits atomically. A record is marked used (for the LRU budget) by
//! rewriting its first byte through a sync access handle, in a worker only (in the page the
//! order is by write time). Failures are `Error::Storage` with the DOM error's name (a full
//! quota says `QuotaExceededError`), which the store turns into warnings.

use js_sys::Uint8Array;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use crate::error::{Error, Result};
use crate::store::{Backend, Entry, LocalFuture, TEMP_SUFFIX};

#[wasm_bindgen(inline_js = r#"
let folder = null;
function dir() {
  if (!folder) {
    folder = navigator.storage.getDirectory().then((root) => root.getDirectoryHandle('webmamba-store', { create: true }));
    folder.catch(() => { folder = null; });
  }
  return folder;
}
const inWorker = typeof WorkerGlobalScope !== 'undefined' && self instanceof WorkerGlobalScope;
const syncHandles = () => inWorker && typeof FileSystemFileHandle !== 'undefined'
  && typeof FileSystemFileHandle.prototype.createSyncAccessHandle === 'function';
const missing = (e) => e && (e.name === 'NotFoundError' || e.name === 'TypeMismatchError');
export function opfs_available() {
  return typeof navigator !== 'undefined' && !!navigator.storage && typeof navigator.storage.getDirectory === 'function';
}
export async function opfs_read(name) {
  const d = await dir();
  try {
    const file = await (await d.getFileHandle(name)).getFile();
    return new Uint8Array(await file.arrayBuffer());
  } catch (e) {
    if (missing(e)) return null;
    throw e;
  }
}
async function writeFile(handle, bytes) {
  if (syncHandles()) {
    const a = await handle.createSyncAccessHandle();
    try {
      a.truncate(0);
      let at = 0;
      while (at < bytes.length) {
        const n = a.write(bytes.subarray(at), { at });
        if (!(n > 0)) throw new DOMException('the file accepted no more bytes', 'QuotaExceededError');
        at += n;
      }
      a.flush();
    } finally {
      a.close();
    }
  } else if (typeof handle.createWritable === 'function') {
    const w = await handle.createWritable();
    try {
      await w.write(bytes);
      await w.close();
    } catch (e) {
      await w.abort().catch(() => {});
      throw e;
    }
  } else {
    throw new DOMException('this browser writes to the origin private file system only from a worker (load with worker: true)', 'NotSupportedError');
  }
}
export async function opfs_write(name, temp, bytes) {
  const d = await dir();
  const canMove = typeof FileSystemHandle !== 'undefined' && typeof FileSystemHandle.prototype.move === 'function';
  if (!canMove && !syncHandles()) return writeFile(await d.getFileHandle(name, { create: true }), bytes);
  const h = await d.getFileHandle(temp, { create: true });
  try {
    await writeFile(h, bytes);
    try {
      await h.move(d, name);
    } catch (e) {
      // An engine that does not move onto an existing file: the other copy is as good.
      await d.removeEntry(name).catch(() => {});
      await h.move(d, name);
    }
  } catch (e) {
    await d.removeEntry(temp).catch(() => {});
    throw e;
  }
}
export async function opfs_remove(name) {
  const d = await dir();
  try {
    await d.removeEntry(name);
  } catch (e) {
    if (!missing(e)) throw e;
  }
}
export async function opfs_list() {
  const d = await dir();
  const out = [];
  for await (const [name, h] of d.entries()) {
    if (h.kind !== 'file') continue;
    try {
      const f = await h.getFile();
      out.push([name, f.size, f.lastModified]);
    } catch (e) {
      if (!missing(e)) throw e;
    }
  }
  return out;
}
export async function opfs_touch(name) {
  if (!syncHandles()) return;
  const d = await dir();
  let a;
  try {
    a = await (await d.getFileHandle(name)).createSyncAccessHandle();
  } catch (e) {
    if (missing(e) || e.name === 'NoModificationAllowedError') return; // gone, or another tab has it open
    throw e;
  }
  try {
    const first = new Uint8Array(1);
    if (a.read(first, { at: 0 }) === 1) a.write(first, { at: 0 });
    a.flush();
  } finally {
    a.close();
  }
}
"#)]
extern "C" {
    fn opfs_available() -> bool;
    #[wasm_bindgen(catch)]
    fn opfs_read(name: &str) -> std::result::Result<js_sys::Promise, JsValue>;
    #[wasm_bindgen(catch)]
    fn opfs_write(
        name: &str,
        temp: &str,
        bytes: &Uint8Array,
    ) -> std::result::Result<js_sys::Promise, JsValue>;
    #[wasm_bindgen(catch)]
    fn opfs_remove(name: &str) -> std::result::Result<js_sys::Promise, JsValue>;
    #[wasm_bindgen(catch)]
    fn opfs_list() -> std::result::Result<js_sys::Promise, JsValue>;
    #[wasm_bindgen(catch)]
    fn opfs_touch(name: &str) -> std::result::Result<js_sys::Promise, JsValue>;
}

/// The store's folder in the origin private file system.
pub struct Opfs {
    /// Names this writer's temporaries apart from another tab's.
    writer: String,
    next_temp: std::cell::Cell<u64>,
}

/// Waits for an OPFS call; a failure is [`Error::Storage`] saying what was done and why.
async fn wait(what: String, call: std::result::Result<js_sys::Promise, JsValue>) -> Result<JsValue> {
    let promise = call.map_err(|e| crate::wasm::saved::storage(&what, &e))?;
    JsFuture::from(promise).await.map_err(|e| crate::wasm::saved::storage(&what, &e))
}

impl Opfs {
    /// The store's folder; [`Error::Storage`] where the browser has no origin private file
    /// system.
    pub fn open() -> Result<Self> {
        if !opfs_available() {
            return Err(Error::Storage {
                what: "opening the state store".into(),
                reason: "this browser has no origin private file system (navigator.storage.getDirectory)"
                    .into(),
            });
        }
        let writer = format!("{:08x}", (js_sys::Math::random() * f64::from(u32::MAX)) as u32);
        Ok(Self { writer, next_temp: std::cell::Cell::new(0) })
    }
}

impl Backend for Opfs {
    fn read<'a>(&'a self, name: &'a str) -> LocalFuture<'a, Result<Option<Vec<u8>>>> {
        Box::pin(async move {
            let v = wait(format!("reading state record {name}"), opfs_read(name)).await?;
            Ok(crate::wasm::args::uint8_array(&v).map(|a| a.to_vec()))
        })
    }
    fn write<'a>(&'a self, name: &'a str, bytes: &'a [u8]) -> LocalFuture<'a, Result<()>> {
        Box::pin(async move {
            let n = self.next_temp.replace(self.next_temp.get() + 1);
            let temp = format!("{name}.{}-{n}{TEMP_SUFFIX}", self.writer);
            let what = format!("writing state record {name}");
            wait(what, opfs_write(name, &temp, &Uint8Array::from(bytes))).await.map(|_| ())
        })
    }
    fn remove<'a>(&'a self, name: &'a str) -> LocalFuture<'a, Result<()>> {
        Box::pin(
            async move { wait(format!("removing state record {name}"), opfs_remove(name)).await.map(|_| ()) },
        )
    }
    fn list(&self) -> LocalFuture<'_, Result<Vec<Entry>>> {
        Box::pin(async move {
            let v = wait("listing the state store".into(), opfs_list()).await?;
            let entries = js_sys::Array::from(&v)
                .iter()
                .filter_map(|e| {
                    let e = js_sys::Array::from(&e);
                    let name = e.get(0).as_string()?;
                    let bytes = e.get(1).as_f64()? as u64;
                    let used_ms = e.get(2).as_f64().unwrap_or(0.0) as u64;
                    Some(Entry { name, bytes, used_ms })
                })
                .collect();
            Ok(entries)
        })
    }
    fn touch<'a>(&'a self, name: &'a str) -> LocalFuture<'a, Result<()>> {
        Box::pin(async move {
            wait(format!("marking state record {name} used"), opfs_touch(name)).await.map(|_| ())
        })
    }
    fn now_ms(&self) -> u64 {
        js_sys::Date::now() as u64
    }
}
