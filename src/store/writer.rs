//! The store's write queue: the records a call made, written one after another — by the call
//! itself (the default: natively a call returns with its records on disk), or by a task of
//! their own ([`Store::write_in_background`], the browser's `spawn_local`), so that a call
//! returns before its records are written. [`Store::flush`] waits until every queued record is
//! written (or has failed, as a warning).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::task::{Poll, Waker};

use super::{LocalFuture, Record, Store};

/// Starts a future that runs to its end on its own (the browser's `spawn_local`).
pub(crate) type Spawner = Rc<dyn Fn(LocalFuture<'static, ()>)>;

/// The queue and who drains it.
#[derive(Default)]
pub(super) struct Writer {
    queue: RefCell<VecDeque<Record>>,
    /// A drain is under way: it takes whatever is queued meanwhile.
    busy: Cell<bool>,
    /// Those waiting in [`Store::flush`].
    waiters: RefCell<Vec<Waker>>,
    spawner: RefCell<Option<Spawner>>,
}

impl Writer {
    /// Forgets the records not yet being written (`Store::clear`).
    pub(super) fn drop_queued(&self) {
        self.queue.borrow_mut().clear();
    }

    fn idle(&self) -> bool {
        !self.busy.get() && self.queue.borrow().is_empty()
    }
}

impl Store {
    /// From now on the records a call makes are written by a task `spawn` starts, after the
    /// call has returned ([`Store::flush`] waits for them).
    #[cfg(target_arch = "wasm32")]
    pub(crate) fn write_in_background(&self, spawn: Spawner) {
        *self.writer.spawner.borrow_mut() = Some(spawn);
    }

    /// Queues `records` for writing, in order; they count as known at once (a page queued is
    /// not queued again; one whose write fails is forgotten). Without a background task, returns
    /// once they are written.
    pub(crate) async fn write(&self, records: Vec<Record>) {
        if records.is_empty() {
            return;
        }
        {
            let mut ledger = self.ledger.borrow_mut();
            ledger.known.extend(records.iter().map(|r| (r.kind, r.key)));
        }
        self.writer.queue.borrow_mut().extend(records);
        if self.writer.busy.get() {
            return; // the drain under way takes them
        }
        self.writer.busy.set(true);
        let spawner = self.writer.spawner.borrow().clone();
        match spawner {
            Some(spawn) => {
                let store = self.clone();
                spawn(Box::pin(async move { store.drain().await }));
            }
            None => self.drain().await,
        }
    }

    /// Writes the queue's records until it is empty, then wakes those waiting in `flush`.
    async fn drain(&self) {
        loop {
            let next = self.writer.queue.borrow_mut().pop_front();
            let Some(record) = next else { break };
            self.put(&record).await;
        }
        self.writer.busy.set(false);
        for w in self.writer.waiters.borrow_mut().drain(..) {
            w.wake();
        }
    }

    /// Waits until every record queued so far is written (or failed: a warning).
    pub(crate) async fn flush(&self) {
        std::future::poll_fn(|cx| {
            if self.writer.idle() {
                return Poll::Ready(());
            }
            self.writer.waiters.borrow_mut().push(cx.waker().clone());
            Poll::Pending
        })
        .await
    }
}
