//! `session.stream(options)`: an async iterator of `{ text, id }`, one per generated token.
//! It is pulled: each `next()` runs one turn of the decode loop (`Runtime::decode_next`, at
//! `Pace::Stepwise`: the session whole after each token) under its own lease, so
//! `for await … break`, an `AbortSignal` or `session.stop()` end it between tokens, other calls
//! may run between two `next()`s, and the session continues from exactly where it stopped.
//! When it ends the session's end is kept as its latest prompt-end (`Runtime::end_decoding`), as
//! `generate` does.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use js_sys::{Object, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use crate::error::{Error, Result};
use crate::sampling::{Sampler, StopStrings};
use crate::session::{Decoding, GenerateOptions, Pace, SessionId};
use crate::tokenizer::StreamDecoder;
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
    /// The decode; the stream itself counts the tokens and watches for the end of text.
    decoding: Decoding,
    decoder: StreamDecoder,
    stops: StopStrings,
    produced: usize,
    last: Option<u32>,
    /// No more steps: a stop string, end-of-text, `maxTokens`, an abort or `return()`.
    ending: bool,
    /// A stop string was reached: what the decoder still holds is past it, never shown.
    cut: bool,
    done: bool,
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
        *sampler.borrow_mut() = Some(options.sampler(kept)?);
        let decoder = shared.tokenizer()?.stream(true);
        let stops = StopStrings::new(options.stop.clone())?;
        stop.set(false);
        let unbounded = GenerateOptions { max_tokens: usize::MAX, stop_at_eos: false };
        let progress = Progress {
            options,
            decoding: Decoding::new(unbounded, Pace::Stepwise),
            decoder,
            stops,
            produced: 0,
            last: None,
            ending: false,
            cut: false,
            done: false,
        };
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
            p.ending |= end;
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
            p.cut = true; // a caller that leaves wants no more text
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
    if p.done {
        return Ok(item(None));
    }
    let mut lease = Lease::new(shared)?;
    let (rt, shared) = lease.parts()?;
    let tokenizer = shared.tokenizer()?;
    if p.ending || stop.get() || p.options.aborted() || p.produced >= p.options.max_tokens {
        p.done = true;
        rt.end_decoding(id, &mut p.decoding).await?;
        let tail = if p.cut {
            String::new()
        } else {
            p.stops.push(&p.decoder.finish(tokenizer)?).0 + &p.stops.finish()
        };
        return Ok(match (tail.is_empty(), p.last) {
            (false, Some(last)) => item(Some((tail, last))),
            _ => item(None),
        });
    }
    let mut s = sampler.borrow_mut().take().map_or_else(|| Sampler::new(p.options.sampling, 0), Ok)?;
    let stepped = rt.decode_next(id, &mut p.decoding, &mut s).await;
    *sampler.borrow_mut() = Some(s);
    let token = stepped?.ok_or_else(|| Error::Internal("an unbounded decode ended".into()))?;
    p.produced += 1;
    p.last = Some(token);
    let piece = p.decoder.step(tokenizer, token)?.unwrap_or_default();
    let (text, reached) = p.stops.push(&piece);
    let eos = p.options.stop_at_eos && Some(token) == rt.engine().config().eos_token_id;
    if reached || eos {
        p.ending = true;
        p.cut |= reached;
    }
    if let Some(f) = &p.options.on_token
        && !text.is_empty()
        && f.call2(&JsValue::NULL, &text.as_str().into(), &token.into()).is_err()
    {
        p.ending = true;
    }
    crate::platform::yield_now().await;
    Ok(item(Some((text, token))))
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
