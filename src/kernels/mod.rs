//! One Rust wrapper per WGSL kernel in `shaders/`, named like the shader file and its entry
//! point: the WGSL source, the kernel's bindings (`BINDINGS`: each WGSL global's name,
//! `@binding` index and access; call sites bind buffers by name), and its uniform parameter
//! struct (field for field the `Params` of the shader). Pipelines are compiled once at load
//! ([`crate::gpu_model`]); bind groups are made once; only dispatches happen per step.
//!
//! Every kernel of the forward pass takes the shared [`Step`] uniform at binding 0 (written
//! once per forward call) and its own static `Params` at binding 1 ([`STEP`], [`PARAMS`]).
//!
//! Rust is the source of truth for that contract: `tests/kernel_contract.rs` reflects every
//! shader with naga and checks each `Params` and `Step` (size, member names and offsets) and
//! the constants both sides use (flags, `TILE`, `K_MAX`, `N_MAX`, `STAGE`...) against the
//! Rust structs and constants here, and every shader's bindings against its declaration.

use crate::gpu::Binding;

pub mod argmax;
pub(crate) mod attention;
pub mod attention_combine;
pub mod attention_decode;
pub mod attention_prefill;
pub mod conv1d_silu;
pub mod copy_cols;
pub mod decode_in_proj;
pub mod decode_out_proj;
pub mod decode_scan;
pub mod delta_chunks;
pub mod delta_prep;
pub mod delta_state;
pub mod delta_step;
pub mod embedding;
pub mod gated_act;
pub(crate) mod gemv;
pub mod gemv_coalesced;
pub mod head_norm;
pub mod kv_append;
pub mod lanes;
pub mod linear;
pub(crate) mod linear_direct;
pub mod moe_route;
pub mod rms_norm;
pub mod rms_slices;
pub mod rope;
pub mod scale_segments;
pub mod scan_carry;
pub mod scan_chunks;
pub mod scan_output;
pub mod short_conv;
pub mod silu_gate;
pub mod ssd_chunks;
pub mod ssd_output;
pub mod top_k;

pub use argmax::Argmax;
pub use attention::{AttentionShape, HEAD_DIM_MAX};
pub use attention_decode::AttentionDecode;
pub use attention_prefill::AttentionPrefill;
pub use kv_append::KvAppend;
pub use rms_norm::RmsNorm;
pub use rope::Rope;
pub use top_k::TopK;

/// Binding 0 of every kernel: the shared [`Step`] uniform.
pub(crate) const STEP: Binding = Binding::uniform(0, "step");

/// Binding 1 of every kernel: its own `Params` uniform (`p` in every shader).
pub(crate) const PARAMS: Binding = Binding::uniform(1, "p");

/// One shader the crate compiles.
#[derive(Clone, Copy, Debug)]
pub struct Shader {
    /// File stem = entry point.
    pub name: &'static str,
    /// WGSL source.
    pub source: &'static str,
    /// Its bindings as its Rust wrapper declares them: shaders whose bindings are identical
    /// (the four matmuls) share one declaration.
    pub bindings: &'static [Binding],
}

const fn shader(name: &'static str, source: &'static str, bindings: &'static [Binding]) -> Shader {
    Shader { name, source, bindings }
}

/// Every shader the crate compiles. The shader validation test checks that this list and the
/// files in `shaders/` are the same set; the contract test, each one's bindings.
pub const SHADERS: &[Shader] = &[
    shader("argmax", argmax::SOURCE, argmax::BINDINGS),
    shader("attention_combine", attention_combine::SOURCE, attention_combine::BINDINGS),
    shader("attention_decode", attention_decode::SOURCE, attention_decode::BINDINGS),
    shader("attention_prefill", attention_prefill::SOURCE, attention_prefill::BINDINGS),
    shader("conv1d_silu", conv1d_silu::SOURCE, conv1d_silu::BINDINGS),
    shader("copy_cols", copy_cols::SOURCE, copy_cols::BINDINGS),
    shader("decode_in_proj", decode_in_proj::SOURCE, decode_in_proj::BINDINGS),
    shader("decode_out_proj", decode_out_proj::SOURCE, decode_out_proj::BINDINGS),
    shader("decode_scan", decode_scan::SOURCE, decode_scan::BINDINGS),
    shader("delta_chunks", delta_chunks::SOURCE, delta_chunks::BINDINGS),
    shader("delta_prep", delta_prep::SOURCE, delta_prep::BINDINGS),
    shader("delta_state", delta_state::SOURCE, delta_state::BINDINGS),
    shader("delta_step", delta_step::SOURCE, delta_step::BINDINGS),
    shader("embedding", embedding::SOURCE, embedding::BINDINGS),
    shader("gated_act", gated_act::SOURCE, gated_act::BINDINGS),
    shader("gemv", gemv::SOURCE, linear::BINDINGS),
    shader("gemv_coalesced", gemv_coalesced::SOURCE, linear::BINDINGS),
    shader("head_norm", head_norm::SOURCE, head_norm::BINDINGS),
    shader("kv_append", kv_append::SOURCE, kv_append::BINDINGS),
    shader("linear", linear::SOURCE, linear::BINDINGS),
    shader("linear_direct", linear_direct::SOURCE, linear::BINDINGS),
    shader("moe_route", moe_route::SOURCE, moe_route::BINDINGS),
    shader("rms_norm", rms_norm::SOURCE, rms_norm::BINDINGS),
    shader("rms_slices", rms_slices::SOURCE, rms_slices::BINDINGS),
    shader("rope", rope::SOURCE, rope::BINDINGS),
    shader("scale_segments", scale_segments::SOURCE, scale_segments::BINDINGS),
    shader("scan_carry", scan_carry::SOURCE, scan_carry::BINDINGS),
    shader("scan_chunks", scan_chunks::SOURCE, scan_chunks::BINDINGS),
    shader("scan_output", scan_output::SOURCE, scan_output::BINDINGS),
    shader("short_conv", short_conv::SOURCE, short_conv::BINDINGS),
    shader("silu_gate", silu_gate::SOURCE, silu_gate::BINDINGS),
    shader("ssd_chunks", ssd_chunks::SOURCE, ssd_chunks::BINDINGS),
    shader("ssd_output", ssd_output::SOURCE, ssd_output::BINDINGS),
    shader("top_k", top_k::SOURCE, top_k::BINDINGS),
];

/// What changes from one forward call to the next (`Step` in every shader).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Step {
    /// T: tokens in this call.
    pub t_len: u32,
    /// Chunks of the selective scan: ceil(T / CHUNK).
    pub n_chunks: u32,
    /// Tokens already in the context before this call (the position of its first token):
    /// where rotary embeddings start and how many cached keys attention sees.
    pub past: u32,
    /// Uniform structs are padded to 16 bytes.
    pub(crate) _pad: u32,
}
