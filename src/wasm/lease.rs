//! [`Shared`] (what a model and its sessions hold in common) and [`Lease`] (the runtime taken
//! out of it for one call): the one place that decides a concurrent call is `Busy`. The model
//! (`model.rs`), its sessions (`session.rs`) and streams (`stream.rs`) all go through it.

use std::cell::RefCell;
use std::rc::Rc;

use crate::chat::ChatConfig;
use crate::error::{Error, Result};
use crate::session::Runtime;
use crate::tokenizer::Tokenizer;

/// What a [`Model`](super::model::Model) and its sessions share: the runtime (taken out while a call runs, see
/// [`Lease`], so a second concurrent call is a `Busy` error rather than a panic) and the
/// tokenizer.
pub(crate) struct Shared {
    pub rt: RefCell<Option<Runtime>>,
    pub tokenizer: Option<Tokenizer>,
    /// The chat template and end-of-turn settings from the checkpoint's files.
    pub chat: ChatConfig,
    /// tokenizer.json's text, for structured output's grammars (built on first use).
    pub tokenizer_json: Option<Vec<u8>>,
    pub grammars: RefCell<Option<crate::chat::constraint::Grammars>>,
    /// The state store's warnings so far (a failed write, a full quota, a damaged record
    /// removed), newest last, at most [`KEPT_WARNINGS`]: each is also logged when it happens.
    pub store_warnings: RefCell<Vec<String>>,
}

/// How many store warnings a model keeps for `cacheStats().storeWarnings`.
pub(crate) const KEPT_WARNINGS: usize = 32;

impl Shared {
    /// Whether no call holds the runtime.
    pub fn is_idle(&self) -> bool {
        self.rt.try_borrow().is_ok_and(|r| r.is_some())
    }

    pub fn tokenizer(&self) -> Result<&Tokenizer> {
        self.tokenizer
            .as_ref()
            .ok_or_else(|| Error::Tokenizer("the model was loaded without tokenizer.json".into()))
    }
}

/// The runtime, taken out of [`Shared`] for the whole of one call. An asynchronous call takes
/// it when the call is made, not when its future first runs, so a call made while another is
/// pending is `Busy` on every backend (the CPU one never suspends); dropping the lease — the
/// call finished, failed or was abandoned — puts the runtime back.
pub(crate) struct Lease {
    shared: Rc<Shared>,
    rt: Option<Runtime>,
}

impl Lease {
    /// Takes the runtime out of `shared`; `Busy` while another call holds it.
    pub fn new(shared: &Rc<Shared>) -> Result<Lease> {
        let rt = shared.rt.try_borrow_mut().ok().and_then(|mut r| r.take()).ok_or_else(busy)?;
        Ok(Lease { shared: Rc::clone(shared), rt: Some(rt) })
    }

    /// The runtime and what else the model shares.
    pub fn parts(&mut self) -> Result<(&mut Runtime, &Shared)> {
        // A lease holds the runtime until it is dropped; an error, not a panic, all the same.
        Ok((self.rt.as_mut().ok_or_else(busy)?, &self.shared))
    }

    /// Runs a synchronous `f` on the runtime of `shared`.
    pub fn run<T>(shared: &Rc<Shared>, f: impl FnOnce(&mut Runtime) -> Result<T>) -> Result<T> {
        let mut lease = Lease::new(shared)?;
        f(lease.parts()?.0)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            let new = rt.store().map(|s| s.take_warnings()).unwrap_or_default();
            keep_warnings(&self.shared, new);
            *self.shared.rt.borrow_mut() = Some(rt);
        }
    }
}

/// Logs the store's `new` warnings and keeps the latest [`KEPT_WARNINGS`] in `shared`.
fn keep_warnings(shared: &Shared, new: Vec<String>) {
    let Ok(mut kept) = shared.store_warnings.try_borrow_mut() else { return };
    for w in new {
        web_sys::console::warn_1(&format!("webmamba: {w}").into());
        kept.push(w);
    }
    let over = kept.len().saturating_sub(KEPT_WARNINGS);
    kept.drain(..over);
}

fn busy() -> Error {
    Error::Busy("another call on this model is still running; await it first".into())
}
