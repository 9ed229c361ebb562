//! `session.stream(options)`: an async iterator of `{ text, id }`, one per generated token.
//! It is pulled: each `next()` is one step of the session's [`Generation`] at
//! [`Pace::Stepwise`], under its own lease, so `for await … break`, an `AbortSignal` or
//! `session.stop()` end it between tokens, other calls may run between two `next()`s, and the
//! session continues from exactly where it stopped. When it ends the session's end is kept as
//! its latest prompt-end ([`Generation::end`]), as `generate` does. A detokenizer error rejects
//! that `next()` and ends the stream (the generation's error policy).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use js_sys::{Object, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use crate::error::{Error, Result};
use crate::sampling::Sampler;
use crate::session::{GenerateOptions, Generation, Pace, SessionId};
use crate::wasm::lease::{Lease, Shared};
use crate::wasm::options::GenerateConfig;
use crate::wasm::to_js;

// `for await` looks for [Symbol.asyncIterator]; a stream is its own iterator. (In a snippet,
// not `new Function`, so pages with a strict Content-Security-Policy can use it.)
#[wasm_bindgen(
    inline_js = "export function async_iterable(o) { o[Symbol.asyncIterator] = function () { return this; }; return o; }"
)]
extern "C" {
    /// `o`, made async-iterable.
    pub(crate) fn async_iterable(o: JsValue) -> JsValue;
}

/// What a stream carries between two `next()` calls.
struct Progress {
    options: GenerateConfig,
    generation: Generation,
}

/// The iterator `session.stream()` returns (`for await (const { text, id } of …)`).
#[wasm_bindgen]
pub struct TokenStream {
    shared: Rc<Shared>,
    id: SessionId,
    sampler: Rc<RefCell<Option<Sampler>>>,
    stop: Rc<Cell<bool>>,
    /// `None` while a `next()` runs (a second one meanwhile is `Busy`).
    progress: Rc<RefCell<Option<Progress>>>,
}

impl TokenStream {
    /// A stream over session `id`; the session's sampler is replaced first if `options` ask
    /// for another one (a seed, other settings), as `generate` does.
    pub(crate) fn new(
        shared: Rc<Shared>,
        id: SessionId,
        sampler: Rc<RefCell<Option<Sampler>>>,
        stop: Rc<Cell<bool>>,
        options: GenerateConfig,
    ) -> Result<Self> {
        let kept = sampler.borrow_mut().take();
        let chosen = options.sampler(kept)?;
        *sampler.borrow_mut() = Some(chosen.clone());
        let native = GenerateOptions { max_tokens: options.max_tokens, stop_at_eos: options.stop_at_eos };
        let generation =
            Generation::new(shared.tokenizer()?, chosen, native, options.stop.clone(), Pace::Stepwise)?;
        stop.set(false);
        let progress = Progress { options, generation };
        Ok(Self { shared, id, sampler, stop, progress: Rc::new(RefCell::new(Some(progress))) })
    }

    fn run(&self, end: bool) -> js_sys::Promise {
        let (shared, id, sampler, stop) =
            (Rc::clone(&self.shared), self.id, Rc::clone(&self.sampler), Rc::clone(&self.stop));
        let cell = Rc::clone(&self.progress);
        future_to_promise(async move {
            let taken = cell.borrow_mut().take();
            let mut p =
                taken.ok_or_else(|| to_js(Error::Busy("this stream's next() is already running".into())))?;
            if end {
                p.generation.stop(false);
            }
            let r = next(&shared, id, &sampler, &stop, &mut p).await;
            *cell.borrow_mut() = Some(p);
            r.map_err(to_js)
        })
    }
}

#[wasm_bindgen]
impl TokenStream {
    /// The next `{ value: { text, id }, done: false }`, or `{ value: undefined, done: true }`.
    #[wasm_bindgen(
        unchecked_return_type = "Promise<IteratorResult<{ text: string; id: number }, undefined>>"
    )]
    pub fn next(&self) -> js_sys::Promise {
        self.run(false)
    }

    /// Ends the stream early (what `break` in a `for await` calls).
    #[wasm_bindgen(
        js_name = "return",
        unchecked_return_type = "Promise<IteratorResult<{ text: string; id: number }, undefined>>"
    )]
    pub fn finish(&self) -> js_sys::Promise {
        if let Some(p) = self.progress.borrow_mut().as_mut() {
            p.generation.stop(true); // a caller that leaves wants no more text
        }
        self.run(true)
    }
}

/// One `next()`: a decode step, or the end.
async fn next(
    shared: &Rc<Shared>,
    id: SessionId,
    sampler: &RefCell<Option<Sampler>>,
    stop: &Cell<bool>,
    p: &mut Progress,
) -> Result<JsValue> {
    if p.generation.is_done() {
        return Ok(item(None));
    }
    let mut lease = Lease::new(shared)?;
    let (rt, shared) = lease.parts()?;
    let tokenizer = shared.tokenizer()?;
    if stop.get() || p.options.aborted() {
        p.generation.stop(false);
    }
    let mut piece = None;
    if !p.generation.is_over() {
        // The session's sampler, whose random stream its `generate` calls continue too, steps
        // this generation and goes back to the session.
        let theirs = sampler.borrow_mut().take().map_or_else(|| Sampler::new(p.options.sampling, 0), Ok)?;
        let ours = std::mem::replace(p.generation.sampler_mut(), theirs);
        let stepped = p.generation.next(rt, id, tokenizer).await;
        *sampler.borrow_mut() = Some(std::mem::replace(p.generation.sampler_mut(), ours));
        piece = stepped?;
    }
    let Some(piece) = piece else {
        let tail = p.generation.end(rt, id, tokenizer).await?;
        return Ok(match (tail.is_empty(), p.generation.last_token()) {
            (false, Some(last)) => item(Some((tail, last))),
            _ => item(None),
        });
    };
    if let Some(f) = &p.options.on_token
        && !piece.text.is_empty()
        && f.call3(
            &JsValue::NULL,
            &piece.text.as_str().into(),
            &piece.token.into(),
            &p.options.thinking.into(),
        )
        .is_err()
    {
        p.generation.stop(false);
    }
    crate::platform::yield_now().await;
    Ok(item(Some((piece.text, piece.token))))
}

/// An iterator result: `{ value: { text, id }, done: false }` or `{ value: undefined, done: true }`.
fn item(value: Option<(String, u32)>) -> JsValue {
    let o = Object::new();
    let set = |o: &Object, k: &str, v: JsValue| {
        // Setting a property on a fresh plain object cannot fail.
        let _ = Reflect::set(o, &k.into(), &v);
    };
    match value {
        Some((text, id)) => {
            let v = Object::new();
            set(&v, "text", text.into());
            set(&v, "id", id.into());
            set(&o, "value", v.into());
            set(&o, "done", false.into());
        }
        None => {
            set(&o, "value", JsValue::UNDEFINED);
            set(&o, "done", true.into());
        }
    }
    o.into()
}
