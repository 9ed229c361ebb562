//! The offline cache's storage: the Cache API cache [`CACHE_NAME`] that holds downloaded model
//! files (whole responses, keyed by URL), opened where the context has one, and emptied of a
//! folder's files by `Model.clearCache`. What goes in and out of it is
//! [`super::web_source::WebSource`]'s.

use js_sys::Reflect;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Cache, Request, Response};

use crate::error::Result;
use crate::wasm::http::{io, is_missing_marker};

/// The Cache API cache that holds downloaded model files.
pub const CACHE_NAME: &str = "webmamba-v1";

/// Deletes every cached file under `base` (and the 404s remembered there) — or where `base` is
/// a GGUF file's URL, that file and the other parts of its split set; resolves to how many
/// files there were.
pub async fn clear_cache(base: &str) -> Result<u32> {
    let Some(cache) = open_cache().await else { return Ok(0) };
    let gguf: Option<Vec<String>> = crate::wasm::gguf_choice::split_url(base).map(|(folder, name)| {
        let parts = crate::load::gguf::open::part_names(&name).unwrap_or_else(|_| vec![name]);
        parts.into_iter().map(|n| absolute(format!("{folder}{n}"))).collect()
    });
    let base = absolute(if base.ends_with('/') { base.to_string() } else { format!("{base}/") });
    let keys = JsFuture::from(cache.keys()).await.map_err(|e| io(&base, &e))?;
    let mut deleted = 0;
    for key in js_sys::Array::from(&keys).iter() {
        let Ok(request) = key.dyn_into::<Request>() else { continue };
        let url = request.url();
        if gguf.as_ref().map_or(url.starts_with(&base), |urls| urls.contains(&url)) {
            // A remembered 404 is no copy of a file: removed, not counted.
            let entry = JsFuture::from(cache.match_with_request(&request)).await.ok();
            let marker =
                entry.and_then(|e| e.dyn_into::<Response>().ok()).is_some_and(|r| is_missing_marker(&r));
            let gone = JsFuture::from(cache.delete_with_request(&request)).await;
            deleted += (gone.is_ok_and(|v| v.is_truthy()) && !marker) as u32;
        }
    }
    Ok(deleted)
}

/// The Cache API cache, where the context has one (secure contexts only).
pub(crate) async fn open_cache() -> Option<Cache> {
    let caches = Reflect::get(&js_sys::global(), &"caches".into()).ok().filter(|c| !c.is_undefined())?;
    let caches: web_sys::CacheStorage = caches.dyn_into().ok()?;
    JsFuture::from(caches.open(CACHE_NAME)).await.ok()?.dyn_into().ok()
}

/// `url` made absolute against the page (or worker) location.
pub(crate) fn absolute(url: String) -> String {
    let href = Reflect::get(&js_sys::global(), &"location".into())
        .and_then(|l| Reflect::get(&l, &"href".into()))
        .ok()
        .and_then(|h| h.as_string());
    href.and_then(|h| web_sys::Url::new_with_base(&url, &h).ok()).map_or(url, |u| u.href())
}
