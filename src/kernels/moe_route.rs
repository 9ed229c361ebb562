//! A mixture of experts' routing on the GPU: the Rust side of `shaders/moe_route.wgsl` — each
//! token's k experts and weights from the router's logits, and each expert's indirect dispatch
//! arguments (the workgroups of its matmuls where any token chose it, zeros where none did).

use crate::blocks::Routing;
use crate::gpu::Binding;
use crate::kernels::{PARAMS, STEP};

/// WGSL source.
pub(crate) const SOURCE: &str = include_str!("../../shaders/moe_route.wgsl");

/// The kernel's bindings.
pub(crate) const BINDINGS: &[Binding] = &[
    STEP,
    PARAMS,                          // MoeRouteParams
    Binding::read(2, "logits"),      // (T, E) router logits
    Binding::read(3, "bias"),        // (E) score correction; a 1-element dummy without HAS_BIAS
    Binding::read(4, "workgroups"),  // (P, 3) u32: each part's workgroups for this T
    Binding::read_write(5, "route"), // (T, 2k): ids (whole numbers as f32 values) ‖ weights
    Binding::read_write(6, "args"),  // (E, P, 3) u32 indirect dispatch arguments
];

/// `routing`: the k largest logits, softmax over them (Granite).
pub(crate) const SOFTMAX_TOP_K: u32 = 0;
/// `routing`: softmax over all, the k most probable (Jamba).
pub(crate) const SOFTMAX: u32 = 1;
/// `routing`: sigmoid scores with a correction and groups (Nemotron-H).
pub(crate) const SIGMOID: u32 = 2;
/// `flags`: normalise the chosen weights.
pub(crate) const NORMALIZE: u32 = 1;
/// `flags`: add `bias` to the scores the choice ranks by.
pub(crate) const HAS_BIAS: u32 = 2;
/// Most expert groups the kernel takes.
pub(crate) const GROUPS_MAX: u32 = 32;

/// `Params` of the shader.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MoeRouteParams {
    /// E.
    pub experts: u32,
    /// k.
    pub top_k: u32,
    /// [`SOFTMAX_TOP_K`], [`SOFTMAX`] or [`SIGMOID`].
    pub routing: u32,
    /// [`NORMALIZE`] | [`HAS_BIAS`].
    pub flags: u32,
    /// Expert groups (1: none).
    pub n_group: u32,
    /// Groups kept.
    pub topk_group: u32,
    /// Multiplies the weights ([`SIGMOID`]).
    pub scale: f32,
    /// P: indirect dispatches per expert.
    pub parts: u32,
}

impl MoeRouteParams {
    /// The parameters of `routing` over `experts` experts choosing `top_k`, with `parts`
    /// dispatches per expert and a score correction if `has_bias`.
    pub(crate) fn new(
        routing: Routing,
        (experts, top_k): (usize, usize),
        parts: usize,
        has_bias: bool,
    ) -> Self {
        let (routing, flags, n_group, topk_group, scale) = match routing {
            Routing::SoftmaxTopK => (SOFTMAX_TOP_K, 0, 1, 1, 1.0),
            Routing::Softmax { renormalize } => (SOFTMAX, if renormalize { NORMALIZE } else { 0 }, 1, 1, 1.0),
            Routing::Sigmoid { n_group, topk_group, normalize, scale } => {
                (SIGMOID, if normalize { NORMALIZE } else { 0 }, n_group as u32, topk_group as u32, scale)
            }
        };
        let flags = flags | if has_bias { HAS_BIAS } else { 0 };
        Self {
            experts: experts as u32,
            top_k: top_k as u32,
            routing,
            flags,
            n_group,
            topk_group,
            scale,
            parts: parts as u32,
        }
    }
}
