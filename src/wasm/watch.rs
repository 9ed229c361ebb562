//! Waits that end early: a load raced against its caller's `AbortSignal` ([`abortable`]), and a
//! network wait raced against a stall timer ([`within`]). Both are `Promise.race` against a
//! promise that settles on the event (`setTimeout` from `globalThis`, so the same in a window
//! and a worker; the signal's `abort` event). Timers are cleared and listeners removed when the
//! wait ends, whichever way.
//!
//! An abort drops the load's future: every reader it held cancels its body and aborts its
//! `fetch` on drop (`web_source::Body`), every GPU buffer and host tensor it had allocated is
//! freed, and the promise rejects at once with [`Error::Aborted`] (`AbortError` in JavaScript).

use std::future::Future;
use std::pin::pin;
use std::task::Poll;

use js_sys::{Array, Function, Object, Promise, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::AbortSignal;

use crate::error::{Error, Result};

/// Default of `stallTimeoutMs`: no bytes for this long is a stalled download.
pub const STALL_TIMEOUT_MS: u32 = 30_000;

/// The error of a load whose signal fired.
pub(crate) fn aborted() -> Error {
    Error::Aborted("the load was stopped by its AbortSignal".into())
}

/// Runs the load `future` until it ends or `signal` fires. An abort drops the future (and with
/// it every download and allocation it held) and returns [`aborted`].
pub(crate) async fn abortable<T>(
    signal: Option<AbortSignal>,
    future: impl Future<Output = Result<T>>,
) -> Result<T> {
    let Some(signal) = signal else { return future.await };
    if signal.aborted() {
        return Err(aborted());
    }
    let listener = signal.clone();
    let fired = Event::new(
        |callback| signal.add_event_listener_with_callback("abort", callback),
        move |callback| {
            let _ = listener.remove_event_listener_with_callback("abort", callback);
        },
    );
    let Some(fired) = fired else { return future.await };
    let mut on_abort = JsFuture::from(fired.promise.clone());
    let mut future = pin!(future);
    std::future::poll_fn(|cx| {
        // The event wakes this task; the flag decides (an abort that came while the load ran
        // synchronously wins over a result reached in the same stretch).
        let _ = std::pin::Pin::new(&mut on_abort).poll(cx);
        if signal.aborted() {
            return Poll::Ready(Err(aborted()));
        }
        future.as_mut().poll(cx)
    })
    .await
}

/// How a wait for `promise` with a stall timer ended.
pub(crate) enum Waited {
    /// The promise resolved to this.
    Done(JsValue),
    /// The promise rejected with this.
    Failed(JsValue),
    /// Nothing came for the timer's whole length.
    Stalled,
}

/// Awaits `promise` for at most `ms` milliseconds.
pub(crate) async fn within(promise: &Promise, ms: u32) -> Waited {
    let global = js_sys::global();
    let timer_fn = |name: &str| Reflect::get(&global, &name.into()).and_then(|f| f.dyn_into::<Function>());
    let handle = std::rc::Rc::new(std::cell::Cell::new(None::<f64>));
    let (set, clear) = (timer_fn("setTimeout"), timer_fn("clearTimeout"));
    let timer = match (set, clear) {
        (Ok(set), Ok(clear)) => {
            let (armed, this) = (std::rc::Rc::clone(&handle), global.clone());
            Event::new(
                |callback| {
                    let id = set.call2(&global, callback, &ms.into())?;
                    armed.set(id.as_f64());
                    Ok(())
                },
                move |_| {
                    if let Some(id) = handle.get() {
                        let _ = clear.call1(&this, &id.into());
                    }
                },
            )
        }
        _ => None,
    };
    let raced = match &timer {
        Some(timer) => Promise::race(&Array::of2(promise, &timer.promise)),
        None => promise.clone(), // no timers in this global (none is known): wait as it is
    };
    match JsFuture::from(raced).await {
        Ok(v) if timer.as_ref().is_some_and(|t| Object::is(&v, &t.marker)) => Waited::Stalled,
        Ok(v) => Waited::Done(v),
        Err(e) => Waited::Failed(e),
    }
}

/// A promise that resolves to `marker` when `callback` is called (by a timer or a listener),
/// and what undoes the arming; undone on drop, before the callback is freed, so a timer or an
/// event that comes later calls nothing.
struct Event {
    promise: Promise,
    marker: JsValue,
    callback: Closure<dyn FnMut()>,
    disarm: Option<Disarm>,
}

/// What undoes an [`Event`]'s arming (clears its timer, removes its listener).
type Disarm = Box<dyn FnOnce(&Function)>;

impl Event {
    /// Makes the event and hands its callback to `arm` (which sets a timer or adds a listener);
    /// `disarm` undoes that. `None` if `arm` fails.
    fn new(
        arm: impl FnOnce(&Function) -> std::result::Result<(), JsValue>,
        disarm: impl FnOnce(&Function) + 'static,
    ) -> Option<Self> {
        let marker: JsValue = Object::new().into();
        let mut resolve_with: Option<Function> = None;
        let promise = Promise::new(&mut |resolve, _| resolve_with = Some(resolve));
        let resolve = resolve_with?;
        let given = marker.clone();
        let callback = Closure::<dyn FnMut()>::new(move || {
            let _ = resolve.call1(&JsValue::UNDEFINED, &given);
        });
        arm(callback.as_ref().unchecked_ref()).ok()?;
        Some(Event { promise, marker, callback, disarm: Some(Box::new(disarm)) })
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if let Some(disarm) = self.disarm.take() {
            disarm(self.callback.as_ref().unchecked_ref());
        }
    }
}
