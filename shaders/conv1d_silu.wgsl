// conv1d_silu: Mamba's causal depthwise conv1d over time, plus bias, then SiLU:
//
//   u[t, c] = silu(b[c] + Σ_{j<K} w[c, j] · xs[t - K + 1 + j, c])
//
// where xs are `d_inner` columns of in_proj's output from column `x_at` (Mamba-1: x, the first
// E·D; Mamba-2: x ‖ B ‖ C, conv_dim columns after z) and positions before this call's
// first token come from the carried window (the last K-1 inputs, the conv part of the state).
// One invocation per channel walks the T tokens in order with the window in registers and
// leaves the new window (the last K-1 inputs) in the state. Channels are independent, so the
// state can be read and written by the same invocation without a race.
//
// Checkpoints: `capture` starts with a (T) map from token position to checkpoint number + 1
// (0: none, u32 bits in f32 slots); after token t with a number c, the window is also written
// to checkpoint c's slot (layout of a slot: every layer's conv window, then every layer's SSM
// state), so states at block boundaries come out of the same pass.

const K_MAX: u32 = 8u; // largest conv_kernel supported (HF checkpoints use 4)

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    d_inner: u32,      // channels: E·D (Mamba-1), conv_dim = E·D + 2·G·N (Mamba-2)
    d_conv: u32,       // K
    xz_stride: u32,    // 2·E·D: floats between rows of xz
    state_offset: u32, // layer · (K-1) · E·D: this layer's window in the state buffer
    has_bias: u32,     // 1 when conv1d has a bias
    map_len: u32,      // T_max: length of the position map at the start of `capture`
    slot_len: u32,     // floats per checkpoint slot (the whole state of every layer)
    x_at: u32,         // column of xz where the conv's input starts (0; Mamba-2: E·D)
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> xz: array<f32>;          // (T, 2·E·D): xs ‖ z
@group(0) @binding(3) var<storage, read> weight: array<f32>;      // (E·D, K)
@group(0) @binding(4) var<storage, read> bias: array<f32>;        // (E·D), 1-element dummy without bias
@group(0) @binding(5) var<storage, read_write> conv_state: array<f32>; // (layers, K-1, E·D), oldest first
@group(0) @binding(6) var<storage, read_write> ud: array<f32>;    // (2, T_max, E·D): u here, then Δ
@group(0) @binding(7) var<storage, read_write> capture: array<f32>; // (T_max) map (checkpoint number + 1 as an f32 value, 0: none), then (C, slot_len) slots

fn silu(v: f32) -> f32 {
    return v / (1.0 + exp(-v));
}

@compute @workgroup_size(64)
fn conv1d_silu(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    if (c >= p.d_inner) {
        return;
    }
    let k = p.d_conv;
    let di = p.d_inner;
    var win: array<f32, K_MAX>; // (K-1) previous inputs, oldest first
    for (var j = 0u; j + 1u < k; j++) {
        win[j] = conv_state[p.state_offset + j * di + c];
    }
    var w: array<f32, K_MAX>; // (K) this channel's taps
    for (var j = 0u; j < k; j++) {
        w[j] = weight[c * k + j];
    }
    let b = select(0.0, bias[c], p.has_bias != 0u);
    for (var t = 0u; t < step.t_len; t++) {
        let xt = xz[t * p.xz_stride + p.x_at + c];
        var acc = b + w[k - 1u] * xt;
        for (var j = 0u; j + 1u < k; j++) {
            acc += w[j] * win[j];
        }
        for (var j = 0u; j + 2u < k; j++) {
            win[j] = win[j + 1u];
        }
        if (k > 1u) {
            win[k - 2u] = xt;
        }
        ud[t * di + c] = silu(acc);
        let cp = u32(capture[t]); // a whole number as an f32 value: never a denormal
        if (cp != 0u) {
            let base = p.map_len + (cp - 1u) * p.slot_len + p.state_offset + c;
            for (var j = 0u; j + 1u < k; j++) {
                capture[base + j * di] = win[j];
            }
        }
    }
    for (var j = 0u; j + 1u < k; j++) {
        conv_state[p.state_offset + j * di + c] = win[j];
    }
}
