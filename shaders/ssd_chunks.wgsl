// ssd_chunks: pass 1 of Mamba-2's chunked scan (prefill). Mamba-2's recurrence, per channel
// c = hd·P + p of head hd in group g = hd / (H / G), and state index n:
//
//   h_t[c, n] = exp(Δ_t[hd] A[hd]) h_{t-1}[c, n] + Δ_t[hd] x_t[c] B_t[g, n]
//   Δ_t[hd]   = clamp(softplus(δ_t[hd] + dt_bias[hd]), dt_min, dt_max)
//
// is, like Mamba-1's, a chain of affine maps h ↦ a·h + b. The T tokens are cut into chunks of
// CHUNK tokens; this pass summarises every chunk, in parallel over chunks and channels, as the
// one map it applies: a = exp(A[hd] · Σ_t Δ_t[hd]) (one number per channel, written to all N
// entries so scan_carry chains it as it does Mamba-1's) and b = the chunk's end state from
// zero. scan_carry then finds each chunk's start state; ssd_output re-runs each chunk from it.
// (These are SSD's "chunk states" and "state passing"; the within-chunk outputs are computed
// by the recurrence in ssd_output rather than as a masked matmul.)
//
// A workgroup is 64 / SPLIT channels of one group × one chunk, each channel's N state entries
// split over SPLIT lanes as in ssd_output.wgsl (lane l: n = l, l + SPLIT, ..., at most N_LANE
// in registers; the entries are independent here, so nothing is reduced): the group's B rows
// of the chunk's tokens are staged in workgroup memory, a tile of STAGE / N tokens at a time.

const WG: u32 = 64u;
const STAGE: u32 = 2048u; // floats of workgroup memory for a tile of B rows (or B ‖ C rows)
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
    proj_stride: u32,    // E·D + conv_dim + H: floats between rows of zxbcdt
    dt_at: u32,          // E·D + conv_dim: where δ (H) starts in a zxbcdt row
    head_dim: u32,       // P
    n_heads: u32,        // H: A at a_dt[hd], D at a_dt[H + hd], dt_bias at a_dt[2H + hd]
    n_groups: u32,       // G: B of group g at column E·D + g·N of u, C at E·D + (G + g)·N
    group_channels: u32, // E·D / G: channels per group
    group_wgs: u32,      // workgroups per group: ceil(E·D / G / WG)
    chunk: u32,          // CHUNK: tokens per chunk
    dt_min: f32,         // time_step_limit
    dt_max: f32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> u: array<f32>;            // (T, conv_dim) x ‖ B ‖ C after conv
@group(0) @binding(3) var<storage, read> zxbcdt: array<f32>;       // (T, E·D + conv_dim + H) in_proj output
@group(0) @binding(4) var<storage, read> a_dt: array<f32>;         // (3·H) A = −exp(A_log) ‖ D ‖ dt_bias
@group(0) @binding(5) var<storage, read_write> chunk_ab: array<f32>; // (chunks, 2, E·D, N) a ‖ b

var<workgroup> bs: array<f32, STAGE>; // (STAGE / N, N) B rows of a tile of tokens

// N, fixed when the pipeline is made (the model's state_size, ≤ N_MAX).
override N_STATE: u32 = 128u;
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

@compute @workgroup_size(WG)
fn ssd_chunks(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let di = p.d_inner;
    let g = wid.x / p.group_wgs;
    let lane = lid % SPLIT;
    let in_group = (wid.x % p.group_wgs) * (WG / SPLIT) + lid / SPLIT;
    let live = in_group < p.group_channels;
    let c = g * p.group_channels + in_group;
    let hd = min(c, di - 1u) / p.head_dim;
    let a = a_dt[hd];
    let bias = a_dt[2u * p.n_heads + hd];
    let b_at = di + g * N_STATE;
    let j = wid.y;
    let t0 = j * p.chunk;
    let t1 = min(t0 + p.chunk, step.t_len);
    let tile = STAGE / N_STATE;

    var b: array<f32, N_LANE>; // entry i: the chunk's end state from zero at n = lane + i · SPLIT
    var dsum = 0.0;
    for (var s = t0; s < t1; s += tile) {
        let s1 = min(s + tile, t1);
        workgroupBarrier();
        for (var i = lid; i < (s1 - s) * N_STATE; i += WG) {
            bs[i] = u[(s + i / N_STATE) * p.u_stride + b_at + i % N_STATE];
        }
        workgroupBarrier();
        if (live) {
            for (var t = s; t < s1; t++) {
                let dt = clamp(softplus(zxbcdt[t * p.proj_stride + p.dt_at + hd] + bias), p.dt_min, p.dt_max);
                let decay = exp(dt * a);
                let du = dt * u[t * p.u_stride + c];
                dsum += dt;
                let row = (t - s) * N_STATE;
                for (var i = 0u; i < N_LANE; i++) {
                    let n = lane + i * SPLIT;
                    if (n < N_STATE) {
                        b[i] = decay * b[i] + du * bs[row + n];
                    }
                }
            }
        }
    }
    if (live) {
        let plane = di * N_STATE;
        let chunk_a = exp(a * dsum);
        for (var i = 0u; i < N_LANE; i++) {
            let n = lane + i * SPLIT;
            if (n < N_STATE) {
                chunk_ab[(2u * j) * plane + c * N_STATE + n] = chunk_a;
                chunk_ab[(2u * j + 1u) * plane + c * N_STATE + n] = b[i];
            }
        }
    }
}
