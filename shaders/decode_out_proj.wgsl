// decode_out_proj: a Mamba-2 layer's decode step from the scan's gated output to the residual
// in one dispatch — the gated RMSNorm (G groups of E·D / G channels, each by its own RMS, then
// its gain) and out_proj with the residual add:
//
//   s_g   = inverseSqrt(mean_{c in group g}(y[c]²) + eps)
//   h[o] += (Σ_c W[o, c] · (y[c] · s_g(c) · gn[c]) (+ bias[o])) (· scale)
//
// With GATE_AFTER (Falcon-H1's norm before the gate: y is the scan's ungated output) each normed
// input is then times silu(z[c]), as silu_gate.wgsl multiplies it.
//
// It is rms_norm.wgsl over G rows per token (and silu_gate.wgsl), then linear's GEMV with ACCUMULATE at T = 1,
// summed in their order: each group's Σy² as rms_norm's 64-lane tree, each normed input rounded
// as rms_norm rounds it, the dot products as gemv.wgsl (LANES = 1, software adapters: a vec4
// accumulator per row, four rows per invocation, no barrier) or gemv_coalesced.wgsl (LANES = 64,
// GPUs: a workgroup per four rows, adjacent lanes at adjacent weights, its `lanes_sum`) sums them. The
// plan dispatches it only for a chunk of one token with no checkpoint to capture.

const WG: u32 = 64u;    // invocations per workgroup
const OUT: u32 = 4u;    // outputs per group of lanes
const G_MAX: u32 = 8u;  // most norm groups supported

const BIAS: u32 = 1u;  // out_proj has a bias
const SCALE: u32 = 8u; // the result (after the bias) times `scale` (the residual multiplier)
const GATE_AFTER: u32 = 16u; // each normed input times silu(z) (the norm before the gate)

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    n_in: u32,       // E·D: out_proj's columns
    n_out: u32,      // O: outputs (rows of this out_proj part)
    y_col: u32,      // column of h written for output 0 (the part's first row)
    w_scales: u32,   // int8: index in w of the part's first scale (= O·E·D/4), else 0
    groups: u32,     // G: norm groups (≤ G_MAX)
    flags: u32,      // BIAS | SCALE | GATE_AFTER
    eps: f32,        // the gated norm's epsilon
    scale: f32,      // with SCALE: the residual multiplier
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<f32>;          // (1, E·D) the scan's gated output
@group(0) @binding(3) var<storage, read> gain: array<f32>;       // (E·D) the gated norm's weight
@group(0) @binding(4) var<storage, read> w: array<u32>;          // (O, E·D) in W_FORMAT (+ scales)
@group(0) @binding(5) var<storage, read> bias: array<f32>;       // (O), a 1-element dummy without BIAS
@group(0) @binding(6) var<storage, read_write> h: array<f32>;    // (1, D) the residual, added to
@group(0) @binding(7) var<storage, read> z: array<f32>;          // (1, ≥ E·D) with GATE_AFTER: the gate in row 0's first E·D; else a dummy

// Lanes per group of OUT outputs: 1 or WG.
override LANES: u32 = 64u;

var<workgroup> squares: array<f32, WG * G_MAX>; // (G, WG) each lane's Σ y² per group (LANES = 64)

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

// Σ x[c]² over group g's columns c ≡ l (mod WG) within the group: rms_norm.wgsl's lane l.
fn squares_of_lane(g: u32, l: u32) -> f32 {
    let cols = p.n_in / p.groups;
    var sum = 0.0;
    for (var i = l; i < cols; i += WG) {
        let v = x[g * cols + i];
        sum += v * v;
    }
    return sum;
}

fn silu(v: f32) -> f32 {
    return v / (1.0 + exp(-v));
}

// Input c normed, rounded as rms_norm.wgsl rounds it (`scale` is its group's), then with
// GATE_AFTER times silu(z[c]) as silu_gate.wgsl multiplies the stored value.
fn normed(c: u32, scale: f32) -> f32 {
    let v = x[c] * scale * gain[c];
    if ((p.flags & GATE_AFTER) != 0u) {
        return v * silu(z[c]);
    }
    return v;
}

// h[y_col + o] += acc (+ bias[o]) (· scale), as linear's store with ACCUMULATE.
fn store(o: u32, acc: f32) {
    var v = acc;
    if ((p.flags & BIAS) != 0u) {
        v += bias[o];
    }
    if ((p.flags & SCALE) != 0u) {
        v *= p.scale;
    }
    let at = p.y_col + o;
    h[at] = v + h[at];
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
fn decode_out_proj(@builtin(workgroup_id) wid: vec3<u32>, lanes: Lanes) {
    let lid = lanes.lid;
    let group = lid / LANES;
    let lane = lid % LANES;
    let o0 = (wid.x * (WG / LANES) + group) * OUT;
    let last = p.n_out - 1u;
    let w0 = min(o0, last) * p.n_in;
    let w1 = min(o0 + 1u, last) * p.n_in;
    let w2 = min(o0 + 2u, last) * p.n_in;
    let w3 = min(o0 + 3u, last) * p.n_in;
    let cols = p.n_in / p.groups;
    // Each group's 1 / RMS, as rms_norm.wgsl computes it.
    var group_scale: array<f32, G_MAX>;
    if (LANES == 1u) {
        for (var g = 0u; g < p.groups; g++) {
            var part: array<f32, WG>;
            for (var l = 0u; l < WG; l++) {
                part[l] = squares_of_lane(g, l);
            }
            for (var s = WG / 2u; s > 0u; s /= 2u) {
                for (var l = 0u; l < s; l++) {
                    part[l] += part[l + s];
                }
            }
            group_scale[g] = inverseSqrt(part[0] / f32(cols) + p.eps);
        }
    } else {
        for (var g = 0u; g < p.groups; g++) {
            squares[g * WG + lid] = squares_of_lane(g, lid);
        }
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s /= 2u) {
            if (lid < s) {
                for (var g = 0u; g < p.groups; g++) {
                    squares[g * WG + lid] += squares[g * WG + lid + s];
                }
            }
            workgroupBarrier();
        }
        for (var g = 0u; g < p.groups; g++) {
            group_scale[g] = inverseSqrt(squares[g * WG] / f32(cols) + p.eps);
        }
    }
    var sums = vec4<f32>(0.0);
    if (LANES == 1u) {
        // gemv.wgsl's sums, four rows at once.
        var a0 = vec4<f32>(0.0);
        var a1 = vec4<f32>(0.0);
        var a2 = vec4<f32>(0.0);
        var a3 = vec4<f32>(0.0);
        var k = 0u;
        for (; k + 4u <= p.n_in; k += 4u) {
            let a = vec4<f32>(normed(k, group_scale[k / cols]), normed(k + 1u, group_scale[(k + 1u) / cols]),
                              normed(k + 2u, group_scale[(k + 2u) / cols]), normed(k + 3u, group_scale[(k + 3u) / cols]));
            a0 += a * weight4(w0 + k, p.w_scales);
            a1 += a * weight4(w1 + k, p.w_scales);
            a2 += a * weight4(w2 + k, p.w_scales);
            a3 += a * weight4(w3 + k, p.w_scales);
        }
        var tail = vec4<f32>(0.0);
        for (; k < p.n_in; k++) {
            let a = normed(k, group_scale[k / cols]);
            tail += vec4<f32>(a * weight1(w0 + k, p.w_scales), a * weight1(w1 + k, p.w_scales),
                              a * weight1(w2 + k, p.w_scales), a * weight1(w3 + k, p.w_scales));
        }
        sums = vec4<f32>((a0.x + a0.y) + (a0.z + a0.w), (a1.x + a1.y) + (a1.z + a1.w),
                         (a2.x + a2.y) + (a2.z + a2.w), (a3.x + a3.y) + (a3.z + a3.w)) + tail;
    } else {
        // gemv_coalesced.wgsl's sums.
        let k4 = p.n_in / 4u * 4u;
        var acc = vec4<f32>(0.0);
        let k8 = p.n_in / 8u * 8u;
        for (var k = lid * 8u; k < k8; k += WG * 8u) {
            let a = vec4<f32>(normed(k, group_scale[k / cols]), normed(k + 1u, group_scale[(k + 1u) / cols]),
                              normed(k + 2u, group_scale[(k + 2u) / cols]), normed(k + 3u, group_scale[(k + 3u) / cols]));
            let b = vec4<f32>(normed(k + 4u, group_scale[(k + 4u) / cols]), normed(k + 5u, group_scale[(k + 5u) / cols]),
                              normed(k + 6u, group_scale[(k + 6u) / cols]), normed(k + 7u, group_scale[(k + 7u) / cols]));
            acc += vec4<f32>(
                dot(a, weight4(w0 + k, p.w_scales)) + dot(b, weight4(w0 + k + 4u, p.w_scales)),
                dot(a, weight4(w1 + k, p.w_scales)) + dot(b, weight4(w1 + k + 4u, p.w_scales)),
                dot(a, weight4(w2 + k, p.w_scales)) + dot(b, weight4(w2 + k + 4u, p.w_scales)),
                dot(a, weight4(w3 + k, p.w_scales)) + dot(b, weight4(w3 + k + 4u, p.w_scales)));
        }
        for (var k = k8 + lid * 4u; k < k4; k += WG * 4u) {
            let a = vec4<f32>(normed(k, group_scale[k / cols]), normed(k + 1u, group_scale[(k + 1u) / cols]),
                              normed(k + 2u, group_scale[(k + 2u) / cols]), normed(k + 3u, group_scale[(k + 3u) / cols]));
            acc += vec4<f32>(dot(a, weight4(w0 + k, p.w_scales)), dot(a, weight4(w1 + k, p.w_scales)),
                             dot(a, weight4(w2 + k, p.w_scales)), dot(a, weight4(w3 + k, p.w_scales)));
        }
        for (var k = k4 + lid; k < p.n_in; k += WG) {
            let a = normed(k, group_scale[k / cols]);
            acc += a * vec4<f32>(weight1(w0 + k, p.w_scales), weight1(w1 + k, p.w_scales),
                                 weight1(w2 + k, p.w_scales), weight1(w3 + k, p.w_scales));
        }
        sums = lanes_sum(acc, lanes);
    }
    for (var q = lane; q < OUT; q += LANES) {
        if (o0 + q < p.n_out) {
            store(o0 + q, sums[q]);
        }
    }
}
