// delta_state: pass 2 of the Gated DeltaNet's chunked prefill (see delta_chunks.wgsl): the
// state carried from chunk to chunk, and the output. For value head h, a block of JB of its
// d_v value channels (S's columns are independent), the state block S (d_k, JB) in workgroup
// memory, and per chunk, from delta_chunks' U, W, P and c:
//
//   V' = U − W S                                   (C, JB)
//   O  = e^c ⊙ (Q S) + P V'                         (C, JB) → y
//   S  ← e^{c_last} S + (e^{c_last − c} ⊙ K)ᵀ V'
//
// Checkpoints: after token i of a chunk whose entry in the position map at the start of
// `capture` is n + 1, the state there, e^{c_i} S + (e^{c_i − c} ⊙ K_{≤i})ᵀ V'_{≤i}, goes to
// checkpoint n's slot (see conv1d_silu.wgsl for the slot layout) — out of the same pass.
// The state is stored per head transposed, (H_v, d_v, d_k): channel j's d_k entries together.
//
// A workgroup is (value head, block of JB channels), Groups::Fixed(H_v · ceil(d_v / JB)).

const WG: u32 = 128u;   // invocations per workgroup
const CHUNK: u32 = 64u; // C: tokens per chunk
const JB: u32 = 16u;    // value channels per workgroup
const DK_MAX: u32 = 128u; // largest d_k supported

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    conv_dim: u32,     // 2·H_k·d_k + H_v·d_v: floats per row of ud
    k_heads: u32,      // H_k
    k_dim: u32,        // d_k
    v_dim: u32,        // d_v
    v_heads: u32,      // H_v
    xz_stride: u32,    // floats per row of xz
    c_at: u32,         // column of c (H_v) in a row of xz
    state_offset: u32, // this layer's state (H_v, d_v, d_k) in the SSM state buffer
    map_len: u32,      // T_max: length of the position map at the start of `capture`
    slot_len: u32,     // floats per checkpoint slot
    slot_ssm_at: u32,  // where this layer's state sits in a slot
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> ud: array<f32>;               // (T, conv_dim): q ‖ k ‖ v, q and k normalised
@group(0) @binding(3) var<storage, read> xz: array<f32>;               // (T, xz_stride): c at c_at
@group(0) @binding(4) var<storage, read> uw: array<f32>;               // (T, H_v, d_v + d_k): U ‖ W rows
@group(0) @binding(5) var<storage, read> pmat: array<f32>;             // (chunks, H_v, C, C): P
@group(0) @binding(6) var<storage, read_write> ssm_state: array<f32>;  // (…, H_v, d_v, d_k) at state_offset
@group(0) @binding(7) var<storage, read_write> y: array<f32>;          // (T, H_v·d_v)
@group(0) @binding(8) var<storage, read_write> capture: array<f32>;    // (T_max) map, then (captures, slot_len) slots

var<workgroup> sb: array<f32, 2048>; // (DK_MAX · JB) the state block S[d, jj] at d·JB + jj
var<workgroup> vp: array<f32, 1024>; // (C · JB) V'[i, jj] at i·JB + jj
var<workgroup> cs: array<f32, CHUNK>; // (C) c

@compute @workgroup_size(WG)
fn delta_state(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let blocks = (p.v_dim + JB - 1u) / JB;
    let h = wid.x / blocks;
    let j0 = (wid.x % blocks) * JB;
    let dk = p.k_dim;
    let kw = p.k_heads * dk;
    let kh = h / (p.v_heads / p.k_heads);
    let q_at = kh * dk;
    let k_at = kw + q_at;
    let width = p.v_dim + dk;
    let vw = p.v_heads * p.v_dim;
    let state_at = (h * p.v_dim + j0) * dk; // channel j0's entries, in the layer's state
    for (var e = lid; e < dk * JB; e += WG) {
        let d = e / JB;
        let jj = e % JB;
        if (j0 + jj < p.v_dim) {
            sb[e] = ssm_state[p.state_offset + state_at + jj * dk + d];
        } else {
            sb[e] = 0.0;
        }
    }
    for (var j = 0u; j < step.n_chunks; j++) {
        let t0 = j * CHUNK;
        let len = min(CHUNK, step.t_len - t0);
        if (lid < len) {
            cs[lid] = xz[(t0 + lid) * p.xz_stride + p.c_at + h];
        }
        workgroupBarrier();
        // V' = U − W S
        for (var e = lid; e < len * JB; e += WG) {
            let i = e / JB;
            let jj = e % JB;
            let row = ((t0 + i) * p.v_heads + h) * width;
            var ws = 0.0;
            for (var d = 0u; d < dk; d++) {
                ws += uw[row + p.v_dim + d] * sb[d * JB + jj];
            }
            let col = min(j0 + jj, p.v_dim - 1u);
            vp[e] = uw[row + col] - ws;
        }
        workgroupBarrier();
        // O = e^c ⊙ (Q S) + P V'
        let p_at = (j * p.v_heads + h) * CHUNK * CHUNK;
        for (var e = lid; e < len * JB; e += WG) {
            let i = e / JB;
            let jj = e % JB;
            let row = (t0 + i) * p.conv_dim;
            var qs = 0.0;
            for (var d = 0u; d < dk; d++) {
                qs += ud[row + q_at + d] * sb[d * JB + jj];
            }
            var o = exp(cs[i]) * qs;
            for (var s = 0u; s <= i; s++) {
                o += pmat[p_at + i * CHUNK + s] * vp[s * JB + jj];
            }
            if (j0 + jj < p.v_dim) {
                y[(t0 + i) * vw + h * p.v_dim + j0 + jj] = o;
            }
        }
        // Checkpoints inside the chunk (S and V' are only read here).
        for (var i = 0u; i < len; i++) {
            let cp = u32(capture[t0 + i]); // a whole number as an f32 value: never a denormal
            if (cp != 0u) {
                let at = p.map_len + (cp - 1u) * p.slot_len + p.slot_ssm_at + state_at;
                for (var e = lid; e < dk * JB; e += WG) {
                    let d = e / JB;
                    let jj = e % JB;
                    var v = exp(cs[i]) * sb[e];
                    for (var s = 0u; s <= i; s++) {
                        v += exp(cs[i] - cs[s]) * ud[(t0 + s) * p.conv_dim + k_at + d] * vp[s * JB + jj];
                    }
                    if (j0 + jj < p.v_dim) {
                        capture[at + jj * dk + d] = v;
                    }
                }
            }
        }
        workgroupBarrier();
        // S ← e^{c_last} S + (e^{c_last − c} ⊙ K)ᵀ V'
        let last = cs[len - 1u];
        for (var e = lid; e < dk * JB; e += WG) {
            let d = e / JB;
            let jj = e % JB;
            var v = exp(last) * sb[e];
            for (var s = 0u; s < len; s++) {
                v += exp(last - cs[s]) * ud[(t0 + s) * p.conv_dim + k_at + d] * vp[s * JB + jj];
            }
            sb[e] = v;
        }
        workgroupBarrier();
    }
    for (var e = lid; e < dk * JB; e += WG) {
        let d = e / JB;
        let jj = e % JB;
        if (j0 + jj < p.v_dim) {
            ssm_state[p.state_offset + state_at + jj * dk + d] = sb[e];
        }
    }
}
