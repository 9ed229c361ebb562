// argmax: the greedy pick on the GPU — the index of the largest of the V logits, the first one
// on ties (as the CPU's `ops::argmax` and torch.argmax). It is written where the next decode
// step's embedding reads its token (ids[0]) and appended to a list of picks, so greedy decoding
// runs several steps per submit and reads back a few bytes, not V floats.
//
// One workgroup: each of the WG invocations walks a strided slice of the logits (adjacent
// invocations read adjacent floats), keeping its best (value, index); the WG bests are reduced
// as a tree in workgroup memory. A NaN or ±Inf anywhere makes the pick NON_FINITE_PICK: the model
// overflowed, and the host reports it (as it does for such logits read back); it is tested on
// the bits (all exponent bits set), since WGSL lets a compiler assume NaN and Inf away.

const WG: u32 = 256u; // invocations (a power of two; see the tree reduction)
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

var<workgroup> best_value: array<f32, WG>; // (WG) each invocation's best logit
var<workgroup> best_index: array<u32, WG>; // (WG) its index (NONE: none seen)
var<workgroup> saw_bad: array<u32, WG>;    // (WG) 1 where the invocation's slice held NaN or ±Inf

fn is_non_finite(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7f800000u) == 0x7f800000u;
}

// Whether (v, i) beats (bv, bi): larger, or as large and earlier; anything beats NONE.
fn beats(v: f32, i: u32, bv: f32, bi: u32) -> bool {
    return i != NONE && (bi == NONE || v > bv || (v == bv && i < bi));
}

@compute @workgroup_size(WG)
fn argmax(@builtin(local_invocation_index) lid: u32) {
    var bv = 0.0;
    var bi = NONE;
    var bad = 0u;
    for (var i = lid; i < p.vocab; i += WG) {
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
    if (lid == 0u) {
        let pick = select(best_index[0], NON_FINITE_PICK, saw_bad[0] != 0u || best_index[0] == NONE);
        ids[0] = pick;
        let n = picks[0];
        if (n < p.capacity) {
            picks[1u + n] = pick;
            picks[0] = n + 1u;
        }
    }
}
