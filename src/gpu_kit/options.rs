//! What a [`crate::gpu_model::GpuModel`] load is asked for ([`GpuModelOptions`], [`Matmul`]) and what it
//! reports of its memory ([`GpuMemory`]).

use crate::gpu::GpuContext;
use crate::gpu_kit::{ConversionStats, KvFormat, WeightFormat};

/// Which matrix kernels a model uses — the ones built for real GPUs or the ones for software
/// adapters — for many rows (prefill) and for a few (decode steps).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Matmul {
    /// `Direct` on adapters that run on the CPU (lavapipe, SwiftShader), else `Tiled`.
    #[default]
    Auto,
    /// For real GPUs: `linear` (tiles staged in workgroup memory) and `gemv_coalesced` (a
    /// workgroup per 4 outputs, adjacent invocations reading adjacent weights).
    Tiled,
    /// For software adapters: `linear_direct` (4×4 register blocks, no barriers) and `gemv` (an
    /// invocation per output walking its whole row).
    Direct,
}

impl Matmul {
    /// Whether `ctx`'s model uses the software-adapter kernels.
    pub(crate) fn is_direct(self, ctx: &GpuContext) -> bool {
        match self {
            Matmul::Auto => ctx.summary().device_type == wgpu::DeviceType::Cpu,
            Matmul::Tiled => false,
            Matmul::Direct => true,
        }
    }
}

/// Load-time options.
#[derive(Clone, Copy, Debug)]
pub struct GpuModelOptions {
    /// Most tokens one forward chunk processes; longer inputs run in several chunks. Activation
    /// buffers scale with it.
    pub max_tokens: usize,
    /// The prefill matmul kernel.
    pub matmul: Matmul,
    /// How weight matrices are stored (f16 by default: exact for bf16/f16 checkpoints).
    pub weights: WeightFormat,
    /// Caps each weight buffer below the device's storage-binding limit, so matrices split
    /// into more parts (for devices that report more than they handle well, and for tests of
    /// the split path on any device). `None`: the device's limit.
    pub max_binding_bytes: Option<u64>,
    /// Most tokens of context the attention layers' key/value caches may hold (a longer one is
    /// [`crate::Error::ContextFull`]). `None`: what [`crate::model::context::KV_BUDGET_BYTES`] holds, at most the
    /// model's `max_position_embeddings` where it has RoPE. Models without attention have no
    /// limit.
    pub max_context: Option<usize>,
    /// How the key/value caches store keys and values (f32 by default).
    pub kv_format: KvFormat,
    /// Decode steps run the fused kernels (Mamba-1: 4 dispatches per layer instead of 7,
    /// Mamba-2: 3 instead of 6); off,
    /// every chunk runs the kernels a prefill does (for comparisons: the results agree within
    /// rounding, `tests/gpu_fused.rs`).
    pub fused: bool,
    /// The GEMV kernels (`gemv_coalesced`, `decode_in_proj`, `decode_out_proj`) sum across a
    /// workgroup with subgroup operations where the adapter has them (`wgpu::Features::SUBGROUP`:
    /// natively on Vulkan, Metal and DX12 GPUs; never in a browser, whose WebGPU feature wgpu
    /// does not request) and the real-GPU kernels are in use ([`Matmul`]); off, or on other
    /// adapters, a tree in workgroup memory. For comparisons: the results agree within
    /// rounding (`tests/gpu_subgroups.rs`); [`crate::gpu_model::GpuModel::uses_subgroups`] says which ran.
    pub subgroups: bool,
    /// Bytes of the checkpoint capture area at load (`None`: 32 MiB), where a prefill's scan
    /// writes the states it checkpoints before they are copied to their slots: at least one
    /// state, at most 64, within one binding. A forward call that asks for more checkpoints in
    /// one chunk than it holds grows it to that many (within the same bounds; the plan is built
    /// again, once per size) — before it did, such a prefill ran as one chunk per checkpoint
    /// it could hold, each reading every weight again. [`GpuMemory::activations`] counts it.
    pub capture_bytes: Option<u64>,
    /// A GGUF file's quantized matrices (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) keep
    /// the file's blocks and are computed on as stored (`gpu_kit/ggml.rs`), whatever
    /// `weights` says (its format is then that of the file's float matrices); off, they are
    /// decoded as they load and stored in `weights` (for comparisons).
    pub gguf_blocks: bool,
}

impl Default for GpuModelOptions {
    fn default() -> Self {
        Self {
            max_tokens: 512,
            matmul: Matmul::Auto,
            weights: WeightFormat::F16,
            max_binding_bytes: None,
            max_context: None,
            kv_format: KvFormat::F32,
            fused: true,
            subgroups: true,
            capture_bytes: None,
            gguf_blocks: true,
        }
    }
}

/// GPU memory a loaded model uses, by category, and how its weights are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuMemory {
    /// The format of the model's largest matrix (the embedding); a matrix whose width does not
    /// divide the format's block falls back (see [`WeightFormat::for_shape`]).
    pub weight_format: WeightFormat,
    /// Bytes of weight buffers.
    pub weights: u64,
    /// Bytes of activation buffers (sized for `max_tokens`), readback included.
    pub activations: u64,
    /// Bytes of the working state and its copy from before a greedy batch.
    pub state: u64,
    /// Bytes of the attention layers' key/value caches as they are now (they grow with the
    /// context), with their RoPE tables and the decode scratch.
    pub kv: u64,
    /// Bytes of checkpoint slots allocated so far.
    pub slots: u64,
    /// Bytes of key/value page slabs allocated so far (pages mode).
    pub pages: u64,
    /// What f16 storage could not hold exactly.
    pub(crate) conversion: ConversionStats,
}
