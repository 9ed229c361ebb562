//! Which backend a load gets: the GPU context (or why the CPU runs instead), the device a load
//! holds until its model exists, and when a GPU failure falls back to the CPU.

use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::gpu_model::{GpuModelOptions, Matmul};
use crate::wasm::options::LoadConfig;

/// The GPU context, or why the CPU runs instead (`Err` inside `Ok`); a GPU the caller insisted
/// on that is missing is an error.
pub(crate) async fn gpu_context(backend: &str) -> Result<std::result::Result<GpuContext, String>> {
    Ok(match backend {
        "cpu" => Err(String::new()),
        "gpu" => Ok(GpuContext::new().await?),
        _ => GpuContext::new().await.map_err(|e| format!("CPU fallback: {e}")),
    })
}

/// A load's own GPU device until the model holding it is made: a load that fails, falls back
/// to the CPU or is aborted (its future dropped) destroys it, and with it every buffer made so
/// far — WebGPU frees nothing of a dropped wgpu object before garbage collection.
pub(crate) struct Provisional {
    ctx: GpuContext,
    kept: bool,
}

impl Provisional {
    pub(crate) fn new(ctx: GpuContext) -> Self {
        Provisional { ctx, kept: false }
    }

    /// The load succeeded: the model keeps the device.
    pub(crate) fn keep(mut self) {
        self.kept = true;
    }
}

impl std::ops::Deref for Provisional {
    type Target = GpuContext;
    fn deref(&self) -> &GpuContext {
        &self.ctx
    }
}

impl Drop for Provisional {
    fn drop(&mut self) {
        if !self.kept {
            self.ctx.destroy();
        }
    }
}

/// With backend "auto", a model the GPU cannot run (a kernel limit, a binding limit, GPU memory)
/// runs on the CPU instead; the reason is returned for `model.info.adapter`. Otherwise the error.
pub(crate) fn fallback(o: &LoadConfig, e: Error) -> Result<String> {
    let gpu_cannot_run =
        matches!(e, Error::UnsupportedModel(_) | Error::LimitExceeded { .. } | Error::OutOfMemory { .. });
    if o.backend == "auto" && gpu_cannot_run {
        Ok(format!("CPU fallback: the GPU cannot run this model: {e}"))
    } else {
        Err(e)
    }
}

pub(crate) fn gpu_options(o: &LoadConfig) -> GpuModelOptions {
    GpuModelOptions {
        max_tokens: o.max_tokens as usize,
        matmul: Matmul::Auto,
        weights: o.weights,
        max_binding_bytes: None,
        max_context: o.max_context,
        kv_format: o.kv_format,
        fused: true,
        // Never used in a browser (wgpu's WebGPU backend does not request the feature).
        subgroups: true,
        capture_bytes: None,
        gguf_blocks: true,
    }
}
