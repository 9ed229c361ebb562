// decode_scan: a Mamba-1 layer's decode step from x_proj's output to the gated output in one
// dispatch — dt_proj + softplus, the selective scan's step and the gate:
//
//   Δ[c]    = softplus(Σ_r W_dt[c, r] · δ[r] + b_dt[c])
//   h[c, n] = exp(Δ[c] A[c, n]) · h[c, n] + Δ[c] u[c] B[n]
//   y[c]    = (Σ_n h[c, n] C[n] + D[c] u[c]) · silu(z[c])
//
// It is linear's GEMV (with SOFTPLUS), then scan_output.wgsl at T = 1; the plan dispatches it
// only for a chunk of one token with no checkpoint to capture. u is the conv's output, which
// decode_in_proj.wgsl leaves in xz's first half (z is the second). A workgroup is 64 channels:
// δ ‖ B ‖ C (shared by every channel) are staged once in workgroup memory, and the channels'
// rows of A and of the state go through workgroup memory in whole consecutive runs, as in
// scan_output.wgsl. Each invocation walks its channel's row of W_dt (R weights) itself.

const WG: u32 = 64u;
const STAGE: u32 = 1024u; // floats of workgroup memory for δ ‖ B ‖ C: R + 2N ≤ STAGE
const N_MAX: u32 = 64u;   // largest d_state supported (as scan_output.wgsl)

const BIAS: u32 = 1u; // dt_proj has a bias

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    d_inner: u32,      // E·D
    dbc_stride: u32,   // R + 2N: the length of δ ‖ B ‖ C
    dt_rank: u32,      // R: B starts at column R of dbc, C at R + N
    state_offset: u32, // layer · E·D·N: this layer's SSM state in the state buffer
    w_scales: u32,     // int8 W_dt: index in w of its first scale (= E·D·R/4), else 0
    flags: u32,        // BIAS
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> xz: array<f32>;              // (1, 2·E·D) u ‖ z
@group(0) @binding(3) var<storage, read> dbc: array<f32>;             // (1, R + 2N) δ ‖ B ‖ C
@group(0) @binding(4) var<storage, read> a_d: array<f32>;             // (E·D·N + E·D) A ‖ D
@group(0) @binding(5) var<storage, read> w: array<u32>;               // (E·D, R) W_dt in W_FORMAT (+ scales)
@group(0) @binding(6) var<storage, read> bias: array<f32>;            // (E·D) b_dt, a 1-element dummy without BIAS
@group(0) @binding(7) var<storage, read_write> ssm_state: array<f32>; // (layers, E·D, N)
@group(0) @binding(8) var<storage, read_write> y: array<f32>;         // (1, E·D) gated output

// How W_dt is stored (one pipeline per format), as in gemv.wgsl. Declared before N_STATE:
// naga 30 makes the override-sized `rows` an anonymous override, and its pipeline-constant
// pass fails on a named override declared after one (a panic with the GL backend).
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

// N, fixed when the pipeline is made (the model's state_size, ≤ N_MAX): loops over it have a
// constant trip count, so a GPU's compiler unrolls them and keeps h and A in registers.
override N_STATE: u32 = 16u;

var<workgroup> dbc_row: array<f32, STAGE>;            // (R + 2N) δ ‖ B ‖ C
var<workgroup> rows: array<f32, WG * (N_STATE + 1u)>; // (WG, N + 1) rows of A, then of the state

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

// Where float i of the workgroup's WG·N consecutive row floats sits in rows[].
fn padded(i: u32) -> u32 {
    return (i / N_STATE) * (N_STATE + 1u) + i % N_STATE;
}

@compute @workgroup_size(WG)
fn decode_scan(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let di = p.d_inner;
    let r = p.dt_rank;
    for (var i = lid; i < p.dbc_stride; i += WG) {
        dbc_row[i] = dbc[i];
    }
    let c0 = wid.x * WG;
    let c = c0 + lid;
    let live = c < di;
    // Floats of this workgroup's rows that exist (the last workgroup may run past E·D).
    let live_floats = (min(c0 + WG, di) - c0) * N_STATE;
    let own = lid * (N_STATE + 1u);

    var h: array<f32, N_MAX>; // (N) state of channel c
    var a: array<f32, N_MAX>; // (N) row c of A
    for (var i = lid; i < live_floats; i += WG) {
        rows[padded(i)] = a_d[c0 * N_STATE + i];
    }
    workgroupBarrier();
    for (var n = 0u; n < N_STATE; n++) {
        a[n] = rows[own + n];
    }
    workgroupBarrier();
    for (var i = lid; i < live_floats; i += WG) {
        rows[padded(i)] = ssm_state[p.state_offset + c0 * N_STATE + i];
    }
    workgroupBarrier();
    for (var n = 0u; n < N_STATE; n++) {
        h[n] = rows[own + n];
    }

    if (live) {
        // Δ: row c of W_dt against δ, summed as gemv.wgsl sums it.
        let wb = c * r;
        var dot4 = vec4<f32>(0.0);
        var k = 0u;
        for (; k + 4u <= r; k += 4u) {
            let d = vec4<f32>(dbc_row[k], dbc_row[k + 1u], dbc_row[k + 2u], dbc_row[k + 3u]);
            dot4 += d * weight4(wb + k, p.w_scales);
        }
        var tail = 0.0;
        for (; k < r; k++) {
            tail += dbc_row[k] * weight1(wb + k, p.w_scales);
        }
        var v = (dot4.x + dot4.y) + (dot4.z + dot4.w) + tail;
        if ((p.flags & BIAS) != 0u) {
            v += bias[c];
        }
        let dt = softplus(v);
        let ut = xz[c];
        var acc = 0.0;
        for (var n = 0u; n < N_STATE; n++) {
            h[n] = exp(dt * a[n]) * h[n] + dt * ut * dbc_row[r + n];
            acc += h[n] * dbc_row[r + N_STATE + n];
        }
        y[c] = (acc + a_d[di * N_STATE + c] * ut) * silu(xz[di + c]);
    }
    // The new state back, through rows[], in whole runs.
    workgroupBarrier();
    for (var n = 0u; n < N_STATE; n++) {
        rows[own + n] = h[n];
    }
    workgroupBarrier();
    for (var i = lid; i < live_floats; i += WG) {
        ssm_state[p.state_offset + c0 * N_STATE + i] = rows[padded(i)];
    }
}
