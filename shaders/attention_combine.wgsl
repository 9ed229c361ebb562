// attention_combine: the second pass of split-context attention (`attention_decode`). Per
// (token, head) row it merges the partial softmaxes (m_s, l_s, acc_s) of the row's splits:
//
//   M = max_s m_s,   o = Σ_s exp(m_s − M) · acc_s / Σ_s exp(m_s − M) · l_s
//
// A row at position past + t has ceil((past + t + 1) / split_keys) splits. One workgroup per
// row (on a 2-D grid), each invocation producing dims lid, lid + WG, ...; no barriers.

const WG: u32 = 64u; // invocations per workgroup

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    o_stride: u32,   // floats between token rows of o
    o_col: u32,      // column of head 0's output in a row of o
    heads: u32,      // Hq
    head_dim: u32,   // hd
    split_keys: u32, // keys per split (as attention_decode's)
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> scratch: array<f32>; // (splits, T, Hq, hd + 2): (m, l, acc)
@group(0) @binding(3) var<storage, read_write> o: array<f32>; // (T, o_stride): (Hq, hd) at o_col

@compute @workgroup_size(WG)
fn attention_combine(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let rows = step.t_len * p.heads;
    let row = wid.y * nwg.x + wid.x; // t · Hq + h
    if (row >= rows) {
        return;
    }
    let t = row / p.heads;
    let h = row % p.heads;
    let splits = (step.past + t + p.split_keys) / p.split_keys; // ceil((past + t + 1) / split_keys)
    let len = p.head_dim + 2u;
    var m = -1e30;
    for (var s = 0u; s < splits; s++) {
        m = max(m, scratch[(s * rows + row) * len]);
    }
    var l = 0.0;
    for (var s = 0u; s < splits; s++) {
        let record = (s * rows + row) * len;
        l += exp(scratch[record] - m) * scratch[record + 1u];
    }
    for (var d = lid; d < p.head_dim; d += WG) {
        var acc = 0.0;
        for (var s = 0u; s < splits; s++) {
            let record = (s * rows + row) * len;
            acc += exp(scratch[record] - m) * scratch[record + 2u + d];
        }
        o[t * p.o_stride + p.o_col + h * p.head_dim + d] = acc / l;
    }
}
