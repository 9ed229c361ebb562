//! The HTTP side of [`super::web_source`]: `fetch` with an optional Range, under an
//! `AbortController` (aborted when the request is dropped before its body is handed on, or when
//! no answer comes for the stall timeout), its failures as `Io` errors (a status, an HTML page
//! standing in for a missing file, or — for the bare "Failed to fetch" a browser gives — what
//! follow-up requests tell: a redirect loop, a CORS block, an unreachable server), and the
//! headers the offline cache compares and the integrity check reads.

use std::ops::Range;

use js_sys::Promise;
use wasm_bindgen::prelude::*;
use web_sys::{AbortController, Request, RequestInit, RequestMode, RequestRedirect, Response, ResponseType};

use crate::error::{Error, Result};
use crate::wasm::watch::{Waited, within};

#[wasm_bindgen]
extern "C" {
    /// `globalThis.fetch`: the same in a window and in a worker.
    #[wasm_bindgen(js_name = fetch, catch)]
    fn global_fetch(request: &Request) -> std::result::Result<Promise, JsValue>;
}

/// Why a file is not there: an HTML page answered for it. No model file is HTML, and servers
/// for single-page apps (Vite's dev server, many static hosts) answer every missing path with
/// their `index.html` and status 200.
const HTML_PAGE: &str = "the server answered with an HTML page, not the file (its page for a missing file?)";

/// Whether an `Io` reason from [`fetch`] means the file is not there.
pub(crate) fn missing(reason: &str) -> bool {
    reason.starts_with("HTTP 404") || reason == HTML_PAGE
}

/// A request's `AbortController`: aborted on drop (which ends the download and errors its
/// body), so a request given up on any path stops at once. After the body was read to its end
/// the abort does nothing.
pub(crate) struct Abort(AbortController);

impl Drop for Abort {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// An answered request: the response, and the controller that ends its download.
pub(crate) struct Fetched {
    pub response: Response,
    pub abort: Abort,
}

/// `fetch(url)` with `method`, asking for the bytes `range` when given; non-2xx statuses
/// are `Io` errors starting "HTTP <status>", an HTML page is [`HTML_PAGE`]. No answer within
/// `stall_ms` is an `Io` error saying "stalled"; a request that fails says why where follow-up
/// requests can tell ([`diagnose`]).
pub(crate) async fn fetch(
    url: &str,
    method: &str,
    range: Option<Range<u64>>,
    stall_ms: u32,
) -> Result<Fetched> {
    let init = RequestInit::new();
    init.set_method(method);
    if let Some(range) = range {
        let headers = web_sys::Headers::new().map_err(|e| io(url, &e))?;
        let last = range.end.max(range.start + 1) - 1;
        headers.set("Range", &format!("bytes={}-{last}", range.start)).map_err(|e| io(url, &e))?;
        init.set_headers(&headers);
    }
    let (response, abort) = match send(url, &init, stall_ms).await? {
        (Waited::Done(r), abort) => (r, abort),
        (Waited::Failed(e), abort) => {
            drop(abort);
            let why = diagnose(url, stall_ms).await;
            return Err(Error::Io { path: url.into(), reason: format!("{why} ({})", message(&e)) });
        }
        (Waited::Stalled, _) => {
            return Err(Error::Io {
                path: url.into(),
                reason: format!("stalled: no answer for {stall_ms} ms (0 bytes read)"),
            });
        }
    };
    let response: Response = response.dyn_into().map_err(|e| io(url, &e))?;
    if !response.ok() {
        return Err(Error::Io {
            path: url.into(),
            reason: format!("HTTP {} {}", response.status(), response.status_text()),
        });
    }
    let html = response
        .headers()
        .get("content-type")
        .ok()
        .flatten()
        .is_some_and(|t| t.trim_start().get(..9).is_some_and(|m| m.eq_ignore_ascii_case("text/html")));
    if html {
        return Err(Error::Io { path: url.into(), reason: HTML_PAGE.into() });
    }
    Ok(Fetched { response, abort })
}

/// Starts `fetch(url, init)` under a new controller and waits at most `stall_ms` for its answer.
async fn send(url: &str, init: &RequestInit, stall_ms: u32) -> Result<(Waited, Abort)> {
    let abort = Abort(AbortController::new().map_err(|e| io(url, &e))?);
    init.set_signal(Some(&abort.0.signal()));
    let request = Request::new_with_str_and_init(url, init).map_err(|e| io(url, &e))?;
    let promise = global_fetch(&request).map_err(|e| io(url, &e))?;
    Ok((within(&promise, stall_ms).await, abort))
}

/// What a failed request ran into, told by two bodiless follow-up requests (a browser says only
/// "Failed to fetch", whatever happened): not following redirects, an opaque redirect means the
/// failure lies after a redirect; an opaque (`no-cors`) request that gets an answer means the
/// server answers but does not let this page read it (CORS).
async fn diagnose(url: &str, stall_ms: u32) -> &'static str {
    let probe = async |redirect: RequestRedirect, mode: RequestMode| -> Option<Response> {
        let init = RequestInit::new();
        init.set_method("HEAD");
        init.set_redirect(redirect);
        init.set_mode(mode);
        match send(url, &init, stall_ms).await.ok()?.0 {
            Waited::Done(r) => r.dyn_into().ok(),
            _ => None,
        }
    };
    let unredirected = probe(RequestRedirect::Manual, RequestMode::Cors).await;
    let opaque = async || probe(RequestRedirect::Follow, RequestMode::NoCors).await.is_some();
    match unredirected.map(|r| r.type_()) {
        Some(ResponseType::Opaqueredirect) if opaque().await => {
            "blocked by CORS after a redirect: the server it redirects to answers, but does not let \
             this page read the file (serve it with the header Access-Control-Allow-Origin, or from \
             this page's own origin)"
        }
        Some(ResponseType::Opaqueredirect) => {
            "redirect loop: the server redirects again and again (too many redirects)"
        }
        Some(_) => "the request failed, though the server answers (a dropped connection?)",
        None if opaque().await => {
            "blocked by CORS: the server answers, but does not let this page read the file (serve it \
             with the header Access-Control-Allow-Origin, or from this page's own origin)"
        }
        None => "network error: the server could not be reached or dropped the connection",
    }
}

/// Whether a cached response and a fresh `HEAD` describe the same file: equal ETags when both
/// have one, equal sizes when both have one.
pub(crate) fn same_file(cached: &Response, head: &Response) -> bool {
    let get = |r: &Response, h: &str| r.headers().get(h).ok().flatten();
    let etag = |r: &Response| get(r, "etag").or_else(|| get(r, "x-linked-etag"));
    let agree = |a: Option<String>, b: Option<String>| a.zip(b).is_none_or(|(a, b)| a == b);
    agree(etag(cached), etag(head)) && agree(get(cached, "content-length"), get(head, "content-length"))
}

/// The file size a 206 answer to a request for bytes from `start` gives (`Content-Range: bytes
/// <start>-<end>/<size>`; `None` when the header is hidden, as cross-origin servers may). A
/// range that does not start at `start` is an error: its bytes would be read as others.
pub(crate) fn range_total(response: &Response, name: &str, from: u64) -> Result<Option<u64>> {
    let Some(range) = response.headers().get("content-range").ok().flatten() else { return Ok(None) };
    let parsed =
        range.trim().strip_prefix("bytes ").and_then(|r| r.split_once('/')).and_then(|(span, total)| {
            let (start, end) = span.split_once('-')?;
            let (start, end) = (start.trim().parse::<u64>().ok()?, end.trim().parse::<u64>().ok()?);
            let total = total.trim().parse::<u64>().ok();
            (start == from && total.is_none_or(|t| end < t)).then_some(total)
        });
    parsed.ok_or_else(|| Error::Io {
        path: name.into(),
        reason: format!(
            "the server answered the request for the file's bytes from {from} with Content-Range {range:?}"
        ),
    })
}

/// The SHA-256 a response's `X-Linked-Etag` (the Hub's, for LFS files) or else `ETag` carries,
/// when it is one ([`crate::load::integrity::sri::etag_sha256`]: 64 hex digits, not weak).
/// Cross-origin, only headers the server exposes can be read (the Hub exposes both).
pub(crate) fn etag_sha256(response: &Response) -> Option<[u8; 32]> {
    let get = |h: &str| response.headers().get(h).ok().flatten();
    let linked = get("x-linked-etag").and_then(|v| crate::load::integrity::sri::etag_sha256(&v));
    linked.or_else(|| get("etag").and_then(|v| crate::load::integrity::sri::etag_sha256(&v)))
}

pub(crate) fn header_u64(response: &Response, name: &str) -> Option<u64> {
    response.headers().get(name).ok().flatten().and_then(|v| v.parse().ok())
}

pub(crate) fn io(path: &str, e: &JsValue) -> Error {
    Error::Io { path: path.into(), reason: message(e) }
}

/// A JS error's message (or its string form). Its `name` and `message` are read as properties:
/// an error from another realm (an iframe, a sandbox) is no `instanceof` this realm's `Error`.
pub(crate) fn message(e: &JsValue) -> String {
    if let Some(text) = e.as_string() {
        return text;
    }
    let field = |f: &str| js_sys::Reflect::get(e, &f.into()).ok().and_then(|v| v.as_string());
    match (field("name"), field("message")) {
        (Some(name), Some(message)) if name != "Error" && !message.is_empty() => format!("{name}: {message}"),
        (_, Some(message)) if !message.is_empty() => message,
        _ => format!("{e:?}"),
    }
}

/// The header of the cache's entry for a file the folder does not have (a 404 remembered).
const MISSING_HEADER: &str = "x-webmamba-missing";

pub(crate) fn is_missing_marker(cached: &Response) -> bool {
    cached.headers().has(MISSING_HEADER).unwrap_or(false)
}

/// Keeps in `cache` that `url` is missing (an empty entry with [`MISSING_HEADER`]).
pub(crate) async fn remember_missing(cache: &web_sys::Cache, url: &str) -> std::result::Result<(), JsValue> {
    let headers = web_sys::Headers::new()?;
    headers.set(MISSING_HEADER, "1")?;
    let init = web_sys::ResponseInit::new();
    init.set_headers(&headers);
    let marker = Response::new_with_opt_str_and_init(Some(""), &init)?;
    wasm_bindgen_futures::JsFuture::from(cache.put_with_str(url, &marker)).await.map(drop)
}
