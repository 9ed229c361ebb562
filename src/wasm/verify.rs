//! [`Digests`]: what each file of a browser load must hash to ([`crate::load::integrity`]) —
//! the caller's `integrity` option, and for a URL in the Hub's layout the host's SHA-256 of
//! each LFS file: its tree listing's `lfs.oid` (fetched once per load, at most
//! [`MAX_JSON_BYTES`], under the stall timer) and the `ETag` of the file's response.
//!
//! The listing is advisory: a folder without one (a 404, an HTML page) has no digests from it,
//! and any other failure (unreachable, too large, not JSON) is a warning, never a failed load —
//! a host that published nothing is not checked either, and the ETags still are.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::load::MAX_JSON_BYTES;
use crate::load::integrity::{Expected, FileCheck, Integrity, Publisher, hub};
use crate::wasm::body::Body;
use crate::wasm::hash_worker::{Check, HashWorker};
use crate::wasm::http::{fetch, missing};
use crate::wasm::reader::Opened;

/// The name the listing goes by in errors and warnings.
const LISTING: &str = "the Hub's file listing";

/// What each file must hash to (see the module doc).
pub(crate) struct Digests {
    /// The caller's `integrity` option.
    pub option: Integrity,
    /// `(listing URL, subfolder)` for a folder URL in the Hub's layout.
    hub: Option<(String, String)>,
    /// The listing's SHA-256 of each LFS file, by name.
    listing: RefCell<HashMap<String, [u8; 32]>>,
    /// The names of the files the listing has in the folder, once read.
    names: RefCell<Option<Vec<String>>>,
    /// Whether the listing was asked for already (a load started again does not ask twice).
    asked: Cell<bool>,
    /// No bytes for this long is a stalled download (`stallTimeoutMs`).
    stall_ms: u32,
    /// The hashing worker of this load, where it may check something and the package's entry
    /// registered one ([`crate::wasm::hash_worker`]).
    worker: Option<HashWorker>,
}

impl Digests {
    /// For a load with `option`; `url`: the folder's absolute URL, when it is one.
    pub fn new(option: Integrity, url: Option<&str>, stall_ms: u32) -> Self {
        let hub = url.and_then(|u| Some((hub::tree_url(u)?, hub::subfolder(u))));
        // Started now, so that it is ready by the time the weights stream.
        let worker = (!option.is_empty() || hub.is_some()).then(|| HashWorker::start(stall_ms)).flatten();
        let (listing, names) = Default::default();
        Digests { option, hub, listing, names, asked: Cell::new(false), stall_ms, worker }
    }

    /// Fetches the Hub's tree listing (Hub-layout URLs, once); its URL and a warning when it
    /// could not be used although the server has one.
    pub async fn fetch_listing(&self) -> Option<(String, String)> {
        let (url, subfolder) = self.hub.as_ref()?;
        if self.asked.replace(true) {
            return None;
        }
        let why = match read_listing(url, self.stall_ms).await {
            Ok(json) => match hub::lfs_digests(&json, subfolder) {
                Ok(digests) => {
                    *self.listing.borrow_mut() = digests;
                    *self.names.borrow_mut() = hub::file_names(&json, subfolder).ok();
                    return None;
                }
                Err(why) => why,
            },
            Err(Error::Io { reason, .. }) if missing(&reason) => return None,
            Err(e) => e.to_string(),
        };
        Some((
            url.clone(),
            format!("{LISTING} could not be read ({why}): files are checked against their ETags only"),
        ))
    }

    /// The names of the folder's files in the Hub's listing, when it was read.
    pub fn listed(&self) -> Option<Vec<String>> {
        self.names.borrow().clone()
    }

    /// The check of file `name` (opened as `opened`): the option's entry, and the host's
    /// SHA-256 — the listing's, or where the listing names none (offline, no listing) and the
    /// URL has the Hub's layout, the one its response's ETag carries (the listing is the Hub's
    /// own record of the LFS file; an ETag is only the last server's word). `None` when nothing
    /// is known: the file is read unhashed.
    pub fn check(&self, name: &str, opened: &Opened) -> Option<FileCheck> {
        let mut expected: Vec<Expected> = self.option.get(name).cloned().into_iter().collect();
        expected.extend(self.published(name, opened.etag));
        FileCheck::new(name, expected)
    }

    /// The host's SHA-256 of file `name` (see [`Self::check`]); `etag`: the one its response's
    /// ETag carries.
    pub fn published(&self, name: &str, etag: Option<[u8; 32]>) -> Option<Expected> {
        match self.listing.borrow().get(name).copied() {
            Some(digest) => Some(Expected::sha256(digest, Publisher::HubListing)),
            None => etag.filter(|_| self.hub.is_some()).map(|d| Expected::sha256(d, Publisher::ETag)),
        }
    }

    /// A weight file's `check` for its data pass: hashed by the load's hashing worker where it
    /// started, else here.
    pub async fn offload(&self, check: FileCheck, name: &str) -> Check {
        match &self.worker {
            Some(worker) => worker.offload(check, name).await,
            None => Check::here(check),
        }
    }
}

/// The listing's bytes: at most [`MAX_JSON_BYTES`] (by its `Content-Length`, and as it streams).
async fn read_listing(url: &str, stall_ms: u32) -> Result<Vec<u8>> {
    let fetched = fetch(url, "GET", None, stall_ms).await?;
    let too_big = |n: u64| Error::Io {
        path: LISTING.into(),
        reason: format!("{n} bytes or more; at most {MAX_JSON_BYTES} are read"),
    };
    let mut body = Body::new(&fetched.response, Some(fetched.abort), stall_ms, LISTING)?;
    if let Some(n) =
        crate::wasm::http::header_u64(&fetched.response, "content-length").filter(|&n| n > MAX_JSON_BYTES)
    {
        return Err(too_big(n));
    }
    let mut out = Vec::new();
    while let Some(chunk) = body.chunk(LISTING).await? {
        let bytes = crate::wasm::args::uint8_array(&chunk).ok_or_else(|| Error::Io {
            path: LISTING.into(),
            reason: "the body gave something other than bytes".into(),
        })?;
        let n = out.len() as u64 + bytes.length() as u64;
        if n > MAX_JSON_BYTES {
            return Err(too_big(n));
        }
        out.extend(bytes.to_vec());
    }
    Ok(out)
}
