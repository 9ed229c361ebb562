// rms_slices: Falcon-Mamba's weightless RMSNorms (HF `FalconMambaWeightlessRMSNorm`), in place
// on x_proj's output: per token row, each of its three slices — Δ's input (R values), B (N)
// and C (N) — is divided by its own root mean square.
//
//   v[i] = v[i] * inverseSqrt(mean_j(v[j]^2) + eps)      for v in (δ, B, C) of row t
//
// One workgroup per (row, slice): workgroup_id.z picks the slice; rows are spread over a 2-D
// grid (x, y) so more than 65,535 can be dispatched. The WG invocations sum the squares of a
// strided part of the slice, reduce them as a tree in workgroup memory, then scale it.

const WG: u32 = 64u; // invocations per workgroup (a power of two; see the tree reduction)

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    stride: u32,  // floats per row of dbc: R + 2N
    dt_rank: u32, // R: length of the δ slice (columns 0..R)
    d_state: u32, // N: length of the B (R..R+N) and C (R+N..R+2N) slices
    eps: f32,     // mixer_rms_eps
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dbc: array<f32>; // (T, R + 2N): δ ‖ B ‖ C

var<workgroup> partial: array<f32, WG>; // (WG) per-invocation sums of squares

@compute @workgroup_size(WG)
fn rms_slices(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = wid.y * nwg.x + wid.x;
    if (row >= step.t_len) {
        return; // uniform per workgroup: the whole workgroup leaves together
    }
    let slice = wid.z; // 0: δ, 1: B, 2: C
    let len = select(p.d_state, p.dt_rank, slice == 0u);
    let start = row * p.stride + select(p.dt_rank + (slice - 1u) * p.d_state, 0u, slice == 0u);

    var sum = 0.0;
    for (var i = lid; i < len; i += WG) {
        let v = dbc[start + i];
        sum += v * v;
    }
    partial[lid] = sum;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s /= 2u) {
        if (lid < s) {
            partial[lid] += partial[lid + s];
        }
        workgroupBarrier();
    }

    let scale = inverseSqrt(partial[0] / f32(len) + p.eps);
    for (var i = lid; i < len; i += WG) {
        dbc[start + i] *= scale;
    }
}
