// scan_output: pass 3 of the chunked selective scan, and the whole scan of a decode step.
// Each chunk is re-run from its true start state (scan_carry's chunk_h0, or the layer's SSM
// state itself when there is only one chunk) and produces the gated output
//
//   h_t = exp(Δ_t A) ⊙ h_{t-1} + Δ_t u_t B_t
//   y_t = (h_t · C_t + D ⊙ u_t) ⊙ silu(z_t)
//
// The last chunk leaves its final h in the SSM state. A workgroup is 64 channels × one chunk;
// B_t and C_t (shared by every channel) are staged once in workgroup memory. With one chunk the
// same workgroup reads and then writes its channels' state, so there is no race; with several,
// chunk 0 reads chunk_h0, never the state the last chunk writes.
//
// Checkpoints: after token t whose entry in the position map at the start of `capture` is
// c + 1, h is also written to checkpoint c's slot (see conv1d_silu.wgsl for the slot layout).

const WG: u32 = 64u;
const STAGE: u32 = 2048u; // floats of workgroup memory for B ‖ C: CHUNK · 2N ≤ STAGE
const N_MAX: u32 = 64u;   // largest d_state supported (HF Mamba-1 checkpoints use 16)

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    d_inner: u32,      // E·D
    dbc_stride: u32,   // R + 2N: floats between rows of dbc
    dt_rank: u32,      // R: B starts at column R of dbc, C at R + N
    chunk: u32,        // CHUNK: tokens per chunk
    state_offset: u32, // layer · E·D·N: this layer's SSM state in the state buffer
    xz_stride: u32,    // 2·E·D: floats between rows of xz (z is its second half)
    delta_at: u32,     // T_max · E·D: where Δ starts in ud
    map_len: u32,      // T_max: length of the position map at the start of `capture`
    slot_len: u32,     // floats per checkpoint slot
    slot_ssm_at: u32,  // where this layer's SSM state sits in a slot: L·(K-1)·E·D + layer·E·D·N
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> ud: array<f32>;         // (2, T_max, E·D): conv output x, then Δ
@group(0) @binding(3) var<storage, read> dbc: array<f32>;        // (T, R + 2N) δ ‖ B ‖ C
@group(0) @binding(4) var<storage, read> xz: array<f32>;         // (T, 2·E·D) xs ‖ z
@group(0) @binding(5) var<storage, read> a_d: array<f32>;        // (E·D·N + E·D) A ‖ D
@group(0) @binding(6) var<storage, read> chunk_h0: array<f32>;   // (chunks, E·D, N) start states
@group(0) @binding(7) var<storage, read_write> ssm_state: array<f32>; // (layers, E·D, N)
@group(0) @binding(8) var<storage, read_write> y: array<f32>;    // (T, E·D) gated output
@group(0) @binding(9) var<storage, read_write> capture: array<f32>; // (T_max) map (checkpoint number + 1 as an f32 value, 0: none), then (C, slot_len) slots

var<workgroup> bc: array<f32, STAGE>; // (CHUNK, 2N) B ‖ C of this chunk's tokens

fn silu(v: f32) -> f32 {
    return v / (1.0 + exp(-v));
}

// N, fixed when the pipeline is made (the model's state_size, ≤ N_MAX): loops over it have a
// constant trip count, so a GPU's compiler unrolls them and keeps h and A in registers.
override N_STATE: u32 = 16u;

// This workgroup's 64 channels' rows of A, then of the state, staged so that global memory is
// read and written in whole consecutive runs (the 64 rows are adjacent: 64·N floats), and each
// invocation then takes its row from here. Rows padded to N + 1 floats against bank conflicts.
var<workgroup> rows: array<f32, WG * (N_STATE + 1u)>; // (WG, N + 1)

// Where float i of the workgroup's WG·N consecutive row floats sits in rows[].
fn padded(i: u32) -> u32 {
    return (i / N_STATE) * (N_STATE + 1u) + i % N_STATE;
}

@compute @workgroup_size(WG)
fn scan_output(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let di = p.d_inner;
    let j = wid.y;
    let t0 = j * p.chunk;
    let t1 = min(t0 + p.chunk, step.t_len);
    let width = 2u * N_STATE;
    for (var i = lid; i < (t1 - t0) * width; i += WG) {
        let t = t0 + i / width;
        bc[i] = dbc[t * p.dbc_stride + p.dt_rank + i % width];
    }
    let c0 = wid.x * WG;
    let c = c0 + lid;
    let live = c < di;
    // Floats of this workgroup's rows that exist (the last workgroup may run past E·D).
    let live_floats = (min(c0 + WG, di) - c0) * N_STATE;
    let own = lid * (N_STATE + 1u);

    var h: array<f32, N_MAX>; // (N) state of channel c
    var a: array<f32, N_MAX>; // (N) row c of A
    // A's rows, staged, then into registers.
    for (var i = lid; i < live_floats; i += WG) {
        rows[padded(i)] = a_d[c0 * N_STATE + i];
    }
    workgroupBarrier();
    for (var n = 0u; n < N_STATE; n++) {
        a[n] = rows[own + n];
    }
    workgroupBarrier();
    // The start state: the layer's state (one chunk) or this chunk's start (several).
    for (var i = lid; i < live_floats; i += WG) {
        var v: f32;
        if (step.n_chunks == 1u) {
            v = ssm_state[p.state_offset + c0 * N_STATE + i];
        } else {
            v = chunk_h0[j * di * N_STATE + c0 * N_STATE + i];
        }
        rows[padded(i)] = v;
    }
    workgroupBarrier();
    for (var n = 0u; n < N_STATE; n++) {
        h[n] = rows[own + n];
    }

    if (live) {
        let base = c * N_STATE;
        let d_skip = a_d[di * N_STATE + c];
        for (var t = t0; t < t1; t++) {
            let dt = ud[p.delta_at + t * di + c];
            let ut = ud[t * di + c];
            let row = (t - t0) * width;
            var acc = 0.0;
            for (var n = 0u; n < N_STATE; n++) {
                h[n] = exp(dt * a[n]) * h[n] + dt * ut * bc[row + n];
                acc += h[n] * bc[row + N_STATE + n];
            }
            y[t * di + c] = (acc + d_skip * ut) * silu(xz[t * p.xz_stride + di + c]);
            let cp = u32(capture[t]); // a whole number as an f32 value: never a denormal
            if (cp != 0u) {
                let at = p.map_len + (cp - 1u) * p.slot_len + p.slot_ssm_at + base;
                for (var n = 0u; n < N_STATE; n++) {
                    capture[at + n] = h[n];
                }
            }
        }
    }
    // The last chunk leaves its final h in the layer's state: through rows[], in whole runs.
    if (j + 1u == step.n_chunks) {
        workgroupBarrier();
        for (var n = 0u; n < N_STATE; n++) {
            rows[own + n] = h[n];
        }
        workgroupBarrier();
        for (var i = lid; i < live_floats; i += WG) {
            ssm_state[p.state_offset + c0 * N_STATE + i] = rows[padded(i)];
        }
    }
}
