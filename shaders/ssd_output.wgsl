// ssd_output: pass 3 of Mamba-2's chunked scan, and the whole scan of a decode step (see
// ssd_chunks.wgsl for the recurrence). Each chunk is re-run from its true start state
// (scan_carry's chunk_h0, or the layer's SSM state itself when there is only one chunk) and
// produces the gated output
//
//   y_t[c] = (Σ_n h_t[c, n] C_t[g, n] + D[hd] x_t[c]) · silu(z_t[c])
//
// (the gated RMSNorm that follows is rms_norm over groups) — or, with GATE false, the output
// without the gate (Falcon-H1's norm before the gate: silu_gate.wgsl gates after the norm). The last chunk leaves its final h
// in the SSM state. A workgroup is 64 / SPLIT channels of one group × one chunk; each channel's
// N state entries are split over SPLIT lanes (lane l holds n = l, l + SPLIT, ...: at most
// N_LANE, in registers, not a 128-float array spilled to memory), whose parts of Σ_n h·C are
// added in lane order through workgroup memory (one barrier per token). The group's B ‖ C rows
// are staged in workgroup memory, a tile of STAGE / 2N tokens at a time. With one chunk the
// same invocation reads and then writes its state entries, so there is no race; with several,
// chunk 0 reads chunk_h0, never the state the last chunk writes.
//
// Checkpoints: after token t whose entry in the position map at the start of `capture` is
// c + 1, h is also written to checkpoint c's slot (see conv1d_silu.wgsl for the slot layout).

const WG: u32 = 64u;
const STAGE: u32 = 2048u; // floats of workgroup memory for a tile of B ‖ C rows
const N_MAX: u32 = 256u;  // largest d_state supported (Mamba-2 checkpoints use 128)
const N_LANE: u32 = 16u;  // most state entries one lane holds: N ≤ SPLIT · N_LANE

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    d_inner: u32,        // E·D = H·P channels
    u_stride: u32,       // conv_dim = E·D + 2·G·N: floats between rows of u (x ‖ B ‖ C)
    proj_stride: u32,    // E·D + conv_dim + H: floats between rows of zxbcdt (z first)
    dt_at: u32,          // E·D + conv_dim: where δ (H) starts in a zxbcdt row
    head_dim: u32,       // P
    n_heads: u32,        // H: A at a_dt[hd], D at a_dt[H + hd], dt_bias at a_dt[2H + hd]
    n_groups: u32,       // G: B of group g at column E·D + g·N of u, C at E·D + (G + g)·N
    group_channels: u32, // E·D / G: channels per group
    group_wgs: u32,      // workgroups per group: ceil(E·D / G / WG)
    chunk: u32,          // CHUNK: tokens per chunk
    dt_min: f32,         // time_step_limit
    dt_max: f32,
    state_offset: u32,   // layer · E·D·N: this layer's SSM state in the state buffer
    map_len: u32,        // T_max: length of the position map at the start of `capture`
    slot_len: u32,       // floats per checkpoint slot
    slot_ssm_at: u32,    // where this layer's SSM state sits in a slot: L·(K-1)·conv_dim + layer·E·D·N
    u_at: u32,           // where u's row 0 starts in `u` (0; the fused decode step: E·D, u in zxbcdt)
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> u: array<f32>;            // (T, conv_dim) x ‖ B ‖ C after conv
@group(0) @binding(3) var<storage, read> zxbcdt: array<f32>;       // (T, E·D + conv_dim + H) in_proj output
@group(0) @binding(4) var<storage, read> a_dt: array<f32>;         // (3·H) A = −exp(A_log) ‖ D ‖ dt_bias
@group(0) @binding(5) var<storage, read> chunk_h0: array<f32>;     // (chunks, E·D, N) start states
@group(0) @binding(6) var<storage, read_write> ssm_state: array<f32>; // (layers, H, P, N)
@group(0) @binding(7) var<storage, read_write> y: array<f32>;      // (T, E·D) gated (GATE) output
@group(0) @binding(8) var<storage, read_write> capture: array<f32>; // (T_max) map (checkpoint number + 1 as an f32 value, 0: none), then (C, slot_len) slots

var<workgroup> bc: array<f32, STAGE>; // (STAGE / 2N, 2N) B ‖ C rows of a tile of tokens
var<workgroup> parts: array<f32, 128>; // (2, WG) each lane's part of Σ_n h·C, by token parity

// N, fixed when the pipeline is made (the model's state_size, ≤ N_MAX).
override N_STATE: u32 = 128u;
// Whether y is gated by silu(z) here, fixed when the pipeline is made.
override GATE: bool = true;
// Lanes per channel (1, 2, 4, 8 or 16: the least power of two with N ≤ SPLIT · N_LANE).
override SPLIT: u32 = 8u;

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

fn silu(v: f32) -> f32 {
    return v / (1.0 + exp(-v));
}

@compute @workgroup_size(WG)
fn ssd_output(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let di = p.d_inner;
    let g = wid.x / p.group_wgs;
    let lane = lid % SPLIT;
    let in_group = (wid.x % p.group_wgs) * (WG / SPLIT) + lid / SPLIT;
    let live = in_group < p.group_channels;
    let c = g * p.group_channels + in_group;
    let hd = min(c, di - 1u) / p.head_dim;
    let a = a_dt[hd];
    let d_skip = a_dt[p.n_heads + hd];
    let bias = a_dt[2u * p.n_heads + hd];
    let b_at = di + g * N_STATE;
    let c_at = di + (p.n_groups + g) * N_STATE;
    let j = wid.y;
    let t0 = j * p.chunk;
    let t1 = min(t0 + p.chunk, step.t_len);
    let width = 2u * N_STATE;
    let tile = STAGE / width;
    let base = c * N_STATE;

    var h: array<f32, N_LANE>; // entry i: state entry n = lane + i · SPLIT of channel c
    if (live) {
        for (var i = 0u; i < N_LANE; i++) {
            let n = lane + i * SPLIT;
            if (n < N_STATE) {
                if (step.n_chunks == 1u) {
                    h[i] = ssm_state[p.state_offset + base + n];
                } else {
                    h[i] = chunk_h0[j * di * N_STATE + base + n];
                }
            }
        }
    }
    for (var s = t0; s < t1; s += tile) {
        let s1 = min(s + tile, t1);
        workgroupBarrier();
        for (var i = lid; i < (s1 - s) * width; i += WG) {
            let t = s + i / width;
            let k = i % width;
            bc[i] = u[p.u_at + t * p.u_stride + select(c_at + k - N_STATE, b_at + k, k < N_STATE)];
        }
        workgroupBarrier();
        for (var t = s; t < s1; t++) {
            var acc = 0.0;
            var xt = 0.0;
            if (live) {
                let dt = clamp(softplus(zxbcdt[t * p.proj_stride + p.dt_at + hd] + bias), p.dt_min, p.dt_max);
                let decay = exp(dt * a);
                xt = u[p.u_at + t * p.u_stride + c];
                let du = dt * xt;
                let row = (t - s) * width;
                for (var i = 0u; i < N_LANE; i++) {
                    let n = lane + i * SPLIT;
                    if (n < N_STATE) {
                        h[i] = decay * h[i] + du * bc[row + n];
                        acc += h[i] * bc[row + N_STATE + n];
                    }
                }
            }
            if (SPLIT > 1u) {
                // The lanes' parts, added in lane order by lane 0 (a buffer per token parity:
                // a lane writing token t + 1's part cannot overwrite what lane 0 still reads).
                let at = (t % 2u) * WG;
                parts[at + lid] = acc;
                workgroupBarrier();
                if (lane == 0u) {
                    for (var l = 1u; l < SPLIT; l++) {
                        acc += parts[at + lid + l];
                    }
                }
            }
            if (live && lane == 0u) {
                var v = acc + d_skip * xt;
                if (GATE) {
                    v *= silu(zxbcdt[t * p.proj_stride + c]);
                }
                y[t * di + c] = v;
            }
            let cp = u32(capture[t]); // a whole number as an f32 value: never a denormal
            if (live && cp != 0u) {
                let at = p.map_len + (cp - 1u) * p.slot_len + p.slot_ssm_at + base;
                for (var i = 0u; i < N_LANE; i++) {
                    let n = lane + i * SPLIT;
                    if (n < N_STATE) {
                        capture[at + n] = h[i];
                    }
                }
            }
        }
    }
    // The last chunk leaves its final h in the layer's state.
    if (live && j + 1u == step.n_chunks) {
        for (var i = 0u; i < N_LANE; i++) {
            let n = lane + i * SPLIT;
            if (n < N_STATE) {
                ssm_state[p.state_offset + base + n] = h[i];
            }
        }
    }
}
