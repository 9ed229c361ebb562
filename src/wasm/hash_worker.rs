//! Hashing on another thread: a load's integrity checks hand the bytes of each weight file to
//! the hashing worker (`js/hash-worker.js`, this module's own wasm in a worker; its page side
//! is `js/hash-client.js`), which hashes them while this thread converts and uploads. A copy
//! of each byte is what that costs here (a memcpy into a 1 MiB batch), not SHA-2's ~300 MB/s
//! of wasm: on a machine with a second core the check is hidden behind the load.
//!
//! The worker is made by the factory the package's entry registers ([`set_hash_worker`];
//! index.js and worker.js do), one per load that has digests to check, started as the load
//! starts. Where there is no factory (webmamba.js used directly), or the worker does not start
//! within [`READY_MS`] (a CSP without `worker-src`, an engine with no nested workers), the
//! checks hash on this thread as before ([`FileCheck`] alone). A worker that fails mid-file
//! fails that file's read (`Io`), never passes it; so does one that stops answering while the
//! load waits on it (the load's stall timeout).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use js_sys::{Array, Function, Promise, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use crate::error::{Error, Result};
use crate::load::integrity::{Algorithm, FileCheck, Hashers};
use crate::wasm::http::io;

/// How long a load waits for its hashing worker to start before hashing on its own thread.
const READY_MS: u32 = 10_000;

#[wasm_bindgen(module = "/js/hash-client.js")]
extern "C" {
    type HashClient;
    /// `stall_ms` (0: 30 s): the longest wait with no message from the worker.
    #[wasm_bindgen(constructor)]
    fn new(factory: &Function, stall_ms: u32) -> HashClient;
    #[wasm_bindgen(method)]
    fn ready(this: &HashClient, ms: u32) -> Promise;
    #[wasm_bindgen(method)]
    fn start(this: &HashClient, algs: Array) -> u32;
    /// `bytes` is a view of wasm memory, copied before the call returns.
    #[wasm_bindgen(method, catch)]
    fn push(this: &HashClient, id: u32, bytes: &[u8]) -> std::result::Result<JsValue, JsValue>;
    #[wasm_bindgen(method)]
    fn finish(this: &HashClient, id: u32) -> Promise;
    #[wasm_bindgen(method, js_name = drop)]
    fn drop_stream(this: &HashClient, id: u32);
    #[wasm_bindgen(method)]
    fn close(this: &HashClient);
}

thread_local! {
    /// What makes a hashing worker (`() => new Worker(…)`), once the package's entry gave it.
    static FACTORY: RefCell<Option<Function>> = const { RefCell::new(None) };
}

/// Registers what makes the hashing worker (`() => new Worker(new URL('./hash-worker.js',
/// import.meta.url), { type: 'module' })`), or with `undefined` forgets it: loads then hash
/// on their own thread. Called by the package's entry; not part of the documented API.
#[wasm_bindgen(js_name = setHashWorker)]
pub fn set_hash_worker(factory: Option<Function>) {
    FACTORY.with(|f| *f.borrow_mut() = factory);
}

/// SHA-2 hashes of one byte stream, for the hashing worker (`js/hash-worker.js`).
#[wasm_bindgen]
pub struct HashStream(Hashers);

#[wasm_bindgen]
impl HashStream {
    /// Hashes with each of `algs` (`"sha256"`, `"sha384"`, `"sha512"`).
    #[wasm_bindgen(constructor)]
    pub fn new(algs: Vec<String>) -> std::result::Result<HashStream, JsValue> {
        let algs: Option<Vec<Algorithm>> = algs.iter().map(|a| Algorithm::from_name(a)).collect();
        let algs = algs.ok_or_else(|| JsValue::from_str("unknown hash algorithm"))?;
        Ok(HashStream(Hashers::new(&algs)))
    }

    /// The next bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The digests, one `Uint8Array` per algorithm, in the order of their names' sort
    /// (sha256, sha384, sha512).
    pub fn finish(self) -> Array {
        self.0.finish().iter().map(|(_, d)| JsValue::from(Uint8Array::from(d.as_slice()))).collect()
    }
}

/// One load's hashing worker, while it starts and once it has.
pub(crate) struct HashWorker {
    client: Rc<HashClient>,
    /// `Some(ready)` once the start was awaited.
    ready: Cell<Option<bool>>,
}

impl HashWorker {
    /// Starts a worker, where the package's entry registered a factory. A wait on it with no
    /// word from it for `stall_ms` (the load's `stallTimeoutMs`; 0: 30 s) fails the file.
    pub fn start(stall_ms: u32) -> Option<Self> {
        let factory = FACTORY.with(|f| f.borrow().clone())?;
        Some(HashWorker { client: Rc::new(HashClient::new(&factory, stall_ms)), ready: Cell::new(None) })
    }

    /// `check`, its hashing handed to the worker when the worker has started.
    pub async fn offload(&self, mut check: FileCheck, file: &str) -> Check {
        let ready = match self.ready.get() {
            Some(ready) => ready,
            None => {
                let ready = JsFuture::from(self.client.ready(READY_MS)).await.is_ok_and(|v| v.is_truthy());
                self.ready.set(Some(ready));
                ready
            }
        };
        if !ready {
            return Check { check, job: None };
        }
        let algs = check.hash_elsewhere();
        let names: Array = algs.iter().map(|a| JsValue::from_str(a.name())).collect();
        let id = self.client.start(names);
        let job = Job { client: self.client.clone(), id, algs, file: file.to_string(), done: false };
        Check { check, job: Some(job) }
    }
}

impl Drop for HashWorker {
    fn drop(&mut self) {
        self.client.close();
    }
}

/// A file's check, hashed here or by the worker.
pub(crate) struct Check {
    check: FileCheck,
    job: Option<Job>,
}

/// A stream the worker hashes.
struct Job {
    client: Rc<HashClient>,
    id: u32,
    /// The stream's algorithms, sorted (the order of the worker's digests).
    algs: Vec<Algorithm>,
    file: String,
    done: bool,
}

impl Check {
    /// A check hashed on this thread.
    pub fn here(check: FileCheck) -> Self {
        Check { check, job: None }
    }

    /// The next bytes of the file; waits while the worker is too far behind.
    pub async fn update(&mut self, bytes: &[u8]) -> Result<()> {
        self.check.update(bytes)?;
        if let Some(job) = &self.job {
            let wait = job.client.push(job.id, bytes).map_err(|e| io(&job.file, &e))?;
            if let Ok(wait) = wait.dyn_into::<Promise>() {
                JsFuture::from(wait).await.map_err(|e| io(&job.file, &e))?;
            }
        }
        Ok(())
    }

    /// Ends the check once the whole file went through [`Self::update`].
    pub async fn finish(self) -> Result<()> {
        let Some(mut job) = self.job else { return self.check.finish() };
        let digests = JsFuture::from(job.client.finish(job.id)).await;
        job.done = true;
        let digests = digests.map_err(|e| io(&job.file, &e))?;
        let digests: Vec<Vec<u8>> =
            Array::from(&digests).iter().map(|d| Uint8Array::new(&d).to_vec()).collect();
        if digests.len() != job.algs.len() {
            return Err(Error::Io {
                path: job.file.clone(),
                reason: format!("the hashing worker gave {} digests for {}", digests.len(), job.algs.len()),
            });
        }
        let got: Vec<(Algorithm, Vec<u8>)> = job.algs.iter().copied().zip(digests).collect();
        self.check.finish_with(&got)
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if !self.done {
            self.client.drop_stream(self.id);
        }
    }
}
