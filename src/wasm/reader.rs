//! [`Opened`]: one file of a [`super::web_source::WebSource`] being read from its first byte —
//! a response body (network or offline cache) or a picked file's `Blob` — with what is known
//! of it before its bytes: its size, the SHA-256 its host published in an `ETag`, whether it
//! comes from the offline cache, and the cache write fed as it streams. The cache's copy is
//! kept only once the reader is [`Reader::commit`]ted (read to its end and checked). A [`Part`]
//! is one span of a file, or the whole file where that is what came. Also: a whole-file answer
//! opened ([`whole`]), and the picked files of `fromFiles` ([`picked`]).

use js_sys::{Promise, Reflect, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};
use web_sys::{Blob, Cache, File};

use crate::error::{Error, Result};
use crate::wasm::body::{Body, Tap};
use crate::wasm::http::{Fetched, etag_sha256, header_u64, io};

/// Bytes read from a picked file at a time.
const BLOB_PIECE: f64 = (4 << 20) as f64;

/// A file being read from its start.
pub(crate) enum Reader {
    /// A response body (network or cache), after `head`: bytes already read from it (by a
    /// header read), given first.
    Stream { body: Body, head: Vec<u8> },
    /// A picked file, `BLOB_PIECE` bytes at a time.
    Blob { blob: Blob, at: f64 },
}

/// What [`super::web_source::WebSource::open_part`] opened.
pub(crate) enum Part {
    /// The bytes asked for, from the first, and the SHA-256 its answer's ETag carries, if any
    /// (as [`Opened::etag`]).
    Range(Reader, Option<[u8; 32]>),
    /// The whole file, from byte 0.
    Whole(Opened),
}

/// An opened file: its reader, its size when known, and the pending cache write.
pub(crate) struct Opened {
    pub reader: Reader,
    pub size: Option<u64>,
    pub cache_write: Option<Promise>,
    /// The SHA-256 the response's `X-Linked-Etag` or `ETag` carries (64 hex digits), if any;
    /// only a Hub-layout URL's is taken as the file's digest.
    pub etag: Option<[u8; 32]>,
}

impl Reader {
    /// The next bytes of the file, `None` at its end.
    pub async fn next(&mut self, name: &str) -> Result<Option<Vec<u8>>> {
        match self {
            Reader::Stream { body, head } => {
                if !head.is_empty() {
                    return Ok(Some(std::mem::take(head)));
                }
                let Some(value) = body.chunk(name).await? else { return Ok(None) };
                // Any realm's Uint8Array: Firefox's body chunks are not always this realm's.
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

    /// The file was read to its end and passed its checks: the offline cache may keep its copy
    /// (a reader dropped without this gives the copy up, so it is never stored).
    pub fn commit(&mut self) {
        if let Reader::Stream { body, .. } = self {
            body.commit();
        }
    }

    /// The file failed: the offline cache's copy is given up now (see [`Body::abandon`]).
    pub fn abandon(&mut self) {
        if let Reader::Stream { body, .. } = self {
            body.abandon();
        }
    }
}

/// The first `len` bytes of `reader` (fewer if the file is shorter). Everything read stays in
/// a stream's `head`, to be given again by the next reads: the data pass can go on from here.
pub(crate) async fn first_bytes(reader: &mut Reader, len: u64, name: &str) -> Result<Vec<u8>> {
    let mut read = Vec::new();
    while (read.len() as u64) < len {
        match reader.next(name).await? {
            Some(piece) => read.extend(piece),
            None => break,
        }
    }
    let first = read[..read.len().min(len as usize)].to_vec();
    if let Reader::Stream { head, .. } = reader {
        *head = read;
    }
    Ok(first)
}

pub(crate) async fn blob_bytes(blob: &Blob, name: &str) -> Result<Vec<u8>> {
    let buffer = wasm_bindgen_futures::JsFuture::from(blob.array_buffer()).await.map_err(|e| io(name, &e))?;
    Ok(Uint8Array::new(&buffer).to_vec())
}

/// A whole-file answer, opened: its body (fed to the offline cache when it is on) and size.
pub(crate) fn whole(
    cache: Option<&Cache>,
    url: &str,
    fetched: Fetched,
    stall_ms: u32,
    name: &str,
) -> Result<Opened> {
    let size = header_u64(&fetched.response, "content-length");
    let mut body = Body::new(&fetched.response, Some(fetched.abort), stall_ms, name)?;
    let cache_write = cache.and_then(|cache| Tap::start(cache, url, &fetched.response)).map(|(tap, put)| {
        body.tap(tap);
        put
    });
    let etag = etag_sha256(&fetched.response);
    Ok(Opened { reader: Reader::Stream { body, head: Vec::new() }, size, cache_write, etag })
}

/// Picked files: a `FileList` or an array of `File`s. Where two have the same name (a folder
/// with subfolders), the one nearest the top wins.
pub(crate) fn picked(files: &JsValue) -> Result<Vec<File>> {
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
    Ok(picked)
}
