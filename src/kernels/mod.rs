//! One Rust wrapper per WGSL kernel in `shaders/`, named like the shader file and its entry
//! point. Each wrapper compiles its pipeline once, binds buffers once, and encodes dispatches.

pub mod rms_norm;

pub use rms_norm::RmsNorm;

/// Every shader the crate compiles, as (file stem = entry point, WGSL source). The shader
/// validation test checks that this list and the files in `shaders/` are the same set.
pub const SHADERS: &[(&str, &str)] = &[("rms_norm", rms_norm::SOURCE)];
