// head_norm: per-head RMSNorms of the queries and keys before RoPE (LFM2's q_layernorm /
// k_layernorm, HF `Lfm2RMSNorm` over head_dim), in place in the attention's q ‖ k ‖ v rows:
//
//   x[t, j·hd + i] ← x[t, j·hd + i] · inverseSqrt(mean_i(x[t, j·hd + i]²) + eps) · g_j[i]
//
// for heads j < Hq + Hkv (q's heads, then k's: contiguous from column 0), g_j the q gain for
// j < Hq and the k gain after. One workgroup per (token, head), rows on a 2-D grid; each
// invocation reads and then writes the same strided slice, so in place is race-free.

const WG: u32 = 64u; // invocations per workgroup (a power of two; see the tree reduction)

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    stride: u32,   // floats per token row of x: Hq·hd + 2·Hkv·hd
    heads: u32,    // Hq + Hkv: the heads normed per token
    q_heads: u32,  // Hq: the first heads, which take the q gain
    head_dim: u32, // hd
    eps: f32,      // ε
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> x: array<f32>; // (T, stride): q ‖ k ‖ v
@group(0) @binding(3) var<storage, read> gains: array<f32>;   // (2, hd): q's gain, then k's

var<workgroup> partial: array<f32, WG>; // (WG) per-invocation sums of squares

@compute @workgroup_size(WG)
fn head_norm(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = wid.y * nwg.x + wid.x;
    if (row >= step.t_len * p.heads) {
        return; // uniform per workgroup: the whole workgroup leaves together
    }
    let head = row % p.heads;
    let base = (row / p.heads) * p.stride + head * p.head_dim;
    let gain = select(p.head_dim, 0u, head < p.q_heads);

    var sum = 0.0;
    for (var i = lid; i < p.head_dim; i += WG) {
        let v = x[base + i];
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

    let scale = inverseSqrt(partial[0] / f32(p.head_dim) + p.eps);
    for (var i = lid; i < p.head_dim; i += WG) {
        x[base + i] = x[base + i] * scale * gains[gain + i];
    }
}
