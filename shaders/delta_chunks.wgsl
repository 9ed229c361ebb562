// delta_chunks: pass 1 of the Gated DeltaNet's chunked prefill (the WY / UT form of fla and of
// HF's `torch_chunk_gated_delta_rule`), for one value head h and one chunk of C tokens, with
// nothing that depends on the state before the chunk — so every chunk runs at once. With
// c_i = Σ_{s≤i} g_s within the chunk (g: delta_prep's log decays), Γ[i, s] = exp(c_i − c_s),
// q and k those of h's key head (normalised by delta_prep) and β its β:
//
//   A = strict_lower(diag(β) K Kᵀ ⊙ Γ)              (C × C, in workgroup memory)
//   U = (I + A)⁻¹ (β ⊙ V),  W = (I + A)⁻¹ (β ⊙ e^c ⊙ K)  (forward substitution, a column each)
//   P = lower(Q Kᵀ ⊙ Γ)  (the diagonal included)     (C × C, for delta_state)
//
// and c in place of g in xz. delta_state then carries the state from chunk to chunk:
// V' = U − W S, O = e^c ⊙ Q S + P V', S ← e^{c_last} S + (e^{c_last − c} ⊙ K)ᵀ V'.
//
// A workgroup is (value head, chunk): Groups::PerChunk(H_v).

const WG: u32 = 64u;    // invocations per workgroup
const CHUNK: u32 = 64u; // C: tokens per chunk (ssd_chunks' CHUNK: the Step's n_chunks)

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
    v_dim: u32,     // d_v
    v_heads: u32,   // H_v: value heads h·H_k/H_v.. share key head h / (H_v / H_k)
    xz_stride: u32, // floats per row of xz
    beta_at: u32,   // column of β (H_v) in a row of xz; g (H_v) follows, then c replaces it
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> ud: array<f32>;         // (T, conv_dim): q ‖ k ‖ v, q and k normalised
@group(0) @binding(3) var<storage, read_write> xz: array<f32>;   // (T, xz_stride): β, then g → c
@group(0) @binding(4) var<storage, read_write> uw: array<f32>;   // (T, H_v, d_v + d_k): U ‖ W rows
@group(0) @binding(5) var<storage, read_write> pmat: array<f32>; // (chunks, H_v, C, C): P, row-major

var<workgroup> cs: array<f32, CHUNK>;                    // (C) c, the decays' running sum
var<workgroup> bs: array<f32, CHUNK>;                    // (C) β
var<workgroup> amat: array<f32, 2016>;                   // (C·(C−1)/2) A's strict lower triangle, row i at i·(i−1)/2

@compute @workgroup_size(WG)
fn delta_chunks(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let j = wid.y;
    let t0 = j * CHUNK;
    let len = min(CHUNK, step.t_len - t0);
    let kw = p.k_heads * p.k_dim;
    let kh = h / (p.v_heads / p.k_heads);
    let q_at = kh * p.k_dim;         // q of the key head in a row of ud
    let k_at = kw + q_at;            // its k
    let v_at = 2u * kw + h * p.v_dim; // v of h
    let g_at = p.beta_at + p.v_heads + h;
    if (lid < len) {
        let row = (t0 + lid) * p.xz_stride;
        bs[lid] = xz[row + p.beta_at + h];
        cs[lid] = xz[row + g_at];
    }
    workgroupBarrier();
    if (lid == 0u) {
        for (var i = 1u; i < len; i++) {
            cs[i] += cs[i - 1u];
        }
    }
    workgroupBarrier();
    if (lid < len) {
        xz[(t0 + lid) * p.xz_stride + g_at] = cs[lid];
    }
    // A's row i and P's row i, invocation s taking column s ≤ i.
    let p_at = (j * p.v_heads + h) * CHUNK * CHUNK;
    for (var i = 0u; i < len; i++) {
        let s = lid;
        if (s <= i) {
            let ri = (t0 + i) * p.conv_dim;
            let rs = (t0 + s) * p.conv_dim;
            var kk = 0.0;
            var qk = 0.0;
            for (var d = 0u; d < p.k_dim; d++) {
                let ks = ud[rs + k_at + d];
                kk += ud[ri + k_at + d] * ks;
                qk += ud[ri + q_at + d] * ks;
            }
            let decay = exp(cs[i] - cs[s]);
            if (s < i) {
                amat[i * (i - 1u) / 2u + s] = bs[i] * kk * decay;
            }
            pmat[p_at + i * CHUNK + s] = qk * decay;
        }
    }
    workgroupBarrier();
    // U ‖ W, a column at a time: x_i = r_i − Σ_{s<i} A[i, s] x_s, with r = β v (U's d_v
    // columns) or β e^c k (W's d_k).
    let width = p.v_dim + p.k_dim;
    var x: array<f32, CHUNK>;
    for (var col = lid; col < width; col += WG) {
        for (var i = 0u; i < len; i++) {
            let row = (t0 + i) * p.conv_dim;
            var r: f32;
            if (col < p.v_dim) {
                r = bs[i] * ud[row + v_at + col];
            } else {
                r = bs[i] * exp(cs[i]) * ud[row + k_at + col - p.v_dim];
            }
            let a_row = i * (i - 1u) / 2u;
            for (var s = 0u; s < i; s++) {
                r -= amat[a_row + s] * x[s];
            }
            x[i] = r;
            uw[((t0 + i) * p.v_heads + h) * width + col] = r;
        }
    }
}
