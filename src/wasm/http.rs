//! The HTTP side of [`super::web_source`]: `fetch` with an optional Range, its failures as
//! `Io` errors (a status, or an HTML page standing in for a missing file), and the headers the
//! offline cache compares.

use js_sys::Promise;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Request, RequestInit, Response};

use crate::error::{Error, Result};

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

/// `fetch(url)` with `method`, asking for the first `range` bytes when given; non-2xx statuses
/// are `Io` errors starting "HTTP <status>", an HTML page is [`HTML_PAGE`].
pub(crate) async fn fetch(url: &str, method: &str, range: Option<u64>) -> Result<Response> {
    let init = RequestInit::new();
    init.set_method(method);
    if let Some(len) = range {
        let headers = web_sys::Headers::new().map_err(|e| io(url, &e))?;
        headers.set("Range", &format!("bytes=0-{}", len.max(1) - 1)).map_err(|e| io(url, &e))?;
        init.set_headers(&headers);
    }
    let request = Request::new_with_str_and_init(url, &init).map_err(|e| io(url, &e))?;
    let promise = global_fetch(&request).map_err(|e| io(url, &e))?;
    let response: Response =
        JsFuture::from(promise).await.map_err(|e| io(url, &e))?.dyn_into().map_err(|e| io(url, &e))?;
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
    Ok(response)
}

/// Whether a cached response and a fresh `HEAD` describe the same file: equal ETags when both
/// have one, equal sizes when both have one.
pub(crate) fn same_file(cached: &Response, head: &Response) -> bool {
    let get = |r: &Response, h: &str| r.headers().get(h).ok().flatten();
    let etag = |r: &Response| get(r, "etag").or_else(|| get(r, "x-linked-etag"));
    let agree = |a: Option<String>, b: Option<String>| a.zip(b).is_none_or(|(a, b)| a == b);
    agree(etag(cached), etag(head)) && agree(get(cached, "content-length"), get(head, "content-length"))
}

pub(crate) fn header_u64(response: &Response, name: &str) -> Option<u64> {
    response.headers().get(name).ok().flatten().and_then(|v| v.parse().ok())
}

pub(crate) fn io(path: &str, e: &JsValue) -> Error {
    Error::Io { path: path.into(), reason: message(e) }
}

/// A JS error's message (or its string form).
/// An error from another realm (an iframe, a sandbox) is no `instanceof` this realm's `Error`:
/// its `name` and `message` are read as properties.
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
