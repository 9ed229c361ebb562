// scan_chunks: pass 1 of the chunked selective scan (prefill). The recurrence
//
//   h_t = exp(Δ_t A) ⊙ h_{t-1} + Δ_t u_t B_t        (per channel c and state index n)
//
// is a composition of affine maps h ↦ a·h + b, which is associative. The T tokens are cut into
// chunks of CHUNK tokens; this pass summarises every chunk, in parallel over chunks and
// channels, as the single map it applies: a = exp(A · Σ_t Δ_t) and b = the chunk's state when
// started from zero. scan_carry then chains the chunk maps; scan_output re-runs each chunk from
// its true start state. A workgroup is 64 channels × one chunk: B_t (shared by every channel)
// is staged once in workgroup memory. Each invocation walks its chunk once, token by token,
// updating all N entries of its b (Δ_t and u_t read once per token), with A and b in registers
// (N is a pipeline constant, see scan_output.wgsl); A is read and the maps written through
// workgroup memory, so global memory sees whole consecutive runs of the 64 channels' rows.

const WG: u32 = 64u;
const STAGE: u32 = 2048u; // floats of workgroup memory for B: CHUNK · N ≤ STAGE
const N_MAX: u32 = 64u;   // largest d_state supported (HF Mamba-1 checkpoints use 16)

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    d_inner: u32,    // E·D
    dbc_stride: u32, // R + 2N: floats between rows of dbc
    dt_rank: u32,    // R: B starts at column R of dbc
    chunk: u32,      // CHUNK: tokens per chunk
    delta_at: u32,   // T_max · E·D: where Δ starts in ud
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> ud: array<f32>;       // (2, T_max, E·D): conv output x, then Δ
@group(0) @binding(3) var<storage, read> dbc: array<f32>;      // (T, R + 2N) δ ‖ B ‖ C
@group(0) @binding(4) var<storage, read> a_d: array<f32>;      // (E·D·N + E·D) A ‖ D
@group(0) @binding(5) var<storage, read_write> chunk_ab: array<f32>; // (chunks, 2, E·D, N) a ‖ b

var<workgroup> bs: array<f32, STAGE>; // (CHUNK, N) B of this chunk's tokens

// N, fixed when the pipeline is made (the model's state_size, ≤ N_MAX): loops over it have a
// constant trip count, so a GPU's compiler unrolls them and keeps A and b in registers.
override N_STATE: u32 = 16u;

// This workgroup's 64 channels' rows (of A, then of the maps' a and b), padded to N + 1 floats
// against bank conflicts.
var<workgroup> rows: array<f32, WG * (N_STATE + 1u)>; // (WG, N + 1)

// Where float i of the workgroup's WG·N consecutive row floats sits in rows[].
fn padded(i: u32) -> u32 {
    return (i / N_STATE) * (N_STATE + 1u) + i % N_STATE;
}

@compute @workgroup_size(WG)
fn scan_chunks(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let di = p.d_inner;
    let j = wid.y;
    let t0 = j * p.chunk;
    let t1 = min(t0 + p.chunk, step.t_len);
    for (var i = lid; i < (t1 - t0) * N_STATE; i += WG) {
        let t = t0 + i / N_STATE;
        bs[i] = dbc[t * p.dbc_stride + p.dt_rank + i % N_STATE];
    }
    let c0 = wid.x * WG;
    let c = c0 + lid;
    // Floats of this workgroup's rows that exist (the last workgroup may run past E·D).
    let live_floats = (min(c0 + WG, di) - c0) * N_STATE;
    let own = lid * (N_STATE + 1u);

    var a: array<f32, N_MAX>; // (N) row c of A
    var b: array<f32, N_MAX>; // (N) the chunk's end state from zero
    for (var i = lid; i < live_floats; i += WG) {
        rows[padded(i)] = a_d[c0 * N_STATE + i];
    }
    workgroupBarrier();
    for (var n = 0u; n < N_STATE; n++) {
        a[n] = rows[own + n];
        b[n] = 0.0;
    }
    workgroupBarrier();

    var dsum = 0.0;
    if (c < di) {
        for (var t = t0; t < t1; t++) {
            let dt = ud[p.delta_at + t * di + c];
            let du = dt * ud[t * di + c];
            dsum += dt;
            let row = (t - t0) * N_STATE;
            for (var n = 0u; n < N_STATE; n++) {
                b[n] = exp(dt * a[n]) * b[n] + du * bs[row + n];
            }
        }
    }
    // The maps out through workgroup memory: a = exp(A·ΣΔ), then b.
    let plane = di * N_STATE;
    for (var n = 0u; n < N_STATE; n++) {
        rows[own + n] = exp(a[n] * dsum);
    }
    workgroupBarrier();
    for (var i = lid; i < live_floats; i += WG) {
        chunk_ab[(2u * j) * plane + c0 * N_STATE + i] = rows[padded(i)];
    }
    workgroupBarrier();
    for (var n = 0u; n < N_STATE; n++) {
        rows[own + n] = b[n];
    }
    workgroupBarrier();
    for (var i = lid; i < live_floats; i += WG) {
        chunk_ab[(2u * j + 1u) * plane + c0 * N_STATE + i] = rows[padded(i)];
    }
}
