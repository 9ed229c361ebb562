// decode_in_proj: a Mamba-1 layer's decode step from the residual to the scan's input in one
// dispatch — the RMSNorm of the residual row, in_proj, and the causal conv1d + SiLU of the rows
// that feed the conv, with the conv window's update:
//
//   s     = inverseSqrt(mean_k(h[k]²) + eps)
//   v[o]  = s · Σ_k W[o, k] · (g[k] · h[k])  (+ bias[o])
//   xz[o] = silu(cb[c] + Σ_{j<K-1} cw[c, j] · win[j] + cw[c, K-1] · v[o])   for a conv row
//           (c = o − conv_from), else v[o]
//
// It is rms_norm.wgsl, then linear's GEMV, then conv1d_silu.wgsl at T = 1, summed in the same
// order as each of them: Σh² as rms_norm sums it (lane l of 64 over columns l, l + 64, ..., then
// a tree), each normed input as rms_norm rounds it (h · s · g), the dot products as the GEMV of
// the model's matmul set sums them — so the result equals the three kernels' but for what a
// compiler may contract differently. The plan dispatches it only for a chunk of one token with
// no checkpoint to capture; every other chunk runs the three kernels. The conv's output
// replaces its input in xz (the scan reads it there). With no conv rows (channels 0) and SCALE
// it is also the model's last norm_f + LM head of such a step: the logits (rms_norm, then
// linear's GEMV with its logit scale).
//
// LANES (1 or 64) lanes share a group of OUT = 4 outputs. LANES = 64, for GPUs: a workgroup is
// one group, its lanes walk D side by side four columns each per step (adjacent lanes at
// adjacent weights), then sum over the workgroup — gemv_coalesced.wgsl's order and its
// `lanes_sum` (a tree in workgroup memory, or subgroup sums where the model uses them). LANES = 1,
// for software adapters: each invocation walks four whole rows with no barrier — gemv.wgsl's
// order (a vec4 accumulator per output).

const WG: u32 = 64u;   // invocations per workgroup
const OUT: u32 = 4u;   // outputs per group of lanes (the components of a vec4 accumulator)
const K_MAX: u32 = 8u; // largest conv_kernel supported (as conv1d_silu.wgsl)

const BIAS: u32 = 1u;      // in_proj has a bias
const CONV_BIAS: u32 = 2u; // conv1d has a bias
const SCALE: u32 = 4u;     // the outputs (after the bias) times `scale` (the LM head's logit scale; Falcon-H1's ssm_in_multiplier)
const SEGMENTS: u32 = 8u;  // then each of five column segments times its own scale (Falcon-H1's ssm_multipliers)

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    n_in: u32,         // D: residual width (in_proj's columns)
    n_out: u32,        // O: outputs (rows of this in_proj part)
    row_start: u32,    // in_proj row of this part's output 0 (= its column of xz)
    w_scales: u32,     // int8: index in w of the part's first scale (= O·D/4), else 0
    conv_from: u32,    // first in_proj row that feeds the conv (Mamba-1: 0, the x half)
    channels: u32,     // conv channels (Mamba-1: E·D)
    d_conv: u32,       // K: conv taps
    state_offset: u32, // layer · (K-1) · channels: this layer's window in conv_state
    flags: u32,        // BIAS | CONV_BIAS | SCALE | SEGMENTS
    eps: f32,          // the RMSNorm's epsilon
    scale: f32,        // with SCALE: the factor
    end_z: u32,        // with SEGMENTS: in_proj rows where z, x, B, C end (δ ends at the last row),
    end_x: u32,        //   as scale_segments.wgsl's columns
    end_b: u32,
    end_c: u32,
    scale_z: f32,      // with SEGMENTS: each segment's scale
    scale_x: f32,
    scale_b: f32,
    scale_c: f32,
    scale_dt: f32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> h: array<f32>;                // (1, D) the residual
@group(0) @binding(3) var<storage, read> gain: array<f32>;             // (D) the RMSNorm's weight
@group(0) @binding(4) var<storage, read> w: array<u32>;                // (O, D) in W_FORMAT (+ scales)
@group(0) @binding(5) var<storage, read> bias: array<f32>;             // (O), a 1-element dummy without BIAS
@group(0) @binding(6) var<storage, read> conv: array<f32>;             // (channels, K) taps
@group(0) @binding(7) var<storage, read> conv_bias: array<f32>;        // (channels), a dummy without CONV_BIAS
@group(0) @binding(8) var<storage, read_write> conv_state: array<f32>; // (layers, K-1, channels), oldest first
@group(0) @binding(9) var<storage, read_write> xz: array<f32>;         // (1, in_proj rows): u ‖ z (Mamba-1)

// Lanes per group of OUT outputs: 1 or WG.
override LANES: u32 = 64u;

var<workgroup> squares: array<f32, WG>;       // (WG) each lane's Σ h² over its columns (LANES = 64)

// How W is stored (one pipeline per format): 0 = f32, 1 = f16 (two per u32, element 2i in the
// low half), 2 = int8 (four per u32, then one f32 scale per 32 weights from index `w_scales`).
// 3 = q4: eight 4-bit q per u32 (element 8i in the low nibble), w = q · d + m with one u32 per
// 64 weights (row-major) holding f16 d (low half) and m (high half), after the quants from
// `scales` (GGUF's Q4_1 in groups of 64).
override W_FORMAT: u32 = 0u;

// Two f16 values packed in a u32 (element 2i in the low half) as f32, subnormals kept:
// unpack2x16float may flush f16 subnormals (|v| < 2^-14) to zero (WGSL allows it), so a half
// with a zero exponent is rebuilt by hand: its 10-bit mantissa × 2^-24, exact in f32.
fn halves(u: u32) -> vec2<f32> {
    let bits = vec2<u32>(u & 0xffffu, u >> 16u);
    let tiny = vec2<f32>(bits & vec2<u32>(0x3ffu)) * 5.9604645e-8;
    let signed = select(tiny, -tiny, (bits & vec2<u32>(0x8000u)) != vec2<u32>(0u));
    return select(unpack2x16float(u), signed, (bits & vec2<u32>(0x7c00u)) == vec2<u32>(0u));
}

// 4–11: a GGUF file's ggml blocks as stored (`gpu_kit/ggml.rs`), each block's bytes in u32
// words; where a block's size is 2 mod 4 (Q8_0, Q4_0, Q5_0, Q6_K) its f16 scale d is moved
// after the quants, from `scales`, two per u32. Values as ggml's `dequantize_row_*`:
// 4 Q8_0 (32: 32 i8; d·q), 5 Q4_0 (32: 16 bytes, element j / j+16 in the low / high nibble
// of byte j; d·(q − 8)), 6 Q4_1 (as Q4_0, d and m in one u32 of scales; d·q + m), 7 Q5_0 and
// 8 Q5_1 (a u32 of fifth bits, then Q4_0's bytes; d·(q − 16), d·q + m), 9 Q4_K (256 in 36
// words: d and dmin, 12 bytes of 6-bit scales and mins, 128 of nibbles), 10 Q5_K (Q4_K with
// 32 bytes of fifth bits before the nibbles: 44 words), 11 Q6_K (256: 128 bytes of low
// nibbles, 64 of high 2 bits, 16 i8 scales: 52 words; d·s·(q − 32)).

// Bytes 4k .. 4k+3 of word `k` of W.
fn bytes4(k: u32) -> vec4<u32> {
    return (vec4<u32>(w[k]) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(255u);
}

// Byte `k` of the words of W from word `at`.
fn byte_at(at: u32, k: u32) -> u32 {
    return (w[at + k / 4u] >> ((k % 4u) * 8u)) & 255u;
}

// The f16 scale of block `b` of a format whose scales are halves from `scales`.
fn half_scale(scales: u32, b: u32) -> f32 {
    return halves(w[scales + b / 2u])[b % 2u];
}

// The 6-bit scale and min of sub-block j of a Q4_K / Q5_K block whose scales start at word `at`.
fn scale_min_k4(at: u32, j: u32) -> vec2<f32> {
    if (j < 4u) {
        return vec2<f32>(f32(byte_at(at, j) & 63u), f32(byte_at(at, j + 4u) & 63u));
    }
    let sc = (byte_at(at, j + 4u) & 15u) | ((byte_at(at, j - 4u) >> 6u) << 4u);
    let m = (byte_at(at, j + 4u) >> 4u) | ((byte_at(at, j) >> 6u) << 4u);
    return vec2<f32>(f32(sc), f32(m));
}

// Weights i .. i+3 of a ggml-block W (i a multiple of 4: never across a block).
fn ggml4(i: u32, scales: u32) -> vec4<f32> {
    if (W_FORMAT == 4u) {
        let q = bitcast<vec4<i32>>(vec4<u32>(w[i / 4u]) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u);
        return vec4<f32>(q) * half_scale(scales, i / 32u);
    }
    if (W_FORMAT <= 8u) {
        let b = i / 32u;
        let e = i % 32u;
        let five = W_FORMAT == 7u || W_FORMAT == 8u;
        let words = select(4u, 5u, five);
        let low = (vec4<u32>(w[b * words + select(0u, 1u, five) + (e % 16u) / 4u]) >> (vec4<u32>(0u, 8u, 16u, 24u) + (e / 16u) * 4u)) & vec4<u32>(15u);
        let high = select(vec4<u32>(0u), ((vec4<u32>(w[b * 5u]) >> (vec4<u32>(0u, 1u, 2u, 3u) + e)) & vec4<u32>(1u)) << vec4<u32>(4u), five);
        let q = vec4<f32>(low | high);
        if (W_FORMAT == 5u || W_FORMAT == 7u) {
            return (q - select(8.0, 16.0, five)) * half_scale(scales, b);
        }
        let dm = halves(w[scales + b]);
        return q * dm.x + dm.y;
    }
    let b = i / 256u;
    let e = i % 256u;
    if (W_FORMAT == 11u) {
        let at = b * 52u;
        let quarter = (e % 128u) / 32u;
        let l = e % 32u;
        let lo = (bytes4(at + (64u * (e / 128u) + l + 32u * (quarter % 2u)) / 4u) >> vec4<u32>(4u * (quarter / 2u))) & vec4<u32>(15u);
        let hi = (bytes4(at + 32u + (32u * (e / 128u) + l) / 4u) >> vec4<u32>(2u * quarter)) & vec4<u32>(3u);
        let s = f32(bitcast<i32>(byte_at(at + 48u, 8u * (e / 128u) + l / 16u + 2u * quarter) << 24u) >> 24u);
        return (half_scale(scales, b) * s) * (vec4<f32>(lo | (hi << vec4<u32>(4u))) - 32.0);
    }
    let words = select(36u, 44u, W_FORMAT == 10u);
    let at = b * words;
    let g = e / 64u;
    let hi = (e % 64u) / 32u;
    let l = e % 32u;
    let dd = halves(w[at]);
    let sm = scale_min_k4(at + 1u, 2u * g + hi);
    var q = (bytes4(at + words - 32u + (32u * g + l) / 4u) >> vec4<u32>(4u * hi)) & vec4<u32>(15u);
    if (W_FORMAT == 10u) {
        q |= ((bytes4(at + 4u + l / 4u) >> vec4<u32>(2u * g + hi)) & vec4<u32>(1u)) << vec4<u32>(4u);
    }
    return (dd.x * sm.x) * vec4<f32>(q) - dd.y * sm.y;
}

// Weights i .. i+3 of W, row-major (i a multiple of 4 for f16, int8 and q4).
fn weight4(i: u32, scales: u32) -> vec4<f32> {
    if (W_FORMAT >= 4u) {
        return ggml4(i, scales);
    }
    if (W_FORMAT == 1u) {
        return vec4<f32>(halves(w[i / 2u]), halves(w[i / 2u + 1u]));
    }
    if (W_FORMAT == 2u) {
        return unpack4x8snorm(w[i / 4u]) * bitcast<f32>(w[scales + i / 32u]);
    }
    if (W_FORMAT == 3u) {
        let q = (vec4<u32>(w[i / 8u]) >> (vec4<u32>(0u, 4u, 8u, 12u) + (i % 8u) * 4u)) & vec4<u32>(15u);
        let dm = halves(w[scales + i / 64u]);
        return vec4<f32>(q) * dm.x + dm.y;
    }
    return vec4<f32>(bitcast<f32>(w[i]), bitcast<f32>(w[i + 1u]), bitcast<f32>(w[i + 2u]), bitcast<f32>(w[i + 3u]));
}

// Weight i of W alone.
fn weight1(i: u32, scales: u32) -> f32 {
    if (W_FORMAT >= 4u) {
        return ggml4(i & ~3u, scales)[i & 3u];
    }
    if (W_FORMAT == 1u) {
        return halves(w[i / 2u])[i % 2u];
    }
    if (W_FORMAT == 2u) {
        return unpack4x8snorm(w[i / 4u])[i % 4u] * bitcast<f32>(w[scales + i / 32u]);
    }
    if (W_FORMAT == 3u) {
        let q = (w[i / 8u] >> ((i % 8u) * 4u)) & 15u;
        let dm = halves(w[scales + i / 64u]);
        return f32(q) * dm.x + dm.y;
    }
    return bitcast<f32>(w[i]);
}

fn silu(v: f32) -> f32 {
    return v / (1.0 + exp(-v));
}

// Output o of this part is in_proj's value `value`: adds the bias (and scales it, as linear's
// SCALE, then by segment, as scale_segments.wgsl), runs the conv step on a conv row (moving its
// window on) and writes xz.
fn finish(o: u32, value: f32) {
    var v = value;
    if ((p.flags & BIAS) != 0u) {
        v += bias[o];
    }
    if ((p.flags & SCALE) != 0u) {
        v *= p.scale;
    }
    let row = p.row_start + o;
    if ((p.flags & SEGMENTS) != 0u) {
        var s = p.scale_dt;
        if (row < p.end_z) {
            s = p.scale_z;
        } else if (row < p.end_x) {
            s = p.scale_x;
        } else if (row < p.end_b) {
            s = p.scale_b;
        } else if (row < p.end_c) {
            s = p.scale_c;
        }
        v = v * s;
    }
    if (row >= p.conv_from && row < p.conv_from + p.channels) {
        let c = row - p.conv_from;
        let k = p.d_conv;
        let at = p.state_offset + c; // window entry j at at + j · channels
        var acc = select(0.0, conv_bias[c], (p.flags & CONV_BIAS) != 0u) + conv[c * k + k - 1u] * v;
        for (var j = 0u; j + 1u < k; j++) {
            acc += conv[c * k + j] * conv_state[at + j * p.channels];
        }
        for (var j = 0u; j + 2u < k; j++) {
            conv_state[at + j * p.channels] = conv_state[at + (j + 1u) * p.channels];
        }
        if (k > 1u) {
            conv_state[at + (k - 2u) * p.channels] = v;
        }
        v = silu(acc);
    }
    xz[row] = v;
}

// Σ h[k]² over the columns k ≡ l (mod WG): rms_norm.wgsl's lane l.
fn squares_of_lane(l: u32) -> f32 {
    var sum = 0.0;
    for (var k = l; k < p.n_in; k += WG) {
        let v = h[k];
        sum += v * v;
    }
    return sum;
}

// h[k] normed, rounded as rms_norm.wgsl rounds it.
fn normed(k: u32, scale: f32) -> f32 {
    return h[k] * scale * gain[k];
}

// ---- lanes_sum: the sum of one vec4 per invocation over the workgroup's 64 invocations, as a
// tree in workgroup memory (seven barriers). Written out alike in gemv_coalesced.wgsl,
// decode_in_proj.wgsl and decode_out_proj.wgsl; a model whose adapter has subgroups compiles
// them with src/kernels/lanes.rs's subgroup version in this block's place (same names, the
// same sum within rounding). ----

// The invocation ids lanes_sum needs: the kernel's entry point takes this struct.
struct Lanes {
    @builtin(local_invocation_index) lid: u32,
}

var<workgroup> lanes_partial: array<vec4<f32>, 64>; // (64) each invocation's sums, then the tree's

// Σ v over the workgroup's 64 invocations, returned to every invocation. Called once per
// invocation, in uniform control flow.
fn lanes_sum(v: vec4<f32>, lanes: Lanes) -> vec4<f32> {
    let lid = lanes.lid;
    lanes_partial[lid] = v;
    workgroupBarrier();
    for (var s = 32u; s > 0u; s /= 2u) {
        if (lid < s) {
            lanes_partial[lid] += lanes_partial[lid + s];
        }
        workgroupBarrier();
    }
    return lanes_partial[0];
}
// ---- end of lanes_sum ----

@compute @workgroup_size(64)
fn decode_in_proj(@builtin(workgroup_id) wid: vec3<u32>, lanes: Lanes) {
    let lid = lanes.lid;
    let group = lid / LANES;
    let lane = lid % LANES;
    let o0 = (wid.x * (WG / LANES) + group) * OUT;
    // Rows past n_out (the last group) read row n_out − 1 again; nothing stores them.
    let last = p.n_out - 1u;
    let w0 = min(o0, last) * p.n_in;
    let w1 = min(o0 + 1u, last) * p.n_in;
    let w2 = min(o0 + 2u, last) * p.n_in;
    let w3 = min(o0 + 3u, last) * p.n_in;
    let k4 = p.n_in / 4u * 4u;
    var sums = vec4<f32>(0.0); // the OUT dot products
    var total_squares: f32;
    if (LANES == 1u) {
        // The tree of rms_norm.wgsl's 64 lanes, walked by one invocation.
        var part: array<f32, WG>;
        for (var l = 0u; l < WG; l++) {
            part[l] = squares_of_lane(l);
        }
        for (var s = WG / 2u; s > 0u; s /= 2u) {
            for (var l = 0u; l < s; l++) {
                part[l] += part[l + s];
            }
        }
        total_squares = part[0];
    } else {
        squares[lid] = squares_of_lane(lid);
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s /= 2u) {
            if (lid < s) {
                squares[lid] += squares[lid + s];
            }
            workgroupBarrier();
        }
        total_squares = squares[0];
    }
    let scale = inverseSqrt(total_squares / f32(p.n_in) + p.eps);
    if (LANES == 1u) {
        // gemv.wgsl's sums, four rows at once.
        var a0 = vec4<f32>(0.0);
        var a1 = vec4<f32>(0.0);
        var a2 = vec4<f32>(0.0);
        var a3 = vec4<f32>(0.0);
        var k = 0u;
        for (; k + 4u <= p.n_in; k += 4u) {
            let a = vec4<f32>(normed(k, scale), normed(k + 1u, scale), normed(k + 2u, scale), normed(k + 3u, scale));
            a0 += a * weight4(w0 + k, p.w_scales);
            a1 += a * weight4(w1 + k, p.w_scales);
            a2 += a * weight4(w2 + k, p.w_scales);
            a3 += a * weight4(w3 + k, p.w_scales);
        }
        var tail = vec4<f32>(0.0);
        for (; k < p.n_in; k++) {
            let a = normed(k, scale);
            tail += vec4<f32>(a * weight1(w0 + k, p.w_scales), a * weight1(w1 + k, p.w_scales),
                              a * weight1(w2 + k, p.w_scales), a * weight1(w3 + k, p.w_scales));
        }
        sums = vec4<f32>((a0.x + a0.y) + (a0.z + a0.w), (a1.x + a1.y) + (a1.z + a1.w),
                         (a2.x + a2.y) + (a2.z + a2.w), (a3.x + a3.y) + (a3.z + a3.w)) + tail;
    } else {
        // gemv_coalesced.wgsl's sums.
        var acc = vec4<f32>(0.0);
        let k8 = p.n_in / 8u * 8u;
        for (var k = lid * 8u; k < k8; k += WG * 8u) {
            let a = vec4<f32>(normed(k, scale), normed(k + 1u, scale), normed(k + 2u, scale), normed(k + 3u, scale));
            let b = vec4<f32>(normed(k + 4u, scale), normed(k + 5u, scale), normed(k + 6u, scale), normed(k + 7u, scale));
            acc += vec4<f32>(
                dot(a, weight4(w0 + k, p.w_scales)) + dot(b, weight4(w0 + k + 4u, p.w_scales)),
                dot(a, weight4(w1 + k, p.w_scales)) + dot(b, weight4(w1 + k + 4u, p.w_scales)),
                dot(a, weight4(w2 + k, p.w_scales)) + dot(b, weight4(w2 + k + 4u, p.w_scales)),
                dot(a, weight4(w3 + k, p.w_scales)) + dot(b, weight4(w3 + k + 4u, p.w_scales)));
        }
        for (var k = k8 + lid * 4u; k < k4; k += WG * 4u) {
            let a = vec4<f32>(normed(k, scale), normed(k + 1u, scale), normed(k + 2u, scale), normed(k + 3u, scale));
            acc += vec4<f32>(dot(a, weight4(w0 + k, p.w_scales)), dot(a, weight4(w1 + k, p.w_scales)),
                             dot(a, weight4(w2 + k, p.w_scales)), dot(a, weight4(w3 + k, p.w_scales)));
        }
        for (var k = k4 + lid; k < p.n_in; k += WG) {
            let a = normed(k, scale);
            acc += a * vec4<f32>(weight1(w0 + k, p.w_scales), weight1(w1 + k, p.w_scales),
                                 weight1(w2 + k, p.w_scales), weight1(w3 + k, p.w_scales));
        }
        sums = lanes_sum(acc, lanes);
    }
    for (var q = lane; q < OUT; q += LANES) {
        if (o0 + q < p.n_out) {
            finish(o0 + q, sums[q]);
        }
    }
}
