//! The JavaScript API: a thin layer over the native types. Every exported function converts
//! errors in one place ([`to_js`]) into a JS `Error` named `WebMambaError` with a `code`
//! property (see [`crate::Error::code`]); nothing here unwraps, so no panic reaches JS.

mod adapter_info;
mod args;
mod http;
mod info;
mod lease;
mod loader;
mod model;
mod options;
mod saved;
mod session;
mod stream;
mod web_source;

use std::rc::Rc;

use wasm_bindgen::prelude::*;

use crate::error::Error;
use crate::gpu::GpuContext;
use crate::kernels::RmsNorm;

pub use adapter_info::AdapterInfo;
pub use info::ModelInfo;
pub use model::Model;
pub use session::{Outcome, Session, Stats};
pub use stream::TokenStream;

/// Installs the panic hook (a bug would otherwise show as `unreachable` with no message).
#[wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
}

/// Converts a crate error to a catchable JS `Error` (`name = "WebMambaError"`, `code` = kind).
pub fn to_js(e: Error) -> JsValue {
    let js = js_sys::Error::new(&e.to_string());
    // An abort reads as the web's (fetch's) AbortError; every other error is a WebMambaError.
    js.set_name(if matches!(e, Error::Aborted(_)) { "AbortError" } else { "WebMambaError" });
    // Setting a property on a fresh Error object cannot fail.
    let _ = js_sys::Reflect::set(&js, &"code".into(), &e.code().into());
    js.into()
}

struct GpuInner {
    ctx: GpuContext,
    rms_norm: RmsNorm,
}

/// An open WebGPU device with webmamba's kernels compiled on it.
#[wasm_bindgen]
pub struct Gpu {
    inner: Rc<GpuInner>,
}

#[wasm_bindgen]
impl Gpu {
    /// Opens the best WebGPU adapter and compiles the kernels. Rejects with a `WebMambaError`
    /// whose `code` is `"NoAdapter"` when this browser has no WebGPU.
    pub async fn create() -> Result<Gpu, JsValue> {
        let ctx = GpuContext::new().await.map_err(to_js)?;
        let rms_norm = RmsNorm::new(&ctx).await.map_err(to_js)?;
        Ok(Gpu { inner: Rc::new(GpuInner { ctx, rms_norm }) })
    }

    /// The adapter this device runs on, with its relevant features and limits.
    #[wasm_bindgen(getter)]
    pub fn adapter(&self) -> AdapterInfo {
        AdapterInfo::from(self.inner.ctx.summary())
    }

    /// RMSNorm of `x` (rows × weight.length, row-major) on the GPU:
    /// `y = x / sqrt(mean(x²) + eps) * weight`, row by row. Rejects with code
    /// `"ShapeMismatch"` when `x.length` is not a multiple of `weight.length`.
    #[wasm_bindgen(js_name = rmsNorm, unchecked_return_type = "Promise<Float32Array>")]
    pub fn rms_norm(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Float32Array | number[]")] x: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Float32Array | number[]")] weight: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] eps: JsValue,
    ) -> js_sys::Promise {
        let inner = Rc::clone(&self.inner);
        wasm_bindgen_futures::future_to_promise(async move {
            let (x, weight) =
                (args::floats(&x, "x").map_err(to_js)?, args::floats(&weight, "weight").map_err(to_js)?);
            let eps = match eps.as_f64() {
                Some(e) if e.is_finite() && e >= 0.0 => e as f32,
                _ => return Err(to_js(args::wrong("eps", "a finite number ≥ 0", &eps))),
            };
            let y = inner.rms_norm.run(&inner.ctx, &x, &weight, eps).await.map_err(to_js)?;
            Ok(js_sys::Float32Array::from(y.as_slice()).into())
        })
    }
}
