//! An MLP's activation between its projections (gated: `act(gate · s) · up`; plain: `act(up)`),
//! optionally as one routed expert of a mixture: the Rust side of `shaders/gated_act.wgsl`.

use crate::blocks::Activation;
use crate::gpu::Binding;
use crate::kernels::{PARAMS, STEP};

/// WGSL source.
pub(crate) const SOURCE: &str = include_str!("../../shaders/gated_act.wgsl");

/// The kernel's bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                      // GatedActParams
    Binding::read(2, "x"),       // (T, x_stride): gate and up at their columns
    Binding::read(3, "route"), // (T, 2·top_k): ids (whole numbers as f32 values) ‖ weights; a dummy when not routed
    Binding::read_write(4, "y"), // (T, y_stride)
];

/// Invocations per workgroup.
pub(crate) const WG: u32 = 64;

/// `expert` of a call that is not a routed expert's.
pub(crate) const NOT_ROUTED: u32 = u32::MAX;

/// The shader's `act` value for `act`.
pub(crate) fn act_code(act: Activation) -> u32 {
    match act {
        Activation::Silu => 0,
        Activation::Gelu => 1,
        Activation::GeluTanh => 2,
        Activation::Relu2 => 3,
    }
}

/// `Params` of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct GatedActParams {
    /// I: values per token written.
    pub inner: u32,
    /// Floats between rows of x.
    pub x_stride: u32,
    /// Column of the gate's first value (gated).
    pub gate_col: u32,
    /// Column of up's first value.
    pub up_col: u32,
    /// Floats between rows of y.
    pub y_stride: u32,
    /// [`act_code`].
    pub act: u32,
    /// 1: gated; 0: plain.
    pub gated: u32,
    /// Multiplies the gate before the activation.
    pub gate_scale: f32,
    /// The routed expert's id, or [`NOT_ROUTED`].
    pub expert: u32,
    /// Routed: experts each token chose.
    pub top_k: u32,
    /// Uniform structs are padded to 16 bytes.
    pub _pad: [u32; 2],
}
