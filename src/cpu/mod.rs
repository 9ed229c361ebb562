//! The CPU reference implementation: [`CpuModel`] (forward pass), the f32 [`ops`] and the
//! matrix products ([`matmul`]) they use.

#[cfg(target_arch = "x86_64")]
mod avx2;
pub(crate) mod conv;
mod exp;
pub(crate) mod matmul;
mod model;
pub mod ops;
mod scan_portable;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd128;
mod spread;
pub mod threads;

pub use model::{CHUNK_TOKENS, CpuModel};
