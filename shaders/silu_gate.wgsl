// silu_gate: the gate of a Mamba-2 block whose grouped RMSNorm comes first (Falcon-H1's
// `mamba_norm_before_gate`): the normalised output y is multiplied, in place, by silu(z) — z
// the gate columns of in_proj's output:
//
//   y[t, c] ← y[t, c] · silu(z[t, z_col + c])   for c < cols
//
// With SIGMOID, Qwen3.5's attention output gate: y (the attention's output, before o_proj) is
// multiplied by σ(z) — z the gate columns q_proj wrote beside q ‖ k ‖ v:
//
//   y[t, c] ← y[t, c] · σ(z[t, z_col + c])
//
// One invocation per (token, channel).

const WG: u32 = 64u; // invocations per workgroup

override SIGMOID: bool = false; // σ(z) instead of silu(z) = z · σ(z)

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    cols: u32,     // E·D (attention: Hq·hd): values per token gated
    y_stride: u32, // floats between rows of y
    z_stride: u32, // floats between rows of z (in_proj's width E·D + conv_dim + H; attention: q ‖ k ‖ v ‖ gate)
    z_col: u32,    // column of the gate's first value in a row of z
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> z: array<f32>;       // (T, z_stride) in_proj's (q_proj's) output, z at z_col
@group(0) @binding(3) var<storage, read_write> y: array<f32>; // (T, y_stride), gated in place

// y · silu(z), or y · σ(z) with SIGMOID (as y / (1 + e^−z), the CPU reference's rounding).
fn gated(y: f32, z: f32) -> f32 {
    let d = 1.0 + exp(-z);
    return select(y * (z / d), y / d, SIGMOID);
}

@compute @workgroup_size(WG)
fn silu_gate(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = (wid.y * nwg.x + wid.x) * WG + lid;
    if (i >= step.t_len * p.cols) {
        return;
    }
    let t = i / p.cols;
    let c = i % p.cols;
    let at = t * p.y_stride + c;
    y[at] = gated(y[at], z[t * p.z_stride + p.z_col + c]);
}
