//! The few-rows (decode) variant of [`crate::kernels::linear`]: `shaders/gemv.wgsl`. It has the
//! same bindings and [`crate::kernels::linear::LinearParams`].

/// WGSL source.
pub const SOURCE: &str = include_str!("../../shaders/gemv.wgsl");
