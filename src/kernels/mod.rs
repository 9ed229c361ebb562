//! One Rust wrapper per WGSL kernel in `shaders/`, named like the shader file and its entry
//! point: the WGSL source, the kernel's bindings in order, and its uniform parameter struct
//! (field for field the `Params` of the shader). Pipelines are compiled once at load
//! ([`crate::gpu_model`]); bind groups are made once; only dispatches happen per step.
//!
//! Every kernel of the forward pass takes the shared [`Step`] uniform at binding 0 (written
//! once per forward call) and its own static `Params` at binding 1.
//!
//! Rust is the source of truth for that contract: `tests/kernel_contract.rs` reflects every
//! shader with naga and checks each `Params` and `Step` (size, member names and offsets) and
//! the constants both sides use (flags, `TILE`, `K_MAX`, `N_MAX`, `STAGE`...) against the
//! Rust structs and constants here.

pub mod argmax;
pub mod conv1d_silu;
pub mod embedding;
pub mod gemv;
pub mod gemv_coalesced;
pub mod linear;
pub mod linear_direct;
pub mod rms_norm;
pub mod rms_slices;
pub mod scan_carry;
pub mod scan_chunks;
pub mod scan_output;
pub mod ssd_chunks;
pub mod ssd_output;
pub mod top_k;

pub use argmax::Argmax;
pub use rms_norm::RmsNorm;
pub use top_k::TopK;

/// Every shader the crate compiles, as (file stem = entry point, WGSL source). The shader
/// validation test checks that this list and the files in `shaders/` are the same set.
pub const SHADERS: &[(&str, &str)] = &[
    ("argmax", argmax::SOURCE),
    ("conv1d_silu", conv1d_silu::SOURCE),
    ("embedding", embedding::SOURCE),
    ("gemv", gemv::SOURCE),
    ("gemv_coalesced", gemv_coalesced::SOURCE),
    ("linear", linear::SOURCE),
    ("linear_direct", linear_direct::SOURCE),
    ("rms_norm", rms_norm::SOURCE),
    ("rms_slices", rms_slices::SOURCE),
    ("scan_carry", scan_carry::SOURCE),
    ("scan_chunks", scan_chunks::SOURCE),
    ("scan_output", scan_output::SOURCE),
    ("ssd_chunks", ssd_chunks::SOURCE),
    ("ssd_output", ssd_output::SOURCE),
    ("top_k", top_k::SOURCE),
];

/// What changes from one forward call to the next (`Step` in every shader).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Step {
    /// T: tokens in this call.
    pub t_len: u32,
    /// Chunks of the selective scan: ceil(T / CHUNK).
    pub n_chunks: u32,
    /// Uniform structs are padded to 16 bytes.
    pub _pad: [u32; 2],
}
