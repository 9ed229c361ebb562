//! Compiled kernels kept for the life of a [`GpuContext`]: a bind-group layout per distinct
//! binding list and a compute pipeline per distinct (kernel, source, constants, layout), so a
//! second model loaded on the same context — another session's, a reload, a test's next
//! fixture — compiles nothing. Compiling is most of a small model's load on software adapters
//! (SwiftShader: ~0.3 s per pipeline, ~3 s per load) and real time on phones.
//!
//! Sharing is safe: pipelines and layouts are immutable, and bind groups are made per model
//! against the (shared) layout. The cache only grows with distinct kernel variants — a few
//! dozen per architecture and weight format — never with models.

use std::collections::HashMap;
use std::sync::Mutex;

/// What makes two layouts the same: their bindings (each as its `Debug` text: name, index,
/// access) and whether parameters are storage.
pub(crate) type LayoutKey = (String, bool);

/// What makes two pipelines the same: entry point, WGSL, constants (name, value bits), layout.
pub(crate) type PipelineKey = (&'static str, String, Vec<(String, u64)>, LayoutKey);

/// The context's compiled objects.
#[derive(Default)]
pub(crate) struct KernelCache {
    layouts: Mutex<HashMap<LayoutKey, wgpu::BindGroupLayout>>,
    pipelines: Mutex<HashMap<PipelineKey, wgpu::ComputePipeline>>,
}

impl KernelCache {
    /// The layout made for `key`, made by `make` the first time.
    pub(crate) fn layout(
        &self,
        key: LayoutKey,
        make: impl FnOnce() -> wgpu::BindGroupLayout,
    ) -> wgpu::BindGroupLayout {
        let mut layouts = self.layouts.lock().unwrap_or_else(|e| e.into_inner());
        layouts.entry(key).or_insert_with(make).clone()
    }

    /// The pipeline compiled for `key`, if one was.
    pub(crate) fn pipeline(&self, key: &PipelineKey) -> Option<wgpu::ComputePipeline> {
        self.pipelines.lock().unwrap_or_else(|e| e.into_inner()).get(key).cloned()
    }

    /// Keeps `pipeline`, compiled for `key`.
    pub(crate) fn keep(&self, key: PipelineKey, pipeline: &wgpu::ComputePipeline) {
        self.pipelines.lock().unwrap_or_else(|e| e.into_inner()).insert(key, pipeline.clone());
    }
}
