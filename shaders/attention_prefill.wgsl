// attention_prefill: causal grouped-query attention for the T tokens of a call, flash style.
//
//   o[t, h] = Σ_{j ≤ past + t} softmax_j(scale · q[t, h] · K[j, g]) · V[j, g],   g = h / (Hq / Hkv)
//
// Query rows are (token, head) pairs of one kv head g, row r = t · G + (h mod G) with
// G = Hq / Hkv, so every key and value staged serves the G heads that share it. A workgroup
// takes BQ rows (`p.rows`) of one kv head and walks the keys its last row sees in tiles of BK
// (`p.keys`), each staged once in workgroup memory; per row it keeps the running max m, sum l
// and output acc (online softmax, f32) and rescales them by exp(m_old − m_new) per tile.
// BQ · hd ≤ STAGE and BQ · BK ≤ STAGE (`kernels::attention_prefill::tiles`), so the four stages
// (Q, K, V, scores) take 4 · STAGE floats = 16 KiB for any hd ≤ HEAD_DIM_MAX.
//
// Invocation (qi, lane) of the WG = BQ · LANES serves row r0 + qi: it computes the scores of
// keys lane, lane + LANES, ... of each tile and owns the output dims lane, lane + LANES, ...
// (≤ PER_LANE of them: hd / LANES = BQ · hd / WG ≤ STAGE / WG). Masked scores (future keys,
// padding) are the finite NONE, so exp(NONE − m) = 0 and no infinity is ever formed; key 0 is
// in every row's first tile, so m is a real score from the first tile on.

const WG: u32 = 64u;            // invocations per workgroup
const STAGE: u32 = 1024u;       // floats of each workgroup-memory stage
const PER_LANE: u32 = 16u;      // STAGE / WG: output dims an invocation owns at most
const HEAD_DIM_MAX: u32 = 256u; // largest hd: BQ ≥ 4 rows still fit a stage
const NONE: f32 = -1e30;        // the score of a masked key

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    q_stride: u32,  // floats between token rows of q
    q_col: u32,     // column of head 0's query in a row of q
    o_stride: u32,  // floats between token rows of o
    o_col: u32,     // column of head 0's output in a row of o
    heads: u32,     // Hq
    kv_heads: u32,  // Hkv (divides Hq)
    head_dim: u32,  // hd ≤ HEAD_DIM_MAX
    kv_offset: u32, // floats: where the layer's K region starts in kv
    capacity: u32,  // positions of the layer's cache (its V region follows K's)
    scale: f32,     // softmax scale (1/√hd for most models; a config value for some)
    rows: u32,      // BQ: query rows per workgroup, a power of two ≤ WG
    keys: u32,      // BK: keys per staged tile
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> q: array<f32>;        // (T, q_stride): (Hq, hd) at q_col
@group(0) @binding(3) var<storage, read> kv: array<u32>;       // at kv_offset: K, V each (capacity, Hkv, hd), in KV_FORMAT

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

@group(0) @binding(4) var<storage, read_write> o: array<f32>;  // (T, o_stride): (Hq, hd) at o_col

var<workgroup> q_tile: array<f32, STAGE>; // (BQ, hd) the workgroup's query rows
var<workgroup> k_tile: array<f32, STAGE>; // (BK, hd) keys of the current tile
var<workgroup> v_tile: array<f32, STAGE>; // (BK, hd) their values
var<workgroup> s_tile: array<f32, STAGE>; // (BQ, BK) scaled scores, NONE where masked

@compute @workgroup_size(WG)
fn attention_prefill(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let hd = p.head_dim;
    let group = p.heads / p.kv_heads;
    let n_rows = step.t_len * group;
    let bq = p.rows;
    let bk = p.keys;
    let lanes = WG / bq;
    let idx = wid.y * nwg.x + wid.x;
    if (idx >= (n_rows + bq - 1u) / bq * p.kv_heads) {
        return; // uniform per workgroup
    }
    let g = idx % p.kv_heads;
    let r0 = idx / p.kv_heads * bq;
    // Keys the workgroup's last row sees: every row's keys are a prefix of these.
    let n_keys = step.past + (min(r0 + bq, n_rows) - 1u) / group + 1u;

    for (var i = lid; i < bq * hd; i += WG) {
        let r = r0 + i / hd;
        var value = 0.0;
        if (r < n_rows) {
            let h = g * group + r % group;
            value = q[r / group * p.q_stride + p.q_col + h * hd + i % hd];
        }
        q_tile[i] = value;
    }

    let qi = lid / lanes;
    let lane = lid % lanes;
    let r = r0 + qi;
    let t = min(r, n_rows - 1u) / group;
    let own_keys = step.past + t + 1u; // keys row r sees (causal)
    let width = p.kv_heads * hd;
    let k_base = p.kv_offset + g * hd;
    let v_base = k_base + p.capacity * width;
    var acc: array<f32, PER_LANE>; // (PER_LANE) output dims lane + k · lanes, unnormalised
    var m = NONE;
    var l = 0.0;
    for (var k0 = 0u; k0 < n_keys; k0 += bk) {
        workgroupBarrier(); // the previous tile is no longer read
        for (var i = lid; i < bk * hd; i += WG) {
            let key = k0 + i / hd;
            var kk = 0.0;
            var vv = 0.0;
            if (key < n_keys) {
                let at = key * width + i % hd;
                kk = kv_load(k_base + at);
                vv = kv_load(v_base + at);
            }
            k_tile[i] = kk;
            v_tile[i] = vv;
        }
        workgroupBarrier();
        for (var j = lane; j < bk; j += lanes) {
            var s = NONE;
            if (k0 + j < own_keys) {
                var dot = 0.0;
                for (var d = 0u; d < hd; d++) {
                    dot += q_tile[qi * hd + d] * k_tile[j * hd + d];
                }
                s = dot * p.scale;
            }
            s_tile[qi * bk + j] = s;
        }
        workgroupBarrier();
        var m_tile = NONE;
        for (var j = 0u; j < bk; j++) {
            m_tile = max(m_tile, s_tile[qi * bk + j]);
        }
        let m_new = max(m, m_tile);
        let alpha = exp(m - m_new);
        l *= alpha;
        for (var k = 0u; k < PER_LANE; k++) {
            acc[k] *= alpha;
        }
        for (var j = 0u; j < bk; j++) {
            let pj = exp(s_tile[qi * bk + j] - m_new);
            l += pj;
            for (var k = 0u; k < PER_LANE; k++) {
                let d = lane + k * lanes;
                if (d < hd) {
                    acc[k] += pj * v_tile[j * hd + d];
                }
            }
        }
        m = m_new;
    }

    if (r < n_rows) {
        let h = g * group + r % group;
        for (var k = 0u; k < PER_LANE; k++) {
            let d = lane + k * lanes;
            if (d < hd) {
                o[t * p.o_stride + p.o_col + h * hd + d] = acc[k] / l;
            }
        }
    }
}
