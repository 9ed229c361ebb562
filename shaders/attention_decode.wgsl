// attention_decode: the first pass of split-context attention for a few query rows (decode:
// T = 1) over a long context. The keys row t sees (past + t + 1 of them) are cut into splits
// of `split_keys`; a workgroup takes one (split, token, head) and writes that split's partial
// softmax to `scratch`: its max m, its sum l = Σ exp(s_j − m) and acc = Σ exp(s_j − m) · V[j]
// (record (m, l, acc[hd])). `attention_combine` then merges the splits of each row. So a
// 4096-token context keeps (splits × heads) workgroups busy rather than one per head.
//
//   s_j = scale · q[t, h] · K[j, g],   g = h / (Hq / Hkv)
//
// Records are split-major: record (s · T + t) · Hq + h, of hd + 2 floats, so the scratch
// layout needs only the call's T (`kernels::attention_decode::splits` sizes it). A workgroup
// whose split starts past its row's last key does nothing (the host may dispatch for a longer
// context than a row sees). Per workgroup: the query row in workgroup memory, each invocation
// scores keys lid, lid + WG, ... (≤ SPLIT_MAX / WG), tree reductions give m and l, and each
// invocation sums the weighted values of its dims lid, lid + WG, ... (adjacent invocations read
// adjacent values).

const WG: u32 = 64u;            // invocations per workgroup (a power of two: tree reductions)
const HEAD_DIM_MAX: u32 = 256u; // largest hd
const SPLIT_MAX: u32 = 256u;    // largest split_keys

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    q_stride: u32,   // floats between token rows of q
    q_col: u32,      // column of head 0's query in a row of q
    heads: u32,      // Hq
    kv_heads: u32,   // Hkv (divides Hq)
    head_dim: u32,   // hd ≤ HEAD_DIM_MAX
    kv_offset: u32,  // floats: where the layer's K region starts in kv
    capacity: u32,   // positions of the layer's cache (its V region follows K's)
    scale: f32,      // softmax scale
    split_keys: u32, // keys per split, ≤ SPLIT_MAX
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> q: array<f32>;             // (T, q_stride): (Hq, hd) at q_col
@group(0) @binding(3) var<storage, read> kv: array<u32>;            // at kv_offset: K, V each (capacity, Hkv, hd), in KV_FORMAT

// How the cache stores its values (a pipeline-overridable constant, one pipeline per format):
// 0 = f32 (a value per u32), 1 = f16 (two per u32, element 2i in the low half). Offsets and
// indices count values either way.
override KV_FORMAT: u32 = 0u;

// Two f16 values packed in a u32 (element 2i in the low half) as f32, subnormals kept:
// unpack2x16float may flush f16 subnormals (|v| < 2^-14) to zero (WGSL allows it), so a half
// with a zero exponent is rebuilt by hand: its 10-bit mantissa × 2^-24, exact in f32.
fn halves(u: u32) -> vec2<f32> {
    let bits = vec2<u32>(u & 0xffffu, u >> 16u);
    let tiny = vec2<f32>(bits & vec2<u32>(0x3ffu)) * 5.9604645e-8;
    let signed = select(tiny, -tiny, (bits & vec2<u32>(0x8000u)) != vec2<u32>(0u));
    return select(unpack2x16float(u), signed, (bits & vec2<u32>(0x7c00u)) == vec2<u32>(0u));
}

fn kv_load(i: u32) -> f32 {
    if (KV_FORMAT == 0u) {
        return bitcast<f32>(kv[i]);
    }
    let pair = halves(kv[i >> 1u]);
    return select(pair.x, pair.y, (i & 1u) == 1u);
}

@group(0) @binding(4) var<storage, read_write> scratch: array<f32>; // (splits, T, Hq, hd + 2): (m, l, acc)

var<workgroup> q_row: array<f32, HEAD_DIM_MAX>; // (hd) the query
var<workgroup> weights: array<f32, SPLIT_MAX>;  // (split_keys) scores, then exp(s − m)
var<workgroup> partial: array<f32, WG>;         // (WG) per-invocation max, then sum

@compute @workgroup_size(WG)
fn attention_decode(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let hd = p.head_dim;
    let rows = step.t_len * p.heads;
    let idx = wid.y * nwg.x + wid.x;
    let split = idx / rows;
    let row = idx % rows; // t · Hq + h
    let t = row / p.heads;
    let h = row % p.heads;
    let k0 = split * p.split_keys;
    let n_keys = step.past + t + 1u;
    if (k0 >= n_keys) {
        return; // uniform per workgroup
    }
    let n = min(p.split_keys, n_keys - k0);
    let width = p.kv_heads * hd;
    let k_base = p.kv_offset + h / (p.heads / p.kv_heads) * hd;
    let v_base = k_base + p.capacity * width;

    for (var d = lid; d < hd; d += WG) {
        q_row[d] = q[t * p.q_stride + p.q_col + h * hd + d];
    }
    workgroupBarrier();
    var m_own = -1e30;
    for (var j = lid; j < n; j += WG) {
        let at = k_base + (k0 + j) * width;
        var dot = 0.0;
        for (var d = 0u; d < hd; d++) {
            dot += q_row[d] * kv_load(at + d);
        }
        weights[j] = dot * p.scale;
        m_own = max(m_own, dot * p.scale);
    }
    partial[lid] = m_own;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if (lid < stride) {
            partial[lid] = max(partial[lid], partial[lid + stride]);
        }
        workgroupBarrier();
    }
    let m = partial[0];
    workgroupBarrier(); // everyone has read m before partial is reused
    var l_own = 0.0;
    for (var j = lid; j < n; j += WG) {
        let e = exp(weights[j] - m);
        weights[j] = e;
        l_own += e;
    }
    partial[lid] = l_own;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if (lid < stride) {
            partial[lid] += partial[lid + stride];
        }
        workgroupBarrier();
    }

    let record = (split * rows + row) * (hd + 2u);
    for (var d = lid; d < hd; d += WG) {
        var acc = 0.0;
        for (var j = 0u; j < n; j++) {
            acc += weights[j] * kv_load(v_base + (k0 + j) * width + d);
        }
        scratch[record + 2u + d] = acc;
    }
    if (lid == 0u) {
        scratch[record] = m;
        scratch[record + 1u] = partial[0];
    }
}
