// argmax: the greedy pick on the GPU — the index of the largest of the V logits, the first one
// on ties (as the CPU's `ops::argmax` and torch.argmax). It is written where the next decode
// step's embedding reads its token (ids[0]) and appended to a list of picks, so greedy decoding
// runs several steps per submit and reads back a few bytes, not V floats.
//
// Two entry points, dispatched one after the other:
// - `argmax_slices`: a workgroup per SLICE logits (⌈V / SLICE⌉ of them, so the read of the V
//   logits is spread over the GPU, not one compute unit), each invocation a strided part of the
//   slice (adjacent invocations read adjacent floats), reduced as a tree in workgroup memory to
//   the slice's best (value, index) and whether it held a NaN or ±Inf;
// - `argmax`: one workgroup reduces the slices' bests the same way (slices in order, so the
//   first index still wins ties) and writes the pick.
// A NaN or ±Inf anywhere makes the pick NON_FINITE_PICK: the model overflowed, and the host
// reports it (as it does for such logits read back); it is tested on the bits (all exponent
// bits set), since WGSL lets a compiler assume NaN and Inf away.

const WG: u32 = 256u;      // invocations (a power of two; see the tree reduction)
const SLICE: u32 = 2048u;  // logits per workgroup of argmax_slices
const NONE: u32 = 0xffffffffu; // no index yet
const NON_FINITE_PICK: u32 = 0xfffffffeu; // the logits held a NaN or ±Inf

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    vocab: u32,    // V: logits to compare
    capacity: u32, // picks the list has room for
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> logits: array<f32>;      // (V): row 0 of the logits
@group(0) @binding(3) var<storage, read_write> ids: array<u32>;   // (T_max): the pick goes to ids[0]
@group(0) @binding(4) var<storage, read_write> picks: array<u32>; // (1 + capacity): count, picks
@group(0) @binding(5) var<storage, read_write> slices: array<u32>; // (⌈V / SLICE⌉, 3): value bits, index, non-finite seen

var<workgroup> best_value: array<f32, WG>; // (WG) each invocation's best logit
var<workgroup> best_index: array<u32, WG>; // (WG) its index (NONE: none seen)
var<workgroup> saw_bad: array<u32, WG>;    // (WG) 1 where the invocation's part held NaN or ±Inf

fn is_non_finite(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7f800000u) == 0x7f800000u;
}

// Whether (v, i) beats (bv, bi): larger, or as large and earlier; anything beats NONE.
fn beats(v: f32, i: u32, bv: f32, bi: u32) -> bool {
    return i != NONE && (bi == NONE || v > bv || (v == bv && i < bi));
}

// Reduces the WG invocations' (best_value, best_index, saw_bad) into entry 0.
fn reduce(lid: u32) {
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if (lid < stride) {
            let other = lid + stride;
            if (beats(best_value[other], best_index[other], best_value[lid], best_index[lid])) {
                best_value[lid] = best_value[other];
                best_index[lid] = best_index[other];
            }
            saw_bad[lid] = max(saw_bad[lid], saw_bad[other]);
        }
        workgroupBarrier();
    }
}

@compute @workgroup_size(WG)
fn argmax_slices(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let start = wid.x * SLICE;
    let end = min(start + SLICE, p.vocab);
    var bv = 0.0;
    var bi = NONE;
    var bad = 0u;
    for (var i = start + lid; i < end; i += WG) {
        let v = logits[i];
        if (is_non_finite(v)) {
            bad = 1u;
        } else if (beats(v, i, bv, bi)) {
            bv = v;
            bi = i;
        }
    }
    best_value[lid] = bv;
    best_index[lid] = bi;
    saw_bad[lid] = bad;
    reduce(lid);
    if (lid == 0u) {
        slices[3u * wid.x] = bitcast<u32>(best_value[0]);
        slices[3u * wid.x + 1u] = best_index[0];
        slices[3u * wid.x + 2u] = saw_bad[0];
    }
}

@compute @workgroup_size(WG)
fn argmax(@builtin(local_invocation_index) lid: u32) {
    let n = (p.vocab + SLICE - 1u) / SLICE;
    var bv = 0.0;
    var bi = NONE;
    var bad = 0u;
    for (var s = lid; s < n; s += WG) {
        let v = bitcast<f32>(slices[3u * s]);
        let i = slices[3u * s + 1u];
        if (beats(v, i, bv, bi)) {
            bv = v;
            bi = i;
        }
        bad = max(bad, slices[3u * s + 2u]);
    }
    best_value[lid] = bv;
    best_index[lid] = bi;
    saw_bad[lid] = bad;
    reduce(lid);
    if (lid == 0u) {
        let pick = select(best_index[0], NON_FINITE_PICK, saw_bad[0] != 0u || best_index[0] == NONE);
        ids[0] = pick;
        let count = picks[0];
        if (count < p.capacity) {
            picks[1u + count] = pick;
            picks[0] = count + 1u;
        }
    }
}
