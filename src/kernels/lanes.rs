//! The sum over a 64-invocation workgroup that the GEMV kernels end in: `lanes_sum` in
//! `gemv_coalesced`, `decode_in_proj` and `decode_out_proj`. Each shader writes out (alike, and
//! standing alone) the tree version: its invocations' vec4s halved in workgroup memory, seven
//! barriers. For adapters with `wgpu::Features::SUBGROUP`, [`subgroup_source`] gives the same
//! kernel with [`SUBGROUP_BLOCK`] in that block's place: `subgroupAdd` within each subgroup
//! (registers, no barrier), each subgroup's sum written at its `subgroup_id`, one barrier, then
//! the subgroups' sums added in id order — the same order on every run (the hardware's
//! subgroup size fixes it), the tree's sum within rounding (`tests/gpu_subgroups.rs`), and
//! nothing assumed about how the hardware groups invocations (the builtins say). A model picks
//! one version at load (`GpuModelOptions::subgroups`).
//!
//! Only natively: wgpu's WebGPU backend does not request the browser's `subgroups` feature,
//! and naga, which compiles our WGSL natively, rejects the `enable subgroups;` directive a
//! browser would need, so the subgroup version has none.

use std::sync::LazyLock;

use crate::kernels::{decode_in_proj, decode_out_proj, gemv_coalesced};

/// First line of the tree block in each shader.
const BEGIN: &str = "// ---- lanes_sum: ";
/// Last line of the tree block.
const END: &str = "// ---- end of lanes_sum ----\n";

/// What replaces the tree block where the model uses subgroups.
pub const SUBGROUP_BLOCK: &str = r#"// ---- lanes_sum, with subgroup operations (src/kernels/lanes.rs): each subgroup's sum by
// subgroupAdd, written at its subgroup_id; after one barrier, the subgroups' sums in id order.

// The invocation ids lanes_sum needs: the kernel's entry point takes this struct.
struct Lanes {
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_invocation_id) lane: u32, // this invocation's index in its subgroup
    @builtin(subgroup_id) subgroup: u32,        // its subgroup's index in the workgroup
    @builtin(num_subgroups) subgroups: u32,     // subgroups in the workgroup (64 / their size)
}

var<workgroup> lanes_partial: array<vec4<f32>, 64>; // (subgroups ≤ 64) each subgroup's sums

// Σ v over the workgroup's 64 invocations, returned to every invocation. Called once per
// invocation, in uniform control flow.
fn lanes_sum(v: vec4<f32>, lanes: Lanes) -> vec4<f32> {
    let sum = subgroupAdd(v);
    if (lanes.lane == 0u) {
        lanes_partial[lanes.subgroup] = sum;
    }
    workgroupBarrier();
    var total = lanes_partial[0];
    for (var i = 1u; i < lanes.subgroups; i++) {
        total += lanes_partial[i];
    }
    return total;
}
"#;

/// The kernels that end in `lanes_sum`, by name, with their (tree) sources.
pub const KERNELS: [(&str, &str); 3] = [
    ("gemv_coalesced", gemv_coalesced::SOURCE),
    ("decode_in_proj", decode_in_proj::SOURCE),
    ("decode_out_proj", decode_out_proj::SOURCE),
];

/// The tree block of `source` (from its first line to its last), where it has one.
pub fn tree_block(source: &str) -> Option<&str> {
    tree_span(source).map(|span| &source[span])
}

/// Where [`tree_block`] lies in `source`.
fn tree_span(source: &str) -> Option<std::ops::Range<usize>> {
    let start = source.find(BEGIN)?;
    let end = start + source[start..].find(END)? + END.len();
    Some(start..end)
}

/// `source` with its tree block replaced by [`SUBGROUP_BLOCK`] (`None` without one).
pub(crate) fn with_subgroups(source: &str) -> Option<String> {
    let span = tree_span(source)?;
    Some([&source[..span.start], SUBGROUP_BLOCK, &source[span.end..]].concat())
}

static SUBGROUP_SOURCES: LazyLock<Vec<(&str, String)>> = LazyLock::new(|| {
    KERNELS.iter().filter_map(|&(name, source)| Some((name, with_subgroups(source)?))).collect()
});

/// The subgroup version of the kernel `name`'s WGSL, for the kernels that end in `lanes_sum`;
/// `None` for every other kernel.
pub fn subgroup_source(name: &str) -> Option<&'static str> {
    SUBGROUP_SOURCES.iter().find(|(n, _)| *n == name).map(|(_, source)| source.as_str())
}
