//! [`WebSource`]: a model folder as the browser reads it — a URL in the Hugging Face layout
//! (any static host, or the Hub's `https://huggingface.co/<repo>/resolve/main/`), or files the
//! user picked (`<input type="file" webkitdirectory>`). Files are read in pieces as they
//! arrive: `fetch` bodies as `ReadableStream`s, picked files with `Blob.slice`; headers with
//! HTTP Range requests. Nothing is read whole, so wasm memory stays small whatever the model.
//! A server that ignores Range answers the header's request with the whole file: that response
//! is kept (with the bytes already read) and the data pass goes on from it — one transfer.
//! Every network wait has the stall timer; every reader given up is cancelled (see [`Body`]).
//! A file whose long runs of unused tensors are skipped is read span by span
//! ([`WebSource::open_part`]: a Range request, or a picked file's slice).
//!
//! With the offline cache on, every file fetched from a URL is also written to the Cache API
//! (cache `webmamba-v1`, keyed by URL) while it streams (a [`Tap`]); the next load reads it from
//! there with no body bytes over the network, after a `HEAD` request checks its ETag and size
//! (offline, the cached copy is used as is). A failed cache write is a warning, never a failed
//! load.
//!
//! Every file is checked as it streams against the digests known for it ([`Digests`]); its
//! cache copy is kept only once it passed. A file read from the offline cache that turns out
//! damaged (its check, or its header or weights, fail) is [`WebSource::suspect`]ed: its entry is
//! deleted, and the load may start again once ([`WebSource::start_again`]), reading it from the
//! network.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::ops::Range;

use js_sys::Promise;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Cache, File, Response};

use crate::error::{Error, Result};
use crate::load::files::max_small_bytes;
use crate::load::integrity::{FileCheck, Integrity};
use crate::wasm::body::Body;
use crate::wasm::gguf_choice::Choice;
use crate::wasm::http::{
    etag_sha256, fetch, header_u64, io, is_missing_marker, message, missing, range_total, remember_missing,
    same_file,
};
use crate::wasm::offline::{absolute, open_cache};
use crate::wasm::reader::{Opened, Part, Reader, blob_bytes, first_bytes, picked, whole};
use crate::wasm::verify::Digests;
use crate::wasm::watch::{Waited, within};

/// The reason of a picked folder's missing file.
const NOT_PICKED: &str = "not among the picked files";

/// A model folder, with what its files must hash to and which were read from the offline cache.
pub(crate) struct WebSource {
    pub(super) place: Place,
    /// What each file must hash to.
    pub digests: Digests,
    /// Which of its files the load reads: a Hugging Face folder, or a GGUF file.
    pub choice: Choice,
    /// Files whose bytes were last opened from the offline cache.
    pub(super) from_cache: RefCell<HashSet<String>>,
    /// GGUF files' first bytes as their headers' reads left them, with their sizes: the data
    /// pass goes on from there ([`crate::wasm::prefix`]).
    pub(super) prefixes: RefCell<HashMap<String, (Vec<u8>, u64)>>,
    /// Files whose cached copy was found damaged and deleted in this load.
    distrusted: RefCell<Vec<String>>,
    /// Whether the load already started again.
    again: Cell<bool>,
}

/// Where a model folder is.
pub(super) enum Place {
    /// A folder URL (ending in `/`), with the offline cache when it is on and available.
    Url {
        base: String,
        cache: Option<Cache>,
        fresh: RefCell<HashMap<String, bool>>,
        /// No bytes for this long is a stalled download (`stallTimeoutMs`).
        stall_ms: u32,
        /// A whole-file answer to a header's Range request, by file name, kept for the data
        /// pass (at most one: each open response holds one of the browser's few connections
        /// to a host).
        kept: RefCell<Option<Box<(String, Opened)>>>,
    },
    /// Picked files, by name.
    Files(Vec<File>),
}

impl WebSource {
    fn new(place: Place, digests: Digests) -> Self {
        let (from_cache, distrusted, again, prefixes) = Default::default();
        WebSource { place, digests, choice: Choice::Folder, from_cache, prefixes, distrusted, again }
    }

    /// A folder at `base` (relative URLs resolve against the page); `cache`: use the Cache API;
    /// no bytes for `stall_ms` is a stalled download; `integrity`: the caller's digests.
    pub async fn url(base: &str, cache: bool, stall_ms: u32, integrity: Integrity) -> Result<Self> {
        let base = if base.ends_with('/') { base.to_string() } else { format!("{base}/") };
        let cache = if cache { open_cache().await } else { None };
        let digests = Digests::new(integrity, Some(&absolute(base.clone())), stall_ms);
        let place = Place::Url { base, cache, fresh: RefCell::default(), stall_ms, kept: RefCell::default() };
        Ok(Self::new(place, digests))
    }

    /// Picked files: a `FileList` or an array of `File`s. Where two have the same name (a
    /// folder with subfolders), the one nearest the top wins.
    pub fn files(files: &JsValue, integrity: Integrity) -> Result<Self> {
        Ok(Self::new(Place::Files(picked(files)?), Digests::new(integrity, None, 0)))
    }

    /// A whole small file (config, tokenizer, index) and the warning of its cache write, if it
    /// failed; `None` when the folder has no such file. A file over its cap
    /// ([`max_small_bytes`]) is refused as soon as that is known — from its `Content-Length`, or
    /// before the piece that would pass the cap is kept — and its download cancelled.
    pub async fn read_small(&self, name: &str) -> Result<Option<(Vec<u8>, Option<String>)>> {
        let cap = max_small_bytes(name);
        let Some(mut opened) = self.open(name).await? else { return Ok(None) };
        let too_big = |size: u64| Error::Io {
            path: name.into(),
            reason: format!("{size} bytes or more; at most {cap} are read for this file"),
        };
        if let Some(size) = opened.size.filter(|&s| s > cap) {
            return Err(too_big(size));
        }
        let mut check = self.digests.check(name, &opened);
        let mut out = Vec::with_capacity(opened.size.unwrap_or(0) as usize);
        while let Some(piece) = opened.reader.next(name).await? {
            if (out.len() + piece.len()) as u64 > cap {
                return Err(too_big((out.len() + piece.len()) as u64));
            }
            if let Some(c) = &mut check {
                c.update(&piece)?;
            }
            out.extend(piece);
        }
        check.map(FileCheck::finish).transpose()?;
        opened.reader.commit();
        let warning = self.finish_cache_write(name, opened.cache_write).await;
        Ok(Some((out, warning)))
    }

    /// The first `len` bytes of `name` (fewer if it is shorter) and its size when known.
    pub async fn read_head(&self, name: &str, len: u64) -> Result<(Vec<u8>, Option<u64>)> {
        match &self.place {
            Place::Files(_) => {
                let file = self.file(name)?;
                let end = (len as f64).min(file.size());
                let head =
                    blob_bytes(&file.slice_with_f64_and_f64(0.0, end).map_err(|e| io(name, &e))?, name)
                        .await?;
                Ok((head, Some(file.size() as u64)))
            }
            Place::Url { base, cache, stall_ms, kept, .. } => {
                if let Some(Some(mut cached)) = self.open_cached(name).await? {
                    return Ok((first_bytes(&mut cached.reader, len, name).await?, cached.size));
                }
                // Going on from this file's whole-file answer, if an earlier read kept it.
                let again = kept.borrow_mut().take_if(|k| k.0 == name).map(|k| k.1);
                let mut opened = match again {
                    Some(opened) => opened,
                    None => {
                        let url = format!("{base}{name}");
                        let fetched = fetch(&url, "GET", Some(0..len), *stall_ms).await?;
                        let response = &fetched.response;
                        self.from_cache.borrow_mut().remove(name);
                        if response.status() == 206 {
                            let size = range_total(response, name, 0)?;
                            let body = Body::new(response, Some(fetched.abort), *stall_ms, name)?;
                            let mut reader = Reader::Stream { body, head: Vec::new() };
                            return Ok((first_bytes(&mut reader, len, name).await?, size));
                        }
                        // The server ignored Range: this is the whole file, kept for the data pass.
                        whole(cache.as_ref(), &url, fetched, *stall_ms, name)?
                    }
                };
                let first = first_bytes(&mut opened.reader, len, name).await?;
                let size = opened.size;
                let mut slot = kept.borrow_mut();
                if slot.is_none() {
                    *slot = Some(Box::new((name.to_string(), opened)));
                }
                Ok((first, size))
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
        let prefix = self.prefixes.borrow_mut().remove(name);
        match &self.place {
            Place::Files(files) => Ok(files.iter().find(|f| f.name() == name).map(|f| Opened {
                reader: Reader::Blob { blob: f.clone().into(), at: 0.0 },
                size: Some(f.size() as u64),
                cache_write: None,
                etag: None,
            })),
            Place::Url { base, cache, stall_ms, kept, .. } => {
                if let Some(kept) = kept.borrow_mut().take_if(|k| k.0 == name) {
                    return Ok(Some(kept.1));
                }
                if let Some(cached) = self.open_cached(name).await? {
                    return Ok(cached);
                }
                if let Some((prefix, size)) = prefix {
                    return self.open_after(name, prefix, size).await.map(Some);
                }
                let url = format!("{base}{name}");
                let fetched = match fetch(&url, "GET", None, *stall_ms).await {
                    Err(Error::Io { reason, .. }) if missing(&reason) => {
                        // Remembered, so that a reload (or an offline visit) need not ask again.
                        if let Some(cache) = cache {
                            let _ = remember_missing(cache, &url).await;
                        }
                        return Ok(None);
                    }
                    other => other?,
                };
                self.from_cache.borrow_mut().remove(name);
                whole(cache.as_ref(), &url, fetched, *stall_ms, name).map(Some)
            }
        }
    }

    /// Opens bytes `range` of `name` (of `size` bytes) alone, where that saves a download: a
    /// picked file's slice, or an HTTP Range request. The whole file instead ([`Part::Whole`],
    /// read from byte 0) where it is at hand anyway — the whole-file answer a header's read
    /// kept, or a valid copy in the offline cache — or where the server ignored Range. A part
    /// is never written to the offline cache.
    pub async fn open_part(&self, name: &str, range: Range<u64>, size: u64) -> Result<Part> {
        self.prefixes.borrow_mut().remove(name); // (a GGUF header's: not needed)
        let (base, cache, stall_ms, kept) = match &self.place {
            Place::Files(_) => {
                let slice = self.file(name)?.slice_with_f64_and_f64(range.start as f64, range.end as f64);
                let blob = slice.map_err(|e| io(name, &e))?;
                return Ok(Part::Range(Reader::Blob { blob, at: 0.0 }, None));
            }
            Place::Url { base, cache, stall_ms, kept, .. } => (base, cache, *stall_ms, kept),
        };
        if let Some(kept) = kept.borrow_mut().take_if(|k| k.0 == name) {
            return Ok(Part::Whole(kept.1));
        }
        let gone = || Error::Io { path: name.into(), reason: "the file disappeared".into() };
        if let Some(cached) = self.open_cached(name).await? {
            return cached.map(Part::Whole).ok_or_else(gone);
        }
        let url = format!("{base}{name}");
        let fetched = fetch(&url, "GET", Some(range.clone()), stall_ms).await?;
        self.from_cache.borrow_mut().remove(name);
        if fetched.response.status() != 206 {
            // The server ignored Range: this is the whole file.
            return whole(cache.as_ref(), &url, fetched, stall_ms, name).map(Part::Whole);
        }
        if let Some(now) = range_total(&fetched.response, name, range.start)?.filter(|&n| n != size) {
            return Err(Error::Safetensors {
                file: name.into(),
                reason: format!("the file has {now} bytes now, its header described {size}"),
            });
        }
        let etag = etag_sha256(&fetched.response);
        let body = Body::new(&fetched.response, Some(fetched.abort), stall_ms, name)?;
        Ok(Part::Range(Reader::Stream { body, head: Vec::new() }, etag))
    }

    /// `name` will not be read (the model uses none of its bytes): the whole-file answer a
    /// header's read kept for it, if any, is cancelled.
    pub fn skip(&self, name: &str) {
        self.prefixes.borrow_mut().remove(name);
        if let Place::Url { kept, .. } = &self.place {
            drop(kept.borrow_mut().take_if(|k| k.0 == name));
        }
    }

    /// Waits for a cache write to end; a failure (quota, private mode) is returned as a warning.
    pub async fn finish_cache_write(&self, name: &str, write: Option<Promise>) -> Option<String> {
        let stall_ms = match &self.place {
            Place::Url { stall_ms, .. } => *stall_ms,
            Place::Files(_) => return None,
        };
        let e = match within(&write?, stall_ms).await {
            Waited::Done(_) => return None,
            Waited::Failed(e) => e,
            Waited::Stalled => format!("no answer for {stall_ms} ms").into(),
        };
        if let Place::Url { base, cache: Some(cache), .. } = &self.place {
            // A partial entry must not be served later.
            let _ = JsFuture::from(cache.delete_with_str(&format!("{base}{name}"))).await;
        }
        Some(format!(
            "the offline cache could not keep this file ({}); it will be downloaded again next time",
            message(&e)
        ))
    }

    /// The offline cache's copy of `name`, being written by `write` (`None`: none is), must not
    /// be kept: its file failed. Waits (at most the stall timeout) for `cache.put` to settle — it
    /// rejects, the copy having been errored ([`crate::wasm::body::Body::abandon`]) — then
    /// deletes the entry, so nothing of it is left however the cache ended the put.
    pub async fn discard_cache_write(&self, name: &str, write: Option<Promise>) {
        let (Some(write), Place::Url { base, cache: Some(cache), stall_ms, .. }) = (write, &self.place)
        else {
            return;
        };
        let _ = within(&write, *stall_ms).await;
        let _ = JsFuture::from(cache.delete_with_str(&format!("{base}{name}"))).await;
    }

    /// After `e` while reading `name`: when its bytes came from the offline cache and `e` is
    /// what a damaged copy causes (a failed integrity check, a malformed header or config, a
    /// non-finite weight, a failed read), the copy is deleted, the rest of this load reads the
    /// file from the network, and the load may start again ([`Self::start_again`]).
    pub async fn suspect(&self, name: &str, e: &Error) {
        let damage = matches!(
            e,
            Error::Integrity { .. }
                | Error::Safetensors { .. }
                | Error::Gguf { .. }
                | Error::Config(_)
                | Error::NonFiniteWeight { .. }
                | Error::Io { .. }
        );
        if !damage || !self.from_cache.borrow_mut().remove(name) {
            return;
        }
        if let Place::Url { base, cache: Some(cache), fresh, .. } = &self.place {
            fresh.borrow_mut().insert(name.to_string(), false);
            let _ = JsFuture::from(cache.delete_with_str(&format!("{base}{name}"))).await;
            self.distrusted.borrow_mut().push(name.to_string());
        }
    }

    /// The files whose damaged cached copies were deleted, once per load: the load should start
    /// again (their bytes now come from the network). `None` when there are none, or the load
    /// already started again.
    pub fn start_again(&self) -> Option<Vec<String>> {
        let names = self.distrusted.take();
        (!names.is_empty() && !self.again.replace(true)).then_some(names)
    }

    pub(super) fn file(&self, name: &str) -> Result<&File> {
        match &self.place {
            Place::Files(files) => files.iter().find(|f| f.name() == name),
            Place::Url { .. } => None,
        }
        .ok_or_else(|| Error::Io { path: name.into(), reason: NOT_PICKED.into() })
    }

    /// The offline cache's copy of `name`, opened, if there is a valid one ([`Self::cached`]):
    /// `Some(None)` where the cache remembers that the folder has no such file.
    async fn open_cached(&self, name: &str) -> Result<Option<Option<Opened>>> {
        let Place::Url { stall_ms, .. } = &self.place else { return Ok(None) };
        let Some(cached) = self.cached(name).await? else { return Ok(None) };
        if is_missing_marker(&cached) {
            return Ok(Some(None));
        }
        let size = header_u64(&cached, "content-length");
        let body = Body::new(&cached, None, *stall_ms, name)?;
        self.from_cache.borrow_mut().insert(name.to_string());
        let reader = Reader::Stream { body, head: Vec::new() };
        Ok(Some(Some(Opened { reader, size, cache_write: None, etag: etag_sha256(&cached) })))
    }

    /// The cached response for `name`, if there is one and the server (when reachable) agrees
    /// on its ETag and size.
    async fn cached(&self, name: &str) -> Result<Option<Response>> {
        let Place::Url { base, cache: Some(cache), fresh, stall_ms, .. } = &self.place else {
            return Ok(None);
        };
        let url = format!("{base}{name}");
        let found = JsFuture::from(cache.match_with_str(&url)).await.ok().filter(|v| !v.is_undefined());
        let Some(cached) = found.and_then(|v| v.dyn_into::<Response>().ok()) else { return Ok(None) };
        let known = fresh.borrow().get(name).copied();
        let marker = is_missing_marker(&cached);
        let valid = match known {
            Some(v) => v,
            None => {
                let v = match fetch(&url, "HEAD", None, *stall_ms).await {
                    Ok(head) => !marker && same_file(&cached, &head.response),
                    // A file remembered as missing stays so while the server says so.
                    Err(Error::Io { reason, .. }) if missing(&reason) => marker,
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
