// short_conv: LFM2's gated short convolution between its two projections. From in_proj's
// output bcx (T, 3·D) = B ‖ C ‖ x̃ per token:
//
//   y[t, c] = C[t, c] · (b[c] + Σ_{j<K} w[c, j] · bx[t - K + 1 + j, c]),   bx = B ⊙ x̃
//
// where positions before this call's first token come from the carried window (the last K-1
// values of bx, the layer's conv state). One invocation per channel walks the T tokens in
// order with the window in registers and leaves the new window in the state; channels are
// independent, so the state is read and written by the same invocation without a race.
//
// Checkpoints, as conv1d_silu's: `capture` starts with a (T) map from token position to
// checkpoint number + 1 (0: none, whole numbers in f32 slots); after token t with a number c,
// the window is also written to checkpoint c's slot at this layer's conv offset.

const K_MAX: u32 = 16u; // most taps supported (LFM2 has 3)

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    channels: u32,     // D
    taps: u32,         // K
    state_offset: u32, // where this layer's window (K-1, D) starts in the conv state and in a slot
    has_bias: u32,     // 1 when the conv has a bias
    map_len: u32,      // T_max: length of the position map at the start of `capture`
    slot_len: u32,     // floats per checkpoint slot (the whole state of every layer)
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> bcx: array<f32>;            // (T, 3·D): B ‖ C ‖ x̃
@group(0) @binding(3) var<storage, read> weight: array<f32>;         // (D, K)
@group(0) @binding(4) var<storage, read> bias: array<f32>;           // (D), 1-element dummy without bias
@group(0) @binding(5) var<storage, read_write> conv_state: array<f32>; // (…, K-1, D) at state_offset, oldest first
@group(0) @binding(6) var<storage, read_write> y: array<f32>;        // (T, D)
@group(0) @binding(7) var<storage, read_write> capture: array<f32>;  // (T_max) map, then (C, slot_len) slots

@compute @workgroup_size(64)
fn short_conv(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    if (c >= p.channels) {
        return;
    }
    let k = p.taps;
    let d = p.channels;
    var win: array<f32, K_MAX>; // (K-1) previous values of bx, oldest first
    for (var j = 0u; j + 1u < k; j++) {
        win[j] = conv_state[p.state_offset + j * d + c];
    }
    var w: array<f32, K_MAX>; // (K) this channel's taps
    for (var j = 0u; j < k; j++) {
        w[j] = weight[c * k + j];
    }
    let b = select(0.0, bias[c], p.has_bias != 0u);
    for (var t = 0u; t < step.t_len; t++) {
        let row = t * 3u * d;
        let bx = bcx[row + c] * bcx[row + 2u * d + c];
        var acc = b + w[k - 1u] * bx;
        for (var j = 0u; j + 1u < k; j++) {
            acc += w[j] * win[j];
        }
        for (var j = 0u; j + 2u < k; j++) {
            win[j] = win[j + 1u];
        }
        if (k > 1u) {
            win[k - 2u] = bx;
        }
        y[t * d + c] = bcx[row + d + c] * acc;
        let cp = u32(capture[t]); // a whole number as an f32 value: never a denormal
        if (cp != 0u) {
            let base = p.map_len + (cp - 1u) * p.slot_len + p.state_offset + c;
            for (var j = 0u; j + 1u < k; j++) {
                capture[base + j * d] = win[j];
            }
        }
    }
    for (var j = 0u; j + 1u < k; j++) {
        conv_state[p.state_offset + j * d + c] = win[j];
    }
}
