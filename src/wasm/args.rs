//! Arguments as JavaScript passes them, checked: every entry point takes `JsValue`s and reads
//! them here, so a wrong type or an out-of-range number is an `InvalidInput` WebMambaError
//! naming the argument — never wasm-bindgen's untyped exception, a silent coercion
//! (`rewind("x")` used to rewind to 0) or a trap.
//!
//! Typed arrays and `ArrayBuffer`s are recognised by their `Symbol.toStringTag`, not by
//! `instanceof`: a value made in another JavaScript realm (an iframe, a worker's message, a
//! browser extension, Firefox's WebDriver sandbox) is not an instance of this realm's
//! `Uint8Array`, and wasm-bindgen's `dyn_ref` would refuse it.

use js_sys::{ArrayBuffer, Function, Uint8Array, Uint32Array};
use wasm_bindgen::{JsCast, JsValue};

use crate::error::{Error, Result};

/// `v` must be a string.
pub fn string(v: &JsValue, name: &str) -> Result<String> {
    v.as_string().ok_or_else(|| wrong(name, "a string", v))
}

/// `v` must be a whole number in `0..=max`.
pub fn whole(v: &JsValue, name: &str, max: u64) -> Result<u64> {
    match v.as_f64() {
        Some(n) if n >= 0.0 && n.fract() == 0.0 && n <= max as f64 => Ok(n as u64),
        _ => Err(wrong(name, &format!("a whole number from 0 to {max}"), v)),
    }
}

/// `v`'s `Symbol.toStringTag` ("Uint8Array", "ArrayBuffer", …): the same in every realm.
fn tag(v: &JsValue) -> Option<String> {
    if !v.is_object() {
        return None;
    }
    js_sys::Reflect::get(v, &js_sys::Symbol::to_string_tag()).ok()?.as_string()
}

/// `v` as a `Uint8Array`, from any realm (a typed array whose tag says so).
pub fn uint8_array(v: &JsValue) -> Option<&Uint8Array> {
    (ArrayBuffer::is_view(v) && tag(v).as_deref() == Some("Uint8Array")).then(|| v.unchecked_ref())
}

/// `v` as an `ArrayBuffer`, from any realm.
fn array_buffer(v: &JsValue) -> Option<&ArrayBuffer> {
    (!ArrayBuffer::is_view(v) && tag(v).as_deref() == Some("ArrayBuffer")).then(|| v.unchecked_ref())
}

/// `v` must be token ids: a `Uint32Array`, or an array of whole numbers below 2^32.
pub fn ids(v: &JsValue, name: &str) -> Result<Vec<u32>> {
    if ArrayBuffer::is_view(v) && tag(v).as_deref() == Some("Uint32Array") {
        return Ok(v.unchecked_ref::<Uint32Array>().to_vec());
    }
    elements(v, name, "a Uint32Array or an array of token ids", |id, at| {
        whole(id, at, u32::MAX as u64).map(|n| n as u32)
    })
}

/// Each element of array `v` read by `each` (given its name, `name[i]`); `v` must be an array
/// (`what` says what else would do).
fn elements<T>(
    v: &JsValue,
    name: &str,
    what: &str,
    each: impl Fn(&JsValue, &str) -> Result<T>,
) -> Result<Vec<T>> {
    if !js_sys::Array::is_array(v) {
        return Err(wrong(name, what, v));
    }
    js_sys::Array::from(v).iter().enumerate().map(|(i, x)| each(&x, &format!("{name}[{i}]"))).collect()
}

/// `v` must be bytes: a `Uint8Array` or an `ArrayBuffer`.
pub fn bytes(v: &JsValue, name: &str) -> Result<Vec<u8>> {
    if let Some(a) = uint8_array(v) {
        return Ok(a.to_vec());
    }
    if let Some(b) = array_buffer(v) {
        return Ok(Uint8Array::new(b).to_vec());
    }
    Err(wrong(name, "a Uint8Array or an ArrayBuffer", v))
}

/// `v` may be absent (`undefined`/`null`); otherwise as [`bytes`].
pub fn optional_bytes(v: &JsValue, name: &str) -> Result<Option<Vec<u8>>> {
    if absent(v) { Ok(None) } else { bytes(v, name).map(Some) }
}

/// `v` may be absent; otherwise it must be a function.
pub fn optional_function(v: &JsValue, name: &str) -> Result<Option<Function>> {
    if absent(v) {
        return Ok(None);
    }
    v.dyn_ref::<Function>().cloned().map(Some).ok_or_else(|| wrong(name, "a function", v))
}

/// Whether `v` is `undefined` or `null`.
pub fn absent(v: &JsValue) -> bool {
    v.is_undefined() || v.is_null()
}

/// The error for `name` not being `what`, saying what it was.
pub fn wrong(name: &str, what: &str, got: &JsValue) -> Error {
    let got = match got.js_typeof().as_string().as_deref() {
        Some("number") => format!("the number {}", got.as_f64().unwrap_or(f64::NAN)),
        Some("object") if got.is_null() => "null".into(),
        Some("object") if js_sys::Array::is_array(got) => "an array".into(),
        Some(kind) => format!("a value of type {kind}"),
        None => "an unreadable value".into(),
    };
    Error::InvalidInput(format!("{name} must be {what}, not {got}"))
}
