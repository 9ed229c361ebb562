// rms_slices: the RMSNorms of x_proj's output, in place: per token row, each of its three
// slices — Δ's input (R values), B (N) and C (N) — is divided by its own root mean square
// (Falcon-Mamba's weightless norms, HF `FalconMambaWeightlessRMSNorm`), then with HAS_GAINS
// times its gain (Jamba's dt/b/c_layernorm; the gains ‖ in one (R + 2N) vector):
//
//   v[i] = v[i] * inverseSqrt(mean_j(v[j]^2) + eps) (* gains[slice start + i])
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
    flags: u32,   // HAS_GAINS
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

const HAS_GAINS: u32 = 1u;

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dbc: array<f32>; // (T, R + 2N): δ ‖ B ‖ C
@group(0) @binding(3) var<storage, read> gains: array<f32>;     // (R + 2N), a 1-element dummy without HAS_GAINS

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
    let col = select(p.dt_rank + (slice - 1u) * p.d_state, 0u, slice == 0u);
    let start = row * p.stride + col;

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
    let gained = (p.flags & HAS_GAINS) != 0u;
    for (var i = lid; i < len; i += WG) {
        var v = dbc[start + i] * scale;
        if (gained) {
            v *= gains[col + i];
        }
        dbc[start + i] = v;
    }
}
