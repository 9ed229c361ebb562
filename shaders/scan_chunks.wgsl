// scan_chunks: pass 1 of the chunked selective scan (prefill). The recurrence
//
//   h_t = exp(Δ_t A) ⊙ h_{t-1} + Δ_t u_t B_t        (per channel c and state index n)
//
// is a composition of affine maps h ↦ a·h + b, which is associative. The T tokens are cut into
// chunks of CHUNK tokens; this pass summarises every chunk, in parallel over chunks and
// channels, as the single map it applies: a = exp(A · Σ_t Δ_t) and b = the chunk's state when
// started from zero. scan_carry then chains the chunk maps; scan_output re-runs each chunk from
// its true start state. A workgroup is 64 channels × one chunk: B_t (shared by every channel)
// is staged once in workgroup memory.

const WG: u32 = 64u;
const STAGE: u32 = 2048u; // floats of workgroup memory for B: CHUNK · N ≤ STAGE

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    _pad0: u32,
    _pad1: u32,
}

struct Params {
    d_inner: u32,    // E·D
    d_state: u32,    // N
    dbc_stride: u32, // R + 2N: floats between rows of dbc
    dt_rank: u32,    // R: B starts at column R of dbc
    chunk: u32,      // CHUNK: tokens per chunk
    delta_at: u32,   // T_max · E·D: where Δ starts in ud
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> ud: array<f32>;       // (2, T_max, E·D): conv output x, then Δ
@group(0) @binding(3) var<storage, read> dbc: array<f32>;      // (T, R + 2N) δ ‖ B ‖ C
@group(0) @binding(4) var<storage, read> a_d: array<f32>;      // (E·D·N + E·D) A ‖ D
@group(0) @binding(5) var<storage, read_write> chunk_ab: array<f32>; // (chunks, 2, E·D, N) a ‖ b

var<workgroup> bs: array<f32, STAGE>; // (CHUNK, N) B of this chunk's tokens

@compute @workgroup_size(WG)
fn scan_chunks(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let n_state = p.d_state;
    let di = p.d_inner;
    let j = wid.y;
    let t0 = j * p.chunk;
    let t1 = min(t0 + p.chunk, step.t_len);
    for (var i = lid; i < (t1 - t0) * n_state; i += WG) {
        let t = t0 + i / n_state;
        bs[i] = dbc[t * p.dbc_stride + p.dt_rank + i % n_state];
    }
    workgroupBarrier();

    let c = wid.x * WG + lid;
    if (c >= di) {
        return;
    }
    var dsum = 0.0;
    for (var t = t0; t < t1; t++) {
        dsum += ud[p.delta_at + t * di + c];
    }
    let plane = di * n_state;
    for (var n = 0u; n < n_state; n++) {
        let a = a_d[c * n_state + n];
        var b = 0.0;
        for (var t = t0; t < t1; t++) {
            let dt = ud[p.delta_at + t * di + c];
            b = exp(dt * a) * b + dt * ud[t * di + c] * bs[(t - t0) * n_state + n];
        }
        chunk_ab[(2u * j) * plane + c * n_state + n] = exp(a * dsum);
        chunk_ab[(2u * j + 1u) * plane + c * n_state + n] = b;
    }
}
