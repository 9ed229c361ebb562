//! The JavaScript API: a thin layer over the native types. Every exported function converts
//! errors in one place ([`to_js`]) into a JS `Error` named `WebMambaError` with a `code`
//! property (see [`crate::Error::code`]); nothing here unwraps, so no panic reaches JS.

mod args;
mod backend;
mod body;
mod build;
mod chat;
mod chat_tools;
mod constrained;
mod gguf;
mod gguf_choice;
mod hash_worker;
mod http;
mod info;
mod lease;
mod loader;
mod model;
mod offline;
mod opfs;
mod options;
mod prefix;
mod reader;
mod saved;
mod session;
mod stream;
mod verify;
mod watch;
mod web_source;

use wasm_bindgen::prelude::*;

use crate::error::Error;

pub use hash_worker::{HashStream, set_hash_worker};
pub use info::{CacheInfo, ModelInfo};
pub use model::Model;
pub use session::{Outcome, Session, Stats};
pub use stream::TokenStream;
#[cfg(feature = "wasm-threads")]
pub use wasm_bindgen_rayon::init_thread_pool;

/// Installs the panic hook (a bug would otherwise show as `unreachable` with no message).
#[wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
}

/// Converts a crate error to a catchable JS `Error` (`name = "WebMambaError"`, `code` = kind,
/// `detail` where [`Error::detail`] has one).
pub fn to_js(e: Error) -> JsValue {
    let js = js_sys::Error::new(&e.to_string());
    // An abort reads as the web's (fetch's) AbortError; every other error is a WebMambaError.
    js.set_name(if matches!(e, Error::Aborted(_)) { "AbortError" } else { "WebMambaError" });
    // Setting a property on a fresh Error object cannot fail.
    let _ = js_sys::Reflect::set(&js, &"code".into(), &e.code().into());
    // What the message leaves out (the grammar engine's own text), when the error keeps any.
    if let Some(detail) = e.detail() {
        let _ = js_sys::Reflect::set(&js, &"detail".into(), &detail.into());
    }
    js.into()
}
