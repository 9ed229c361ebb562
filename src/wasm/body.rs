//! [`Body`]: a response body (network or offline cache) read chunk by chunk, each read under
//! the stall timer; its failures say how far it got ("truncated at N of M bytes", "stalled:
//! no bytes for …"). A `Body` dropped before its end — on any early return: a refused file, a
//! bad weight, a stall, an abort — cancels its reader and aborts its `fetch`, so nothing keeps
//! streaming (or buffering) a response nobody reads.
//!
//! [`Tap`]: the offline cache's copy of a download, written through a stream of our own that is
//! fed each chunk as the loader reads it (`cache.put(url, new Response(stream))`). Unlike a
//! `response.clone()` (a tee, whose unread half buffers whatever the other half reads), the
//! cache gets exactly what was read, when it was read: a file whose head was read while the
//! load checked its headers can go on from where it stopped, into the same cache entry. The
//! copy is closed (and so kept) only when the loader commits it, after the file passed its
//! integrity check: a damaged download is never stored.

use std::cell::Cell;
use std::rc::Rc;

use js_sys::{Object, Promise, Reflect};
use wasm_bindgen::prelude::*;
use web_sys::{
    ByteLengthQueuingStrategy, Cache, QueuingStrategy, QueuingStrategyInit, ReadableStream,
    ReadableStreamDefaultController, ReadableStreamDefaultReader, Response, ResponseInit,
};

use crate::error::{Error, Result};
use crate::wasm::http::{Abort, header_u64, io, message};
use crate::wasm::watch::{Waited, within};

/// The most bytes the offline cache's copy may fall behind the download: past it the download
/// waits for the copy (backpressure), so the copy never holds more of the file in memory.
const TAP_LAG_BYTES: f64 = (64 << 20) as f64;

/// How often a download waiting for the cache's copy looks again, in milliseconds.
const TAP_POLL_MS: u32 = 20;

/// A response body being read.
pub(crate) struct Body {
    reader: ReadableStreamDefaultReader,
    /// Ends the download (none for a cached body).
    abort: Option<Abort>,
    /// The offline cache's copy, fed every chunk read.
    tap: Option<Tap>,
    /// Bytes read so far, and the response's `Content-Length` when known.
    read: u64,
    total: Option<u64>,
    stall_ms: u32,
    ended: bool,
}

impl Body {
    /// Reads `response`'s body; `abort` ends its download.
    pub fn new(response: &Response, abort: Option<Abort>, stall_ms: u32, name: &str) -> Result<Self> {
        let stream = response
            .body()
            .ok_or_else(|| Error::Io { path: name.into(), reason: "the response has no body".into() })?;
        let reader = stream.get_reader().dyn_into().map_err(|e| io(name, &e))?;
        let total = header_u64(response, "content-length");
        Ok(Body { reader, abort, tap: None, read: 0, total, stall_ms, ended: false })
    }

    /// Feeds every chunk read from here on to the offline cache's copy.
    pub fn tap(&mut self, tap: Tap) {
        self.tap = Some(tap);
    }

    /// The next chunk (a `Uint8Array`), `None` at the end.
    pub async fn chunk(&mut self, name: &str) -> Result<Option<JsValue>> {
        if self.ended {
            return Ok(None);
        }
        let result = match within(&self.reader.read(), self.stall_ms).await {
            Waited::Done(result) => result,
            Waited::Failed(e) => return Err(self.failed(name, &e)),
            Waited::Stalled => {
                let reason =
                    format!("stalled: no bytes for {} ms after {} bytes", self.stall_ms, self.of_total());
                return Err(Error::Io { path: name.into(), reason });
            }
        };
        let done = Reflect::get(&result, &"done".into()).ok().and_then(|d| d.as_bool()).unwrap_or(true);
        if done {
            // The cache's copy stays open until the file passed its checks (`commit`).
            self.ended = true;
            return Ok(None);
        }
        let value = Reflect::get(&result, &"value".into()).map_err(|e| io(name, &e))?;
        let len = Reflect::get(&value, &"byteLength".into()).ok().and_then(|n| n.as_f64()).unwrap_or(0.0);
        self.read += len as u64;
        self.keep_pace().await;
        if let Some(tap) = &self.tap
            && !tap.feed(&value)
        {
            self.tap = None;
        }
        Ok(Some(value))
    }

    /// The body was read to its end and its file passed its checks: the offline cache's copy
    /// is closed, so `cache.put` keeps it. Before the end, nothing happens.
    pub fn commit(&mut self) {
        if self.ended
            && let Some(tap) = self.tap.take()
        {
            tap.close();
        }
    }

    /// The file failed (a check, a read, the sink): the offline cache's copy is errored now, so
    /// `cache.put` keeps nothing; the download itself is cancelled when the body drops.
    pub fn abandon(&mut self) {
        if let Some(tap) = self.tap.take() {
            tap.fail("the download failed its checks");
        }
    }

    /// Waits while the offline cache's copy is more than [`TAP_LAG_BYTES`] behind the download
    /// (a large file arrives faster than the cache writes it); a copy that takes nothing for
    /// `stall_ms` (a cache that stopped reading) is given up, and the download goes on without it.
    async fn keep_pace(&mut self) {
        let (mut last, mut idle) = (f64::INFINITY, 0);
        let why = loop {
            let Some(tap) = &self.tap else { return };
            let behind = tap.behind();
            if behind <= TAP_LAG_BYTES {
                return;
            }
            if behind < last {
                (last, idle) = (behind, 0);
            } else if idle >= self.stall_ms {
                break "the offline cache stopped taking the download";
            }
            if !sleep(TAP_POLL_MS).await {
                break "the offline cache fell behind and this global has no timer to wait with";
            }
            idle += TAP_POLL_MS;
        };
        if let Some(tap) = self.tap.take() {
            tap.fail(why);
        }
    }

    /// The error of a read that failed after `self.read` bytes.
    fn failed(&self, name: &str, e: &JsValue) -> Error {
        let reason = match self.total {
            Some(total) if self.read < total => {
                format!(
                    "truncated at {} of {total} bytes: the download broke off ({})",
                    self.read,
                    message(e)
                )
            }
            _ => format!("the download failed after {} bytes ({})", self.of_total(), message(e)),
        };
        Error::Io { path: name.into(), reason }
    }

    /// "N of M" (or "N of an unknown total").
    fn of_total(&self) -> String {
        match self.total {
            Some(total) => format!("{} of {total}", self.read),
            None => format!("{} of an unknown total", self.read),
        }
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        if !self.ended {
            ignore_rejection(&self.reader.cancel());
        }
        // A copy never committed (a download given up, or one that failed its integrity check)
        // is errored: `cache.put` rejects and keeps nothing.
        if let Some(tap) = self.tap.take() {
            tap.fail(if self.ended {
                "the download failed its checks"
            } else {
                "the download was not read to its end"
            });
        }
        // The fetch is aborted too (which does nothing after its end).
        drop(self.abort.take());
    }
}

/// The offline cache's copy of one download: the controller of the stream `cache.put` reads.
pub(crate) struct Tap {
    controller: ReadableStreamDefaultController,
}

impl Tap {
    /// Starts `cache.put(url, copy)`, `copy` a response with `response`'s headers whose body is
    /// what the loader will read from `response` (fed by [`Body`]). Returns the tap and the
    /// `put` promise (it rejects if the copy is incomplete: a partial file is never kept).
    pub fn start(cache: &Cache, url: &str, response: &Response) -> Option<(Tap, Promise)> {
        let controller: Rc<Cell<Option<ReadableStreamDefaultController>>> = Rc::default();
        let given = Rc::clone(&controller);
        let start = Closure::<dyn FnMut(ReadableStreamDefaultController)>::new(move |c| given.set(Some(c)));
        let source = Object::new();
        Reflect::set(&source, &"start".into(), start.as_ref()).ok()?;
        let init = QueuingStrategyInit::new(0.0);
        let bytes = ByteLengthQueuingStrategy::new(&init).ok()?;
        let strategy: &QueuingStrategy = bytes.unchecked_ref();
        // `start` runs inside the constructor: the closure is not needed after it.
        let stream = ReadableStream::new_with_underlying_source_and_strategy(&source, strategy).ok()?;
        let controller = controller.take()?;
        let init = ResponseInit::new();
        init.set_status(200);
        init.set_headers(&response.headers());
        let copy = Response::new_with_opt_readable_stream_and_init(Some(&stream), &init).ok()?;
        let put = cache.put_with_str(url, &copy);
        // A put refused before it read the copy (a request the cache will not store) ends the
        // copy at once: the download does not wait for a reader that never comes.
        error_on_rejection(&put, &controller);
        Some((Tap { controller }, put))
    }

    /// Passes a chunk on; `false` when the copy is gone (the cache errored or cancelled it).
    fn feed(&self, chunk: &JsValue) -> bool {
        self.controller.enqueue_with_chunk(chunk).is_ok()
    }

    /// Bytes passed on that the cache has not taken yet (0 once the copy is errored or closed).
    fn behind(&self) -> f64 {
        -self.controller.desired_size().unwrap_or(0.0)
    }

    fn close(self) {
        let _ = self.controller.close();
    }

    fn fail(&self, why: &str) {
        // (Erroring a stream that is no longer readable does nothing.)
        self.controller.error_with_e(&js_sys::Error::new(why));
    }
}

/// Resolves after `ms` milliseconds; `false` at once in a global without timers (none is
/// known), where nothing can wait.
async fn sleep(ms: u32) -> bool {
    match sleep_ms(ms) {
        Some(timer) => wasm_bindgen_futures::JsFuture::from(timer).await.is_ok(),
        None => false,
    }
}

#[wasm_bindgen(inline_js = r#"
export function error_on_rejection(promise, controller) {
  promise.catch((e) => { try { controller.error(e); } catch (_) { /* already closed */ } });
}
export function sleep_ms(ms) {
  return typeof setTimeout === 'function' ? new Promise((r) => setTimeout(r, ms)) : undefined;
}"#)]
extern "C" {
    /// Errors `controller`'s stream when `promise` rejects (and handles the rejection).
    fn error_on_rejection(promise: &Promise, controller: &ReadableStreamDefaultController);
    /// A promise resolved after `ms` milliseconds (`undefined` where there are no timers).
    fn sleep_ms(ms: u32) -> Option<Promise>;
}

thread_local! {
    /// A rejection handler that does nothing (one for the whole module: it is never freed).
    static NOTHING: Closure<dyn FnMut(JsValue)> = Closure::new(|_| {});
}

/// Marks `promise`'s rejection as handled (its result is not needed).
pub(crate) fn ignore_rejection(promise: &Promise) {
    NOTHING.with(|f| {
        let _ = promise.catch(f);
    });
}
