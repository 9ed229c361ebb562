//! The decode GEMV for real GPUs: `shaders/gemv_coalesced.wgsl`, a workgroup per
//! [`OUTPUTS_PER_GROUP`] outputs reading W's rows with adjacent invocations at adjacent
//! addresses. Same bindings and [`crate::kernels::linear::LinearParams`] as
//! [`crate::kernels::linear`] and [`crate::kernels::gemv`].

/// WGSL source (its workgroup sum a tree; [`crate::kernels::lanes`] makes the subgroup version).
pub(crate) const SOURCE: &str = include_str!("../../shaders/gemv_coalesced.wgsl");

/// Outputs one workgroup computes (`ROWS` in the shader).
pub const OUTPUTS_PER_GROUP: u32 = 4;

/// Workgroups for `rows` rows of X and `n_out` outputs.
pub(crate) fn groups(rows: u32, n_out: u32) -> (u32, u32, u32) {
    (n_out.div_ceil(OUTPUTS_PER_GROUP), rows, 1)
}
