//! The GPU context: one adapter, one device and its queue, opened with the adapter's real limits
//! and the optional features we can use. Created once per model/session and shared by every
//! kernel. The same code runs on WebGPU in the browser and on Vulkan/Metal/DX12 natively.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::gpu::cache::KernelCache;

/// Optional features we turn on when the adapter has them (never required).
/// - `SHADER_F16`: f16 weight storage (a later issue); absent on Chromium's SwiftShader.
/// - `TIMESTAMP_QUERY`: GPU-side kernel timings for benchmarks; with
///   `TIMESTAMP_QUERY_INSIDE_PASSES` (native only), stamps around each dispatch
///   ([`crate::gpu::start_dispatch_timing`]).
/// - `SUBGROUP` (native only: wgpu's WebGPU backend does not map the browser's `subgroups`):
///   the GEMV kernels' sums across a workgroup ([`crate::kernels::lanes`]).
const OPTIONAL_FEATURES: wgpu::Features = wgpu::Features::SHADER_F16
    .union(wgpu::Features::TIMESTAMP_QUERY)
    .union(wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES)
    .union(wgpu::Features::SUBGROUP);

/// A description of the adapter a context runs on, for logs, tests and the demo.
#[derive(Clone, Debug)]
pub struct AdapterSummary {
    /// Adapter name, e.g. `llvmpipe (LLVM 15.0.6, 256 bits)` or `SwiftShader Device (Subzero)`.
    pub(crate) name: String,
    /// Backend: `vulkan`, `metal`, `dx12`, `gl` or `webgpu`.
    pub(crate) backend: String,
    /// Discrete, integrated, a software rasteriser (`Cpu`: lavapipe, SwiftShader), ... — wgpu's
    /// own type, not a string to compare.
    pub(crate) device_type: wgpu::DeviceType,
    /// Driver name and version where the platform reports them (empty in browsers).
    pub(crate) driver: String,
    /// Whether `shader-f16` was enabled on the device.
    pub(crate) shader_f16: bool,
    /// Whether timestamp queries were enabled on the device.
    pub(crate) timestamp_query: bool,
    /// Whether subgroup operations were enabled on the device (`wgpu::Features::SUBGROUP`).
    pub subgroups: bool,
    /// The adapter's subgroup sizes, smallest and largest (0, 0 where it does not say).
    pub(crate) subgroup_sizes: (u32, u32),
    /// Largest storage-buffer binding in bytes (128 MiB on lavapipe and many phones).
    pub(crate) max_storage_buffer_binding_size: u64,
    /// Largest buffer in bytes.
    pub(crate) max_buffer_size: u64,
    /// Largest workgroup (invocations).
    pub max_compute_invocations_per_workgroup: u32,
    /// Workgroup memory in bytes.
    pub(crate) max_compute_workgroup_storage_size: u32,
    /// Largest dispatch along one dimension.
    pub max_compute_workgroups_per_dimension: u32,
    /// Whether kernels read their parameter structs (`var<uniform>` in the WGSL) as read-only
    /// storage buffers instead: on lavapipe only. Its Mesa 22 re-specialises and recompiles a
    /// compute shader whose loops depend on uniform values at *every* dispatch (uniform
    /// inlining, without the variant cache later versions added): 1–3 ms per dispatch, ~95%
    /// of a small model's decode step. Storage buffers are never inlined. Every other adapter
    /// (SwiftShader and real GPUs) gets the uniforms as written.
    pub(crate) params_in_storage: bool,
}

impl std::fmt::Display for AdapterSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let yes_no = |b: bool| if b { "yes" } else { "no" };
        write!(
            f,
            "{} [{}, {:?}{}] shader-f16: {}, timestamps: {}, subgroups: {}, max storage binding: {} MiB",
            self.name,
            self.backend,
            self.device_type,
            if self.driver.is_empty() { String::new() } else { format!(", {}", self.driver) },
            yes_no(self.shader_f16),
            yes_no(self.timestamp_query),
            match (self.subgroups, self.subgroup_sizes) {
                (false, _) => "no".to_string(),
                (true, (lo, hi)) if lo == hi => format!("{lo}"),
                (true, (lo, hi)) => format!("{lo}-{hi}"),
            },
            self.max_storage_buffer_binding_size >> 20,
        )
    }
}

/// How many GPU objects this context has created so far (monotonic). Every buffer, bind group
/// and pipeline webmamba makes goes through a counting method of [`GpuContext`] — the device
/// itself is not public — so a test can prove that a decode step creates none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ObjectCounts {
    /// Buffers created.
    pub buffers: u64,
    /// Bind groups created.
    pub bind_groups: u64,
    /// Compute pipelines created.
    pub(crate) pipelines: u64,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) buffers: AtomicU64,
    pub(crate) bind_groups: AtomicU64,
    pub(crate) pipelines: AtomicU64,
}

/// An open GPU device with its queue. Clones share the device (wgpu handles are reference
/// counted); create one per application.
#[derive(Clone)]
pub struct GpuContext {
    device: wgpu::Device,
    queue: wgpu::Queue,
    summary: AdapterSummary,
    /// The first GPU error raised outside an error scope and not yet reported.
    /// (whether it was out of memory, its message)
    uncaptured: Arc<Mutex<Option<(bool, String)>>>,
    /// Why the device was lost, once it was.
    lost: Arc<Mutex<Option<String>>>,
    pub(crate) counters: Arc<Counters>,
    /// Layouts and pipelines compiled on this device, reused by every later load.
    pub(crate) kernels: Arc<KernelCache>,
}

impl GpuContext {
    /// Finds the best adapter and opens a device on it with all of the adapter's limits and
    /// whichever optional features it has.
    ///
    /// Fails with [`Error::NoAdapter`] when there is no adapter at all (in a browser: WebGPU is
    /// missing or disabled) and [`Error::DeviceRequest`] when the adapter refuses the device.
    pub async fn new() -> Result<Self> {
        // In a browser, check for `navigator.gpu` first: wgpu's instance assumes it can reach it.
        crate::platform::check_webgpu_present().map_err(|reason| Error::NoAdapter { reason })?;
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            })
            .await
            .map_err(|e| Error::NoAdapter {
                // wgpu's message lists native backends that do not exist in a browser.
                reason: if cfg!(target_arch = "wasm32") {
                    "navigator.gpu.requestAdapter() returned no adapter (WebGPU is disabled, \
                     blocklisted or unsupported on this device)"
                        .into()
                } else {
                    e.to_string()
                },
            })?;
        let info = adapter.get_info();
        let features = adapter.features() & OPTIONAL_FEATURES;
        let limits = adapter.limits();
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("webmamba"),
                required_features: features,
                required_limits: limits.clone(),
                ..Default::default()
            })
            .await
            .map_err(|e| Error::DeviceRequest { adapter: info.name.clone(), reason: e.to_string() })?;

        // WebGPU reports errors outside an error scope asynchronously (natively wgpu calls the
        // handler at once); wgpu's default handler panics natively. We keep the first one so no
        // panic can reach JavaScript and every model call can report it ([`GpuContext::check`]).
        let uncaptured = Arc::new(Mutex::new(None));
        let sink = Arc::clone(&uncaptured);
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            crate::platform::log_error(&format!("webmamba: uncaptured GPU error: {e}"));
            if let Ok(mut slot) = sink.lock() {
                slot.get_or_insert((matches!(e, wgpu::Error::OutOfMemory { .. }), e.to_string()));
            }
        }));
        let lost = Arc::new(Mutex::new(None));
        let sink = Arc::clone(&lost);
        device.set_device_lost_callback(move |reason, message| {
            if let Ok(mut slot) = sink.lock() {
                slot.get_or_insert(format!("{reason:?}: {message}"));
            }
        });

        let name = match info.name.as_str() {
            "" => crate::platform::browser_adapter_name().await.unwrap_or_else(|| "(unnamed adapter)".into()),
            name => name.to_string(),
        };
        let summary = AdapterSummary {
            name,
            backend: info.backend.to_str().to_string(),
            device_type: info.device_type,
            driver: [info.driver.as_str(), info.driver_info.as_str()]
                .iter()
                .filter(|s| !s.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join(" "),
            shader_f16: features.contains(wgpu::Features::SHADER_F16),
            timestamp_query: features.contains(wgpu::Features::TIMESTAMP_QUERY),
            subgroups: features.contains(wgpu::Features::SUBGROUP),
            subgroup_sizes: (info.subgroup_min_size, info.subgroup_max_size),
            max_storage_buffer_binding_size: limits.max_storage_buffer_binding_size,
            max_buffer_size: limits.max_buffer_size,
            max_compute_invocations_per_workgroup: limits.max_compute_invocations_per_workgroup,
            max_compute_workgroup_storage_size: limits.max_compute_workgroup_storage_size,
            max_compute_workgroups_per_dimension: limits.max_compute_workgroups_per_dimension,
            params_in_storage: info.backend == wgpu::Backend::Vulkan && info.name.contains("llvmpipe"),
        };
        Ok(Self {
            device,
            queue,
            summary,
            uncaptured,
            lost,
            counters: Arc::default(),
            kernels: Arc::default(),
        })
    }

    /// The device, for the crate's own plumbing (encoders, pipelines, polling). Buffers and
    /// bind groups are created through the counting methods instead.
    pub(crate) fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// The queue (buffer writes, submissions).
    pub(crate) fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }

    /// GPU objects created so far through this context.
    pub fn object_counts(&self) -> ObjectCounts {
        let c = &self.counters;
        ObjectCounts {
            buffers: c.buffers.load(Ordering::Relaxed),
            bind_groups: c.bind_groups.load(Ordering::Relaxed),
            pipelines: c.pipelines.load(Ordering::Relaxed),
        }
    }

    /// A command encoder (one per submission; encoders are not counted).
    pub(crate) fn encoder(&self, label: &str) -> wgpu::CommandEncoder {
        self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) })
    }

    /// What this context runs on.
    pub fn summary(&self) -> &AdapterSummary {
        &self.summary
    }

    /// The device's limits (equal to the adapter's: we request all of them).
    pub(crate) fn limits(&self) -> wgpu::Limits {
        self.device.limits()
    }

    /// Returns and clears the first GPU error that happened outside an error scope, if any.
    pub fn take_uncaptured_error(&self) -> Option<String> {
        self.take_uncaptured().map(|(_, message)| message)
    }

    fn take_uncaptured(&self) -> Option<(bool, String)> {
        self.uncaptured.lock().ok().and_then(|mut slot| slot.take())
    }

    /// Fails with [`Error::DeviceLost`] once the device is lost, and with the GPU error raised
    /// outside any error scope since the last check ([`Error::OutOfMemory`] or [`Error::Gpu`],
    /// naming `context`). Every model call checks before and after its GPU work, so no such
    /// error can pass silently into a result.
    pub(crate) fn check(&self, context: &str) -> Result<()> {
        // Natively a destroyed or lost device reports it from the next poll.
        #[cfg(not(target_arch = "wasm32"))]
        let _ = self.device.poll(wgpu::PollType::Poll);
        if let Some(reason) = self.lost() {
            return Err(Error::DeviceLost { reason });
        }
        match self.take_uncaptured() {
            Some((out_of_memory, message)) => Err(gpu_error(context, out_of_memory, message, 0)),
            None => Ok(()),
        }
    }

    /// The result of GPU work that has just finished (a readback), checked: a failure that a
    /// GPU error explains better becomes that error (a failed read on a lost device is
    /// [`Error::DeviceLost`], not a readback error), and a success still fails if a GPU error
    /// came up meanwhile ([`GpuContext::check`]).
    pub(crate) fn checked<T>(&self, context: &str, result: Result<T>) -> Result<T> {
        let value = result.map_err(|e| self.check(context).err().unwrap_or(e))?;
        self.check(context)?;
        Ok(value)
    }

    /// Why the device was lost, if it was.
    pub fn lost(&self) -> Option<String> {
        self.lost.lock().ok().and_then(|l| l.clone())
    }

    /// Destroys the device now, as WebGPU's `device.destroy()`: its memory is freed at once and
    /// every model on it then fails with [`Error::DeviceLost`] (what a lost device looks like;
    /// tests use it to check the recovery).
    pub fn destroy(&self) {
        self.device.destroy();
    }

    /// Submits what the queue holds (buffer writes included) and waits until the GPU has done
    /// it: bounds the staging memory a long run of `write_buffer` calls can pile up.
    pub(crate) async fn flush(&self) -> Result<()> {
        let (tx, rx) = futures_channel::oneshot::channel();
        self.queue.on_submitted_work_done(move || {
            // The receiver only disappears if the awaiting future was dropped: nothing to do.
            let _ = tx.send(());
        });
        self.queue.submit([]);
        #[cfg(not(target_arch = "wasm32"))]
        self.flush_blocking()?;
        rx.await.map_err(|_| Error::Gpu { context: "flushing the queue".into(), message: "dropped".into() })
    }

    /// Natively: submits and blocks until the GPU is idle (no await needed).
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) fn flush_blocking(&self) -> Result<()> {
        self.queue.submit([]);
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map(|_| ())
            .map_err(|e| Error::Gpu { context: "flushing the queue".into(), message: e.to_string() })
    }

    /// Runs `f` inside validation, out-of-memory and internal error scopes and turns any error
    /// WebGPU reports into [`Error::Gpu`] (or [`Error::OutOfMemory`]) with `context` (e.g.
    /// "creating pipeline rms_norm"); a lost device is [`Error::DeviceLost`].
    pub(crate) async fn scoped<T>(&self, context: &str, f: impl FnOnce() -> T) -> Result<T> {
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let internal = self.device.push_error_scope(wgpu::ErrorFilter::Internal);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let out = f();
        let validation = validation.pop();
        let internal = internal.pop();
        let oom = oom.pop();
        let (validation, internal, oom) = (validation.await, internal.await, oom.await);
        self.check(context)?;
        match oom.or(validation).or(internal) {
            Some(e) => {
                Err(gpu_error(context, matches!(e, wgpu::Error::OutOfMemory { .. }), e.to_string(), 0))
            }
            None => Ok(out),
        }
    }
}

/// A WebGPU error as ours: out of memory is [`Error::OutOfMemory`] (`needed` bytes, 0 when
/// unknown), anything else [`Error::Gpu`].
fn gpu_error(context: &str, out_of_memory: bool, message: String, needed: u64) -> Error {
    if out_of_memory {
        let limit = format!("the GPU device refused the allocation ({message})");
        Error::OutOfMemory { what: context.to_string(), needed, limit }
    } else {
        Error::Gpu { context: context.to_string(), message }
    }
}
