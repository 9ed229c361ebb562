//! [`AdapterInfo`]: the JS view of [`crate::gpu::AdapterSummary`].

use wasm_bindgen::prelude::*;

use crate::gpu::AdapterSummary;

/// The adapter a [`super::Gpu`] runs on (read-only properties).
#[wasm_bindgen(getter_with_clone)]
pub struct AdapterInfo {
    /// Adapter description, e.g. "SwiftShader Device (Subzero)".
    pub name: String,
    /// Backend ("webgpu" in a browser).
    pub backend: String,
    /// "Cpu" for software adapters such as SwiftShader, otherwise "Other" in browsers.
    #[wasm_bindgen(js_name = deviceType)]
    pub device_type: String,
    /// Whether `shader-f16` is enabled.
    #[wasm_bindgen(js_name = shaderF16)]
    pub shader_f16: bool,
    /// Whether timestamp queries are enabled.
    #[wasm_bindgen(js_name = timestampQuery)]
    pub timestamp_query: bool,
    /// Largest storage-buffer binding in bytes.
    #[wasm_bindgen(js_name = maxStorageBufferBindingSize)]
    pub max_storage_buffer_binding_size: f64,
    /// Largest buffer in bytes.
    #[wasm_bindgen(js_name = maxBufferSize)]
    pub max_buffer_size: f64,
    /// Largest workgroup (invocations).
    #[wasm_bindgen(js_name = maxComputeInvocationsPerWorkgroup)]
    pub max_compute_invocations_per_workgroup: u32,
    /// One line describing all of the above.
    pub summary: String,
}

impl From<&AdapterSummary> for AdapterInfo {
    fn from(s: &AdapterSummary) -> Self {
        AdapterInfo {
            name: s.name.clone(),
            backend: s.backend.clone(),
            device_type: s.device_type.clone(),
            shader_f16: s.shader_f16,
            timestamp_query: s.timestamp_query,
            max_storage_buffer_binding_size: s.max_storage_buffer_binding_size as f64,
            max_buffer_size: s.max_buffer_size as f64,
            max_compute_invocations_per_workgroup: s.max_compute_invocations_per_workgroup,
            summary: s.to_string(),
        }
    }
}
