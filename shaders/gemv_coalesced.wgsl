// gemv_coalesced: the same Y = X · Wᵀ (+ bias, softplus, += Y) as gemv.wgsl, for real GPUs.
// A workgroup computes ROWS outputs of one row of X: its 64 invocations walk W's rows side by
// side, eight weights each per step, so one step reads 64 adjacent 8-weight groups of every row
// (coalesced: adjacent invocations, adjacent addresses; 16 bytes per lane and row for f16),
// each X value loaded once for the ROWS outputs; then their sum over the workgroup (`lanes_sum`
// below). gemv.wgsl gives each invocation a whole row instead (adjacent invocations a row
// apart: what software adapters want, uncoalesced on GPUs).
// Same parameters and bindings as linear.wgsl, so the pipelines share bind groups.

const BIAS: u32 = 1u;
const ACCUMULATE: u32 = 2u;
const SOFTPLUS: u32 = 4u;
const SCALE: u32 = 8u;

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    n_in: u32,        // K: input features
    n_out: u32,       // O: outputs (rows of this W part)
    x_stride: u32,    // floats between rows of X
    w_scales: u32,    // int8: index in w of the first scale (= O·K/4), else 0
    x_row_start: u32, // first row of X read
    y_stride: u32,    // floats between rows of Y
    y_col: u32,       // column of Y written for output 0
    rows_max: u32,    // at most this many rows (0: no limit)
    flags: u32,       // BIAS | ACCUMULATE | SOFTPLUS | SCALE
    scale: f32,       // with SCALE: the result (after bias, softplus) times this
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<f32>;        // (T, x_stride)
@group(0) @binding(3) var<storage, read> w: array<u32>;        // (O, K) in W_FORMAT (+ scales)
@group(0) @binding(4) var<storage, read> bias: array<f32>;     // (O), a 1-element dummy without BIAS
@group(0) @binding(5) var<storage, read_write> y: array<f32>;  // (rows, y_stride)

// How W is stored (a pipeline-overridable constant: one pipeline per format, one source):
// 0 = f32 (one per u32), 1 = f16 (two per u32, element 2i in the low half), 2 = int8 (four per
// u32, element 4i in the low byte, then one f32 scale per 32 weights along a row, from index
// `scales` of w). Reading halves and bytes out of u32 needs no `shader-f16` feature.
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

fn n_rows() -> u32 {
    let available = step.t_len - min(p.x_row_start, step.t_len);
    return select(available, min(available, p.rows_max), p.rows_max != 0u);
}

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

// Y[r, y_col + o] = acc (+ bias[o]) (softplus) (· scale) (+ Y[r, y_col + o]).
fn store(r: u32, o: u32, acc: f32) {
    var v = acc;
    if ((p.flags & BIAS) != 0u) {
        v += bias[o];
    }
    if ((p.flags & SOFTPLUS) != 0u) {
        v = softplus(v);
    }
    if ((p.flags & SCALE) != 0u) {
        v *= p.scale;
    }
    let at = r * p.y_stride + p.y_col + o;
    if ((p.flags & ACCUMULATE) != 0u) {
        v += y[at];
    }
    y[at] = v;
}

const WG: u32 = 64u;  // invocations per workgroup
const ROWS: u32 = 4u; // outputs per workgroup (the components of a vec4 accumulator)

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
fn gemv_coalesced(@builtin(workgroup_id) wid: vec3<u32>, lanes: Lanes) {
    let lid = lanes.lid;
    let o0 = wid.x * ROWS;
    let r = wid.y;
    // Whole workgroups are live or not (o0 and r are the workgroup's), so every invocation
    // reaches the barriers below.
    let live = r < n_rows() && o0 < p.n_out;
    var acc = vec4<f32>(0.0);
    if (live) {
        let xb = (p.x_row_start + r) * p.x_stride;
        // Rows past n_out (the last workgroup) read row n_out − 1 again; nothing stores them.
        let last = p.n_out - 1u;
        let w0 = min(o0, last) * p.n_in;
        let w1 = min(o0 + 1u, last) * p.n_in;
        let w2 = min(o0 + 2u, last) * p.n_in;
        let w3 = min(o0 + 3u, last) * p.n_in;
        let k8 = p.n_in / 8u * 8u;
        let k4 = p.n_in / 4u * 4u;
        // Eight columns per lane per step, as two groups of four: 16 bytes of every row per
        // lane for f16 weights, and all of a step's loads independent of each other.
        for (var k = lid * 8u; k < k8; k += WG * 8u) {
            let a = vec4<f32>(x[xb + k], x[xb + k + 1u], x[xb + k + 2u], x[xb + k + 3u]);
            let b = vec4<f32>(x[xb + k + 4u], x[xb + k + 5u], x[xb + k + 6u], x[xb + k + 7u]);
            acc += vec4<f32>(
                dot(a, weight4(w0 + k, p.w_scales)) + dot(b, weight4(w0 + k + 4u, p.w_scales)),
                dot(a, weight4(w1 + k, p.w_scales)) + dot(b, weight4(w1 + k + 4u, p.w_scales)),
                dot(a, weight4(w2 + k, p.w_scales)) + dot(b, weight4(w2 + k + 4u, p.w_scales)),
                dot(a, weight4(w3 + k, p.w_scales)) + dot(b, weight4(w3 + k + 4u, p.w_scales)),
            );
        }
        // K not a multiple of 8: the last four columns as a group (lane 0).
        for (var k = k8 + lid * 4u; k < k4; k += WG * 4u) {
            let a = vec4<f32>(x[xb + k], x[xb + k + 1u], x[xb + k + 2u], x[xb + k + 3u]);
            acc += vec4<f32>(
                dot(a, weight4(w0 + k, p.w_scales)),
                dot(a, weight4(w1 + k, p.w_scales)),
                dot(a, weight4(w2 + k, p.w_scales)),
                dot(a, weight4(w3 + k, p.w_scales)),
            );
        }
        // K not a multiple of 4 (f32 weights only): the last columns one by one.
        for (var k = k4 + lid; k < p.n_in; k += WG) {
            let a = x[xb + k];
            acc += a * vec4<f32>(weight1(w0 + k, p.w_scales), weight1(w1 + k, p.w_scales),
                                 weight1(w2 + k, p.w_scales), weight1(w3 + k, p.w_scales));
        }
    }
    let sums = lanes_sum(acc, lanes); // (ROWS) the workgroup's outputs
    if (live && lid < ROWS && o0 + lid < p.n_out) {
        store(r, o0 + lid, sums[lid]);
    }
}
