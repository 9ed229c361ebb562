//! The barrier-free many-rows variant of [`crate::kernels::linear`] for CPU-backed adapters:
//! `shaders/linear_direct.wgsl`. Same bindings, [`crate::kernels::linear::LinearParams`] and
//! workgroup tiling (32 rows × 32 outputs), so it shares bind groups and dispatch sizes.

/// WGSL source.
pub(crate) const SOURCE: &str = include_str!("../../shaders/linear_direct.wgsl");
