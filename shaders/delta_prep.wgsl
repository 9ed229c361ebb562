// delta_prep: what Qwen3.5's Gated DeltaNet needs per token before its recurrence, from the
// conv's output ud (T, conv_dim) = q ‖ k ‖ v and the projections in xz:
//
//   q ← q · (Σ q² + 10⁻⁶)^−½ · d_k^−½,  k ← k · (Σ k² + 10⁻⁶)^−½   per key head, in place in ud
//   β = σ(b),  g = A · softplus(a + dt_bias)  (A = −exp(A_log)), per value head, in place of
//   b and a in xz
//
// One workgroup per (token, key head): its WG invocations sum the squares of q's and k's
// strided slices, reduce them as a tree in workgroup memory and scale their slices. The
// workgroup of key head 0 also writes the token's β and g.

const WG: u32 = 64u; // invocations per workgroup (a power of two; see the tree reduction)

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    conv_dim: u32,  // 2·H_k·d_k + H_v·d_v: floats per row of ud
    k_heads: u32,   // H_k
    k_dim: u32,     // d_k
    v_heads: u32,   // H_v
    xz_stride: u32, // floats per row of xz
    beta_at: u32,   // column of b (H_v) in a row of xz; a (H_v) follows
    scale: f32,     // d_k^−½
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> ud: array<f32>; // (T, conv_dim): q ‖ k ‖ v, q and k normalised in place
@group(0) @binding(3) var<storage, read_write> xz: array<f32>; // (T, xz_stride): b → β, a → g in place
@group(0) @binding(4) var<storage, read> a_dt: array<f32>;     // (2·H_v): A = −exp(A_log) ‖ dt_bias

var<workgroup> partial: array<f32, 128>; // (2, WG) sums of squares of q's and of k's slices

fn softplus(v: f32) -> f32 {
    // softplus(v) = max(v, 0) + log1p(e^−|v|), with log1p(x) = 2·atanh(x / (2 + x)) summed as
    // its series (x ≤ 1, so s ≤ 1/3: eight terms reach f32's precision). No log(1 + e^v): the
    // rounding of 1 + e^v loses Δ's digits below v ≈ −8 (5% at −15), and many GPUs' log is
    // only accurate to 2^−21 absolute near 1. Above 20 it is v, as torch's threshold gives.
    let x = exp(-abs(v));
    let s = x / (2.0 + x);
    let s2 = s * s;
    let odd = 1.0 / 9.0 + s2 * (1.0 / 11.0 + s2 * (1.0 / 13.0 + s2 * (1.0 / 15.0)));
    let series = 1.0 + s2 * (1.0 / 3.0 + s2 * (1.0 / 5.0 + s2 * (1.0 / 7.0 + s2 * odd)));
    return max(v, 0.0) + 2.0 * s * series;
}

@compute @workgroup_size(WG)
fn delta_prep(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = wid.y * nwg.x + wid.x;
    if (row >= step.t_len * p.k_heads) {
        return; // uniform per workgroup: the whole workgroup leaves together
    }
    let t = row / p.k_heads;
    let q_at = t * p.conv_dim + (row % p.k_heads) * p.k_dim;
    let k_at = q_at + p.k_heads * p.k_dim;
    var sq = 0.0;
    var sk = 0.0;
    for (var i = lid; i < p.k_dim; i += WG) {
        let q = ud[q_at + i];
        let k = ud[k_at + i];
        sq += q * q;
        sk += k * k;
    }
    partial[lid] = sq;
    partial[WG + lid] = sk;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if (lid < stride) {
            partial[lid] += partial[lid + stride];
            partial[WG + lid] += partial[WG + lid + stride];
        }
        workgroupBarrier();
    }
    let q_scale = inverseSqrt(partial[0] + 1e-6) * p.scale;
    let k_scale = inverseSqrt(partial[WG] + 1e-6);
    for (var i = lid; i < p.k_dim; i += WG) {
        ud[q_at + i] *= q_scale;
        ud[k_at + i] *= k_scale;
    }
    if (row % p.k_heads == 0u) {
        let at = t * p.xz_stride + p.beta_at;
        for (var h = lid; h < p.v_heads; h += WG) {
            let b = xz[at + h];
            let a = xz[at + p.v_heads + h];
            xz[at + h] = 1.0 / (1.0 + exp(-b));
            xz[at + p.v_heads + h] = a_dt[h] * softplus(a + a_dt[p.v_heads + h]);
        }
    }
}
