//! A file's header read as a growing prefix (a GGUF header: metadata and a vocabulary of up to
//! megabytes before the tensor infos, its length unknown until read), and the file's data pass
//! going on from that prefix: the prefix is kept ([`WebSource::keep_prefix`]) and the pass asks
//! only for the rest of the file ([`WebSource::open_after`]), so the header's bytes cross the
//! network once however large it is.
//!
//! The rest's answer is joined after the prefix into one whole-file response (`joined`): the
//! data pass, its integrity check (which sees the whole file in order, from byte 0) and the
//! offline cache (which stores whole files, under the file's URL) take it as any whole-file
//! answer. At least the file's last byte is asked for, so that answer always comes with the
//! file's headers as they are now (its ETag, its size).

use std::ops::Range;

use js_sys::Uint8Array;
use wasm_bindgen::prelude::*;
use web_sys::{File, Response};

use crate::error::{Error, Result};
use crate::wasm::body::Body;
use crate::wasm::http::{Fetched, fetch, io, range_total};
use crate::wasm::reader::{Opened, Reader, blob_bytes, first_bytes, whole};
use crate::wasm::web_source::{Place, WebSource};

#[wasm_bindgen(inline_js = r#"
export function joined(head, response, size) {
  const reader = response.body.getReader();
  let first = head.length > 0 ? head : null;
  const body = new ReadableStream({
    async pull(controller) {
      if (first !== null) {
        controller.enqueue(first);
        first = null;
        return;
      }
      const { done, value } = await reader.read();
      if (done) controller.close();
      else controller.enqueue(value);
    },
    cancel(why) { return reader.cancel(why); },
  }, { highWaterMark: 0 });
  const headers = new Headers(response.headers);
  headers.delete('content-range');
  headers.set('content-length', String(size));
  return new Response(body, { status: 200, statusText: 'OK', headers });
}"#)]
extern "C" {
    /// A whole-file response of `size` bytes: `head` (the file's first bytes), then the body of
    /// `response` (a 206 answer for the rest), with `response`'s headers but its range's.
    #[wasm_bindgen(catch)]
    fn joined(head: &Uint8Array, response: &Response, size: f64) -> std::result::Result<Response, JsValue>;
}

impl WebSource {
    /// The names of the folder's files where they are known: the picked files, or the Hub's
    /// tree listing of a folder URL in its layout (once read).
    pub fn names(&self) -> Option<Vec<String>> {
        match &self.place {
            Place::Files(files) => Some(files.iter().map(File::name).collect()),
            Place::Url { .. } => self.digests.listed(),
        }
    }

    /// Bytes `range` of `name` (of `size` bytes), to grow a prefix read from byte 0: a picked
    /// file's slice or a Range request — or, where the file's bytes come from the offline cache
    /// or a kept whole-file answer, read again from there. A server that ignores Range answers
    /// with the whole file: kept for the data pass, as a header's first read keeps it.
    pub async fn read_more(&self, name: &str, range: Range<u64>, size: u64) -> Result<Vec<u8>> {
        let (base, cache, stall_ms, kept) = match &self.place {
            Place::Files(_) => {
                let file = self.file(name)?;
                let slice = file.slice_with_f64_and_f64(range.start as f64, range.end as f64);
                return blob_bytes(&slice.map_err(|e| io(name, &e))?, name).await;
            }
            Place::Url { base, cache, stall_ms, kept, .. } => (base, cache, *stall_ms, kept),
        };
        let tail = |head: Vec<u8>| head.get(range.start as usize..).unwrap_or_default().to_vec();
        let local =
            self.from_cache.borrow().contains(name) || kept.borrow().as_ref().is_some_and(|k| k.0 == name);
        if local {
            return Ok(tail(self.read_head(name, range.end).await?.0));
        }
        let url = format!("{base}{name}");
        let fetched = fetch(&url, "GET", Some(range.clone()), stall_ms).await?;
        if fetched.response.status() != 206 {
            let mut opened = whole(cache.as_ref(), &url, fetched, stall_ms, name)?;
            let head = first_bytes(&mut opened.reader, range.end, name).await?;
            let mut slot = kept.borrow_mut();
            if slot.is_none() {
                *slot = Some(Box::new((name.to_string(), opened)));
            }
            return Ok(tail(head));
        }
        changed(name, range_total(&fetched.response, name, range.start)?, size)?;
        let body = Body::new(&fetched.response, Some(fetched.abort), stall_ms, name)?;
        let mut reader = Reader::Stream { body, head: Vec::new() };
        first_bytes(&mut reader, range.end - range.start, name).await
    }

    /// Keeps `prefix`, the first bytes of `name` (of `size` bytes) read for its header, for the
    /// data pass ([`WebSource::open`] goes on from it). Picked files are read where they lie:
    /// nothing is kept for them.
    pub fn keep_prefix(&self, name: &str, prefix: Vec<u8>, size: u64) {
        if let Place::Url { .. } = &self.place {
            self.prefixes.borrow_mut().insert(name.to_string(), (prefix, size));
        }
    }

    /// `name` (of `size` bytes) opened from its start where `prefix`, its first bytes, was read
    /// already: a Range request for the rest (at least the last byte), its answer joined after
    /// the prefix. A server that ignores Range gives the whole file, read from byte 0.
    pub(super) async fn open_after(&self, name: &str, prefix: Vec<u8>, size: u64) -> Result<Opened> {
        let Place::Url { base, cache, stall_ms, .. } = &self.place else {
            return Err(Error::Internal(format!("{name}: a kept prefix of a picked file")));
        };
        let from = (prefix.len() as u64).min(size.saturating_sub(1));
        let url = format!("{base}{name}");
        let fetched = fetch(&url, "GET", Some(from..size), *stall_ms).await?;
        self.from_cache.borrow_mut().remove(name);
        if fetched.response.status() != 206 {
            return whole(cache.as_ref(), &url, fetched, *stall_ms, name);
        }
        changed(name, range_total(&fetched.response, name, from)?, size)?;
        let head = Uint8Array::from(&prefix[..from as usize]);
        let response = joined(&head, &fetched.response, size as f64).map_err(|e| io(name, &e))?;
        whole(cache.as_ref(), &url, Fetched { response, abort: fetched.abort }, *stall_ms, name)
    }
}

/// A file whose size is `now` where its header's read found `size`: changed on the server
/// in between, its bytes not those the header described.
fn changed(name: &str, now: Option<u64>, size: u64) -> Result<()> {
    match now.filter(|&n| n != size) {
        None => Ok(()),
        Some(now) => Err(Error::Gguf {
            file: name.into(),
            reason: format!("the file has {now} bytes now, {size} when its header was read"),
        }),
    }
}
