// embedding: gathers token embeddings, h[t, :] = E[ids[t], :] · scale, decoding E from its
// storage format.
//
// E may be split by rows across several buffers (a 130M model's f32 embedding is 154 MB, above
// the 128 MiB storage binding limit of lavapipe and many phones). One dispatch per part: a part
// holds rows [row_start, row_start + n_rows) and writes only the tokens that fall in it.

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    d_model: u32,   // D
    row_start: u32, // first vocabulary row held by this part
    n_rows: u32,    // rows held by this part
    w_scales: u32,  // int8: index in w of the first scale, else 0
    scale: f32,     // multiplies every row (the embedding multiplier; 1 for most models)
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> ids: array<u32>;        // (T)
@group(0) @binding(3) var<storage, read> w: array<u32>;          // (n_rows, D) this part of E, in W_FORMAT
@group(0) @binding(4) var<storage, read_write> h: array<f32>;    // (T, D)

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

// Weights i .. i+3 of W, row-major (i a multiple of 4 for f16, int8 and q4).
fn weight4(i: u32, scales: u32) -> vec4<f32> {
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

@compute @workgroup_size(64)
fn embedding(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    let t = gid.y;
    if (t >= step.t_len || i >= p.d_model) {
        return;
    }
    let id = ids[t];
    if (id < p.row_start || id >= p.row_start + p.n_rows) {
        return;
    }
    h[t * p.d_model + i] = weight1((id - p.row_start) * p.d_model + i, p.w_scales) * p.scale;
}
