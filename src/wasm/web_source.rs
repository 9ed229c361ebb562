//! [`WebSource`]: a model folder as the browser reads it — a URL in the Hugging Face layout
//! (any static host, or the Hub's `https://huggingface.co/<repo>/resolve/main/`), or files the
//! user picked (`<input type="file" webkitdirectory>`). Files are read in pieces as they
//! arrive: `fetch` bodies as `ReadableStream`s, picked files with `Blob.slice`; headers with
//! HTTP Range requests. Nothing is read whole, so wasm memory stays small whatever the model.
//!
//! With the offline cache on, every file fetched from a URL is also written to the Cache API
//! (cache `webmamba-v1`, keyed by URL) while it streams; the next load reads it from there with
//! no body bytes over the network, after a `HEAD` request checks its ETag and size (offline,
//! the cached copy is used as is). A failed cache write is a warning, never a failed load.

use std::cell::RefCell;
use std::collections::HashMap;

use js_sys::{Promise, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Blob, Cache, File, ReadableStreamDefaultReader, Request, Response};

use crate::error::{Error, Result};
use crate::wasm::http::{fetch, header_u64, io, message, missing, same_file};

/// The Cache API cache that holds downloaded model files.
pub const CACHE_NAME: &str = "webmamba-v1";

/// Bytes read from a picked file at a time.
const BLOB_PIECE: f64 = (4 << 20) as f64;

/// The reason of a picked folder's missing file.
const NOT_PICKED: &str = "not among the picked files";

/// Where a model folder is.
pub(crate) enum WebSource {
    /// A folder URL (ending in `/`), with the offline cache when it is on and available.
    Url { base: String, cache: Option<Cache>, fresh: RefCell<HashMap<String, bool>> },
    /// Picked files, by name.
    Files(Vec<File>),
}

/// A file being read from its start.
pub(crate) enum Reader {
    /// A response body (network or cache).
    Stream(ReadableStreamDefaultReader),
    /// A picked file, `BLOB_PIECE` bytes at a time.
    Blob { blob: Blob, at: f64 },
}

/// An opened file: its reader, its size when known, and the pending cache write.
pub(crate) struct Opened {
    pub reader: Reader,
    pub size: Option<u64>,
    pub cache_write: Option<Promise>,
}

impl WebSource {
    /// A folder at `base` (relative URLs resolve against the page); `cache`: use the Cache API.
    pub async fn url(base: &str, cache: bool) -> Result<Self> {
        let base = if base.ends_with('/') { base.to_string() } else { format!("{base}/") };
        let cache = if cache { open_cache().await } else { None };
        Ok(WebSource::Url { base, cache, fresh: RefCell::new(HashMap::new()) })
    }

    /// Picked files: a `FileList` or an array of `File`s. Where two have the same name (a
    /// folder with subfolders), the one nearest the top wins.
    pub fn files(files: &JsValue) -> Result<Self> {
        let bad = || Error::InvalidInput("fromFiles takes a FileList or an array of File objects".into());
        if !files.is_object() {
            return Err(bad());
        }
        let mut picked: Vec<File> = Vec::new();
        for item in js_sys::Array::from(files).iter() {
            let file: File = item.dyn_into().map_err(|_| bad())?;
            let depth = |f: &File| {
                Reflect::get(f, &"webkitRelativePath".into())
                    .ok()
                    .and_then(|p| p.as_string())
                    .map_or(0, |p| p.matches('/').count())
            };
            match picked.iter_mut().find(|f| f.name() == file.name()) {
                Some(existing) if depth(&file) < depth(existing) => *existing = file,
                Some(_) => {}
                None => picked.push(file),
            }
        }
        if picked.is_empty() {
            return Err(bad());
        }
        Ok(WebSource::Files(picked))
    }

    /// A whole small file (config, tokenizer, index) and the warning of its cache write, if it
    /// failed; `None` when the folder has no such file.
    pub async fn read_small(&self, name: &str) -> Result<Option<(Vec<u8>, Option<String>)>> {
        use crate::load::files::MAX_SMALL_BYTES;
        let Some(mut opened) = self.open(name).await? else { return Ok(None) };
        let too_big = |size: u64| Error::Io {
            path: name.into(),
            reason: format!("{size} bytes or more; at most {MAX_SMALL_BYTES} are read for this file"),
        };
        if let Some(size) = opened.size.filter(|&s| s > MAX_SMALL_BYTES) {
            return Err(too_big(size));
        }
        let mut out = Vec::with_capacity(opened.size.unwrap_or(0) as usize);
        while let Some(piece) = opened.reader.next(name).await? {
            out.extend(piece);
            if out.len() as u64 > MAX_SMALL_BYTES {
                return Err(too_big(out.len() as u64));
            }
        }
        let warning = self.finish_cache_write(name, opened.cache_write).await;
        Ok(Some((out, warning)))
    }

    /// The first `len` bytes of `name` (fewer if it is shorter) and its size when known.
    pub async fn read_head(&self, name: &str, len: u64) -> Result<(Vec<u8>, Option<u64>)> {
        match self {
            WebSource::Files(_) => {
                let file = self.file(name)?;
                let end = (len as f64).min(file.size());
                let head =
                    blob_bytes(&file.slice_with_f64_and_f64(0.0, end).map_err(|e| io(name, &e))?, name)
                        .await?;
                Ok((head, Some(file.size() as u64)))
            }
            WebSource::Url { base, .. } => {
                if let Some(cached) = self.cached(name).await? {
                    let size = header_u64(&cached, "content-length");
                    return Ok((first_bytes(cached, len, name).await?, size));
                }
                let url = format!("{base}{name}");
                let response = fetch(&url, "GET", Some(len)).await?;
                let size = match response.status() {
                    206 => response
                        .headers()
                        .get("content-range")
                        .ok()
                        .flatten()
                        .and_then(|r| r.rsplit('/').next().and_then(|t| t.parse().ok())),
                    _ => header_u64(&response, "content-length"),
                };
                Ok((first_bytes(response, len, name).await?, size))
            }
        }
    }

    /// [`WebSource::read_head`], or `None` when the folder has no such file.
    pub async fn read_head_if_any(&self, name: &str, len: u64) -> Result<Option<(Vec<u8>, Option<u64>)>> {
        match self.read_head(name, len).await {
            Ok(head) => Ok(Some(head)),
            Err(Error::Io { reason, .. }) if missing(&reason) || reason == NOT_PICKED => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Opens `name` for reading from its start; `None` when the folder has no such file.
    pub async fn open(&self, name: &str) -> Result<Option<Opened>> {
        match self {
            WebSource::Files(files) => Ok(files.iter().find(|f| f.name() == name).map(|f| Opened {
                reader: Reader::Blob { blob: f.clone().into(), at: 0.0 },
                size: Some(f.size() as u64),
                cache_write: None,
            })),
            WebSource::Url { base, cache, .. } => {
                if let Some(cached) = self.cached(name).await? {
                    let size = header_u64(&cached, "content-length");
                    return Ok(Some(Opened { reader: body_reader(&cached, name)?, size, cache_write: None }));
                }
                let url = format!("{base}{name}");
                let response = match fetch(&url, "GET", None).await {
                    Err(Error::Io { reason, .. }) if missing(&reason) => return Ok(None),
                    other => other?,
                };
                let size = header_u64(&response, "content-length");
                let cache_write = match (cache, response.clone()) {
                    (Some(cache), Ok(copy)) => Some(write_through(cache, &url, copy)),
                    _ => None,
                };
                Ok(Some(Opened { reader: body_reader(&response, name)?, size, cache_write }))
            }
        }
    }

    /// Waits for a cache write to end; a failure (quota, private mode) is returned as a warning.
    pub async fn finish_cache_write(&self, name: &str, write: Option<Promise>) -> Option<String> {
        let e = JsFuture::from(write?).await.err()?;
        if let WebSource::Url { base, cache: Some(cache), .. } = self {
            // A partial entry must not be served later.
            let _ = JsFuture::from(cache.delete_with_str(&format!("{base}{name}"))).await;
        }
        Some(format!(
            "the offline cache could not keep this file ({}); it will be downloaded again next time",
            message(&e)
        ))
    }

    fn file(&self, name: &str) -> Result<&File> {
        match self {
            WebSource::Files(files) => files.iter().find(|f| f.name() == name),
            WebSource::Url { .. } => None,
        }
        .ok_or_else(|| Error::Io { path: name.into(), reason: NOT_PICKED.into() })
    }

    /// The cached response for `name`, if there is one and the server (when reachable) agrees
    /// on its ETag and size.
    async fn cached(&self, name: &str) -> Result<Option<Response>> {
        let WebSource::Url { base, cache: Some(cache), fresh } = self else { return Ok(None) };
        let url = format!("{base}{name}");
        let found = JsFuture::from(cache.match_with_str(&url)).await.ok().filter(|v| !v.is_undefined());
        let Some(cached) = found.and_then(|v| v.dyn_into::<Response>().ok()) else { return Ok(None) };
        let known = fresh.borrow().get(name).copied();
        let valid = match known {
            Some(v) => v,
            None => {
                let v = match fetch(&url, "HEAD", None).await {
                    Ok(head) => same_file(&cached, &head),
                    Err(Error::Io { reason, .. }) if reason.starts_with("HTTP") => false,
                    Err(_) => true, // offline: the cached copy is all there is
                };
                fresh.borrow_mut().insert(name.to_string(), v);
                v
            }
        };
        if !valid {
            let _ = JsFuture::from(cache.delete_with_str(&url)).await;
            return Ok(None);
        }
        Ok(Some(cached))
    }
}

impl Reader {
    /// The next bytes of the file, `None` at its end.
    pub async fn next(&mut self, name: &str) -> Result<Option<Vec<u8>>> {
        match self {
            Reader::Stream(reader) => {
                let result = JsFuture::from(reader.read()).await.map_err(|e| io(name, &e))?;
                let done =
                    Reflect::get(&result, &"done".into()).ok().and_then(|d| d.as_bool()).unwrap_or(true);
                if done {
                    return Ok(None);
                }
                let value = Reflect::get(&result, &"value".into()).map_err(|e| io(name, &e))?;
                // Any realm's Uint8Array: a copy of the package imported from another realm
                // (Firefox's WebDriver sandbox, an extension's content script) gets the page's.
                let bytes = crate::wasm::args::uint8_array(&value).ok_or_else(|| Error::Io {
                    path: name.into(),
                    reason: "the response body gave something other than bytes".into(),
                })?;
                Ok(Some(bytes.to_vec()))
            }
            Reader::Blob { blob, at } => {
                if *at >= blob.size() {
                    return Ok(None);
                }
                let end = (*at + BLOB_PIECE).min(blob.size());
                let piece = blob.slice_with_f64_and_f64(*at, end).map_err(|e| io(name, &e))?;
                *at = end;
                blob_bytes(&piece, name).await.map(Some)
            }
        }
    }

    /// Stops reading (the rest of a response body is not downloaded).
    pub async fn cancel(self) {
        if let Reader::Stream(reader) = self {
            let _ = JsFuture::from(reader.cancel()).await;
        }
    }
}

/// Starts `cache.put(url, copy)`, where `copy` is a clone of the response being read: the two
/// halves of the body stream together. If the write fails early (a full quota), the copy's half
/// is cancelled, or it would keep the rest of the file in memory. The promise still rejects.
fn write_through(cache: &Cache, url: &str, copy: Response) -> Promise {
    let body = copy.body();
    let put = cache.put_with_str(url, &copy);
    let on_failure = Closure::once_into_js(move |_: JsValue| {
        if let Some(body) = body.filter(|b| !b.locked()) {
            let _ = body.cancel();
        }
    });
    // `put.catch(on_failure)`: a handler beside the awaited promise, which still rejects.
    if let Ok(catch) = Reflect::get(&put, &"catch".into()).and_then(|c| c.dyn_into::<js_sys::Function>()) {
        let _ = catch.call1(&put, &on_failure);
    }
    put
}

/// Deletes every cached file under `base`; resolves to how many there were.
pub async fn clear_cache(base: &str) -> Result<u32> {
    let Some(cache) = open_cache().await else { return Ok(0) };
    let base = absolute(if base.ends_with('/') { base.to_string() } else { format!("{base}/") });
    let keys = JsFuture::from(cache.keys()).await.map_err(|e| io(&base, &e))?;
    let mut deleted = 0;
    for key in js_sys::Array::from(&keys).iter() {
        let Ok(request) = key.dyn_into::<Request>() else { continue };
        if request.url().starts_with(&base) {
            let gone = JsFuture::from(cache.delete_with_request(&request)).await;
            deleted += gone.is_ok_and(|v| v.is_truthy()) as u32;
        }
    }
    Ok(deleted)
}

/// The Cache API cache, where the context has one (secure contexts only).
async fn open_cache() -> Option<Cache> {
    let caches = Reflect::get(&js_sys::global(), &"caches".into()).ok().filter(|c| !c.is_undefined())?;
    let caches: web_sys::CacheStorage = caches.dyn_into().ok()?;
    JsFuture::from(caches.open(CACHE_NAME)).await.ok()?.dyn_into().ok()
}

/// `url` made absolute against the page (or worker) location.
fn absolute(url: String) -> String {
    let href = Reflect::get(&js_sys::global(), &"location".into())
        .and_then(|l| Reflect::get(&l, &"href".into()))
        .ok()
        .and_then(|h| h.as_string());
    href.and_then(|h| web_sys::Url::new_with_base(&url, &h).ok()).map_or(url, |u| u.href())
}

fn body_reader(response: &Response, name: &str) -> Result<Reader> {
    let body = response
        .body()
        .ok_or_else(|| Error::Io { path: name.into(), reason: "the response has no body".into() })?;
    Ok(Reader::Stream(body.get_reader().dyn_into().map_err(|e| io(name, &e))?))
}

/// Up to `len` bytes from the start of `response`'s body; the rest is not read.
async fn first_bytes(response: Response, len: u64, name: &str) -> Result<Vec<u8>> {
    let mut reader = body_reader(&response, name)?;
    let mut out = Vec::new();
    while (out.len() as u64) < len {
        match reader.next(name).await? {
            Some(piece) => out.extend(piece),
            None => break,
        }
    }
    out.truncate(len as usize);
    reader.cancel().await;
    Ok(out)
}

async fn blob_bytes(blob: &Blob, name: &str) -> Result<Vec<u8>> {
    let buffer = JsFuture::from(blob.array_buffer()).await.map_err(|e| io(name, &e))?;
    Ok(Uint8Array::new(&buffer).to_vec())
}
