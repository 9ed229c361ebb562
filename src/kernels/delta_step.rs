//! The Gated DeltaNet's recurrence token by token: a decode step's whole state update in one
//! dispatch. The Rust side of `shaders/delta_step.wgsl` (its `Params` are
//! [`DeltaStateParams`](crate::kernels::delta_state::DeltaStateParams), `c_at` naming β).

use crate::gpu::Binding;
use crate::kernels::{PARAMS, STEP};

/// WGSL source.
pub(crate) const SOURCE: &str = include_str!("../../shaders/delta_step.wgsl");

/// The kernel's bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                              // DeltaStateParams
    Binding::read(2, "ud"),              // (T, conv_dim): q ‖ k ‖ v, q and k normalised
    Binding::read(3, "xz"),              // (T, xz_stride): β, g at beta_at
    Binding::read_write(4, "ssm_state"), // (…, H_v, d_v, d_k) at state_offset
    Binding::read_write(5, "y"),         // (T, H_v·d_v)
    Binding::read_write(6, "capture"),   // (T_max) map, then (captures, slot_len) slots
];
