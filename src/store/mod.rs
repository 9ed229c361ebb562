//! The persistent tier under the in-memory checkpoint cache: records of checkpoints (with a
//! prompt-end's logits) and of key/value pages that outlive the page or the process, shared by
//! every tab of an origin (OPFS) or every process given one folder (`--store DIR`).
//!
//! - A record's name comes from the store fingerprint and its key (`Store::name`); its bytes
//!   repeat both and carry a checksum (`record.rs`), so a damaged, cut, foreign or misnamed
//!   record is a [`Miss`](record::Miss): deleted, and the tokens are computed instead — never a wrong state.
//! - The store fingerprint = the model's fingerprint + how the engine computes (backend, weight
//!   and cache formats): a record is only used by a runtime that would have computed the same
//!   numbers.
//! - One byte budget on disk, least recently used first out (a hit marks its record used).
//! - A failing store never fails a call: reads that fail are misses, writes that fail are
//!   warnings (`Store::take_warnings`), and the session goes on in memory.
//! - Writes are queued (`writer.rs`): awaited by the call that made them, or — in the browser,
//!   `Store::write_in_background` — written after the call has returned; [`Store::flush`]
//!   waits for them.

pub(crate) mod record;
mod writer;

#[cfg(not(target_arch = "wasm32"))]
pub mod folder;

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use crate::cache::keys::Key;
use crate::error::Result;
pub(crate) use record::{Kind, Record};

/// A boxed future that need not be `Send` (a browser's are not).
pub(crate) type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Temporary files (a record being written) end with this; they are never read.
pub(crate) const TEMP_SUFFIX: &str = ".tmp";
/// A temporary this old was left by a writer that died: removed when the budget is enforced.
const STALE_TEMP_MS: u64 = 10 * 60 * 1000;

/// Whether a listed file is one of the store's (a record or a record's temporary): the store
/// never touches other files in its folder.
fn ours(name: &str) -> bool {
    (name.starts_with("ckpt-") || name.starts_with("page-")) && name.contains(".wmrec")
}

/// A file in the store, as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its name.
    pub(crate) name: String,
    /// Its size.
    pub(crate) bytes: u64,
    /// When it was last written or used (milliseconds since 1970).
    pub(crate) used_ms: u64,
}

/// Where the records live: a folder natively, the origin private file system in a browser.
pub trait Backend {
    /// The bytes of `name`; `None` if there is no such record.
    fn read<'a>(&'a self, name: &'a str) -> LocalFuture<'a, Result<Option<Vec<u8>>>>;
    /// Writes `name` whole, such that no reader ever sees part of it.
    fn write<'a>(&'a self, name: &'a str, bytes: &'a [u8]) -> LocalFuture<'a, Result<()>>;
    /// Removes `name` (no error if it is gone).
    fn remove<'a>(&'a self, name: &'a str) -> LocalFuture<'a, Result<()>>;
    /// Every file, records and temporaries.
    fn list(&self) -> LocalFuture<'_, Result<Vec<Entry>>>;
    /// Marks `name` used now.
    fn touch<'a>(&'a self, name: &'a str) -> LocalFuture<'a, Result<()>>;
    /// The time now, in the clock `Entry::used_ms` is in.
    fn now_ms(&self) -> u64;
}

/// The store's settings (`store: { budgetBytes, sparseEvery }`, `--store DIR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreConfig {
    /// Bytes on disk before the least recently used records go.
    pub budget_bytes: u64,
    /// Block checkpoints stored: every `sparse_every`-th block boundary (1: every one).
    /// Prompt-ends are always stored.
    pub sparse_every: usize,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self { budget_bytes: 1 << 30, sparse_every: 1 }
    }
}

/// Records read, written and missed since the store was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Records found and used.
    pub hits: u64,
    /// Records found but unusable (damaged, cut, foreign): each was deleted.
    pub misses: u64,
    /// Records written.
    pub writes: u64,
    /// Records removed to keep within the budget.
    pub evictions: u64,
}

/// What a store counts and remembers, behind one `RefCell` (never borrowed across an await).
#[derive(Default)]
struct Ledger {
    /// Bytes this store believes are on disk (listed at the first enforcement, then counted).
    bytes: Option<u64>,
    stats: StoreStats,
    warnings: Vec<String>,
    /// Records this store wrote, queued or read whole: a page among them need not be written
    /// again.
    known: std::collections::HashSet<(Kind, Key)>,
}

/// The persistent tier: a backend, the fingerprint records must carry, a budget. Cloning it
/// gives another handle on the same store (a background writer holds one: `writer.rs`).
#[derive(Clone)]
pub struct Store {
    backend: Rc<dyn Backend>,
    fingerprint: Key,
    config: StoreConfig,
    ledger: Rc<RefCell<Ledger>>,
    writer: Rc<writer::Writer>,
}

impl Store {
    /// A store over `backend` for a runtime whose `fingerprint` is [`Store::fingerprint`]'s.
    /// Its writes are awaited by the call that makes them until [`Store::write_in_background`].
    pub(crate) fn new(backend: Box<dyn Backend>, fingerprint: Key, config: StoreConfig) -> Self {
        let (ledger, writer) = (Default::default(), Default::default());
        Self { backend: Rc::from(backend), fingerprint, config, ledger, writer }
    }

    /// The fingerprint of a runtime's numbers: the model's weights (`ModelWeights::fingerprint`)
    /// and how the engine computes (e.g. "gpu f16 weights f32 kv", "cpu").
    pub(crate) fn fingerprint(model: &Key, engine: &str) -> Key {
        let mut h = blake3::Hasher::new();
        h.update(b"webmamba/store/v1");
        h.update(model);
        h.update(engine.as_bytes());
        *h.finalize().as_bytes()
    }

    /// The file name of the `kind` record `key` under `fingerprint`.
    pub(crate) fn name(kind: Kind, fingerprint: &Key, key: &Key) -> String {
        let mut h = blake3::Hasher::new();
        h.update(fingerprint);
        h.update(key);
        format!("{}-{}.wmrec", kind.name(), &h.finalize().to_hex()[..40])
    }

    /// The fingerprint its records carry.
    pub(crate) fn fingerprint_of(&self) -> Key {
        self.fingerprint
    }

    /// Whether this store wrote, queued or read the `kind` record `key` (it may have been
    /// evicted or removed since).
    pub(crate) fn knows(&self, kind: Kind, key: &Key) -> bool {
        self.ledger.borrow().known.contains(&(kind, *key))
    }

    /// The settings.
    pub(crate) fn config(&self) -> StoreConfig {
        self.config
    }

    /// What it has done so far.
    pub fn stats(&self) -> StoreStats {
        self.ledger.borrow().stats
    }

    /// Warnings since the last call (failed writes, a full quota): the caller reports them.
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut self.ledger.borrow_mut().warnings)
    }

    fn warn(&self, what: String) {
        self.ledger.borrow_mut().warnings.push(what);
    }

    /// The `kind` record `key`, checked whole; `None` if there is none or it is unusable (then it
    /// is deleted). A hit marks the record used.
    pub(crate) async fn get(&self, kind: Kind, key: &Key) -> Option<Record> {
        let name = Self::name(kind, &self.fingerprint, key);
        let bytes = match self.backend.read(&name).await {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return None,
            Err(e) => {
                self.warn(format!("state store: {e}"));
                return None;
            }
        };
        match Record::from_bytes(&bytes, kind, &self.fingerprint, key) {
            Ok(record) => {
                {
                    let mut l = self.ledger.borrow_mut();
                    l.stats.hits += 1;
                    l.known.insert((kind, *key));
                }
                if let Err(e) = self.backend.touch(&name).await {
                    self.warn(format!("state store: {e}"));
                }
                Some(record)
            }
            Err(miss) => {
                self.ledger.borrow_mut().stats.misses += 1;
                self.warn(format!("state store: {name}: {miss}; removed"));
                if let Err(e) = self.backend.remove(&name).await {
                    self.warn(format!("state store: {e}"));
                }
                if let Some(b) = &mut self.ledger.borrow_mut().bytes {
                    *b = b.saturating_sub(bytes.len() as u64);
                }
                None
            }
        }
    }

    /// Writes `record` (its fingerprint must be this store's), then keeps the store within its
    /// budget. A failure is a warning: the caller goes on without it.
    pub(crate) async fn put(&self, record: &Record) {
        debug_assert_eq!(record.fingerprint, self.fingerprint, "a record of another runtime");
        let bytes = record.to_bytes();
        if bytes.len() as u64 > self.config.budget_bytes {
            self.ledger.borrow_mut().known.remove(&(record.kind, record.key));
            self.warn(format!(
                "state store: a record of {} bytes exceeds the store's budget of {} bytes: not stored",
                bytes.len(),
                self.config.budget_bytes
            ));
            return;
        }
        let name = Self::name(record.kind, &self.fingerprint, &record.key);
        match self.backend.write(&name, &bytes).await {
            Ok(()) => {
                let mut l = self.ledger.borrow_mut();
                l.stats.writes += 1;
                l.known.insert((record.kind, record.key));
                if let Some(b) = &mut l.bytes {
                    *b += bytes.len() as u64;
                }
            }
            Err(e) => {
                self.ledger.borrow_mut().known.remove(&(record.kind, record.key));
                self.warn(format!("state store: {e}; the session goes on in memory"));
                return;
            }
        }
        let over = self.ledger.borrow().bytes.is_none_or(|b| b > self.config.budget_bytes);
        if over {
            self.enforce_budget().await;
        }
    }

    /// Lists the store and removes least recently used records (and stale temporaries) until it
    /// is within its budget; counts what is left.
    pub(crate) async fn enforce_budget(&self) {
        let mut entries = match self.backend.list().await {
            Ok(entries) => entries.into_iter().filter(|e| ours(&e.name)).collect::<Vec<_>>(),
            Err(e) => return self.warn(format!("state store: {e}")),
        };
        let now = self.backend.now_ms();
        let (temps, mut records): (Vec<Entry>, Vec<Entry>) =
            entries.drain(..).partition(|e| e.name.ends_with(TEMP_SUFFIX));
        let mut total: u64 = temps.iter().chain(&records).map(|e| e.bytes).sum();
        for t in temps.iter().filter(|t| now.saturating_sub(t.used_ms) > STALE_TEMP_MS) {
            if self.backend.remove(&t.name).await.is_ok() {
                total -= t.bytes;
            }
        }
        records.sort_by_key(|e| (e.used_ms, e.name.clone()));
        for r in &records {
            if total <= self.config.budget_bytes {
                break;
            }
            match self.backend.remove(&r.name).await {
                Ok(()) => {
                    total -= r.bytes;
                    let mut l = self.ledger.borrow_mut();
                    l.stats.evictions += 1;
                    l.known.clear(); // which one went is not known by key
                }
                Err(e) => self.warn(format!("state store: {e}")),
            }
        }
        self.ledger.borrow_mut().bytes = Some(total);
    }

    /// Bytes on disk (listing the store).
    #[cfg(all(test, not(target_arch = "wasm32")))]
    async fn bytes(&self) -> u64 {
        self.enforce_budget().await;
        self.ledger.borrow().bytes.unwrap_or(0)
    }

    /// Bytes on disk as last counted (listed at the last budget check, then counted per write;
    /// other tabs' or processes' writes since are not in it); `None` before the first count.
    pub fn counted_bytes(&self) -> Option<u64> {
        self.ledger.borrow().bytes
    }

    /// Removes every record and temporary (`Model.clearStore()`, `--store-clear`), after
    /// dropping the writes still queued and waiting for the one under way; how many files.
    pub async fn clear(&self) -> Result<usize> {
        self.writer.drop_queued();
        self.flush().await;
        let mut removed = 0;
        for e in self.backend.list().await?.into_iter().filter(|e| ours(&e.name)) {
            self.backend.remove(&e.name).await?;
            removed += 1;
        }
        let mut l = self.ledger.borrow_mut();
        l.bytes = Some(0);
        l.known.clear();
        Ok(removed)
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;
