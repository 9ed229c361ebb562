//! The few-rows (decode) variant of [`crate::kernels::linear`]: `shaders/gemv.wgsl`. It has the
//! same bindings ([`crate::kernels::linear::BINDINGS`]) and
//! [`crate::kernels::linear::LinearParams`].

/// WGSL source.
pub(crate) const SOURCE: &str = include_str!("../../shaders/gemv.wgsl");
