// top_k: the top of the V logits for sampling with top-k on the host — every logit at least
// as large as the k-th largest (ties included, as torch.topk's threshold keeps them), as
// (index, value) pairs in no particular order, plus the largest logit below them — so a
// sampled decode step reads back a few KB, not V floats.
//
// Logits are mapped to u32 keys that order like the floats; a radix select (four rounds over
// 8-bit digits, most significant first, a 256-bin histogram in workgroup memory per round)
// finds the k-th largest key exactly. Two entry points, dispatched one after the other:
// - `top_k_slices`: a workgroup per SLICE logits (each invocation holds PER keys), selecting
//   the slice's own k-th largest key t_s and keeping every logit of the slice at least t_s and
//   the largest key below it. Every logit at least the overall k-th largest g is kept: at most
//   k − 1 logits anywhere exceed g, so fewer than k in its slice do (t_s ≤ g); and the largest
//   below g is the largest below t_s of its slice or kept itself.
// - `top_k`: one workgroup runs the same select over the slices' kept logits (a few k per
//   slice, not V), collects those at least g, and the largest key below g among the kept
//   logits and the slices' largest below.
// NaN and ±Inf are tested on the bits (WGSL lets a compiler assume them away) and reported:
// the model overflowed, and the host refuses such logits. NaNs are left out of the select
// (they have no order).

const WG: u32 = 256u;     // invocations; also the histogram's bins (one digit of 8 bits)
const SLICE: u32 = 2048u; // logits per workgroup of top_k_slices
const PER: u32 = 8u;      // SLICE / WG: keys per invocation
const HEADER: u32 = 4u;   // words before a slice's kept pairs: count, non-finite seen, 1 + largest key below, t_s

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    vocab: u32,    // V: logits
    k: u32,        // the rank of the threshold, 1 ≤ k ≤ V
    capacity: u32, // pairs `top` has room for
    _pad: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> logits: array<f32>;   // (V): row 0 of the logits
// (4 + 2·capacity): count of logits ≥ the threshold (may exceed capacity), NaN or ±Inf seen (0/1),
// 1 + the key of the largest logit below the threshold (0: none), the threshold key; then
// (index, f32 bits) pairs.
@group(0) @binding(3) var<storage, read_write> top: array<u32>;
// (⌈V / SLICE⌉, HEADER + 2·SLICE): per slice the same header as `top` (count kept, NaN or ±Inf
// seen, 1 + largest key below t_s, t_s), then the kept (index, bits) pairs.
@group(0) @binding(4) var<storage, read_write> slices: array<u32>;

var<workgroup> hist: array<atomic<u32>, WG>; // (256) keys per digit value this round
var<workgroup> prefix: u32;                  // the threshold key's digits decided so far
var<workgroup> remaining: u32;               // its rank among the keys with that prefix
var<workgroup> found: atomic<u32>;           // logits ≥ the threshold collected
var<workgroup> below: atomic<u32>;           // 1 + the largest key below the threshold
var<workgroup> non_finite: atomic<u32>;      // 1: a NaN or ±Inf was seen

fn is_nan(bits: u32) -> bool {
    return (bits & 0x7fffffffu) > 0x7f800000u;
}

fn is_non_finite(bits: u32) -> bool {
    return (bits & 0x7f800000u) == 0x7f800000u;
}

// Keys that order like the floats: negative floats have every bit flipped, others the sign bit.
fn order_key(bits: u32) -> u32 {
    return select(bits | 0x80000000u, ~bits, (bits & 0x80000000u) != 0u);
}

fn start(lid: u32) {
    if (lid == 0u) {
        prefix = 0u;
        remaining = p.k;
        atomicStore(&found, 0u);
        atomicStore(&below, 0u);
        atomicStore(&non_finite, 0u);
    }
}

// The mask of the digits decided before `round`.
fn decided_mask(round: u32) -> u32 {
    return select(0u, 0xffffffffu << (32u - 8u * round), round > 0u);
}

// Begins a round: clears the histogram; returns the digits decided so far.
fn open_round(lid: u32) -> u32 {
    atomicStore(&hist[lid], 0u);
    workgroupBarrier();
    return prefix;
}

// Counts `key` in this round's histogram if it has the decided digits.
fn count(key: u32, round: u32, decided: u32) {
    if ((key & decided_mask(round)) == decided) {
        atomicAdd(&hist[(key >> (24u - 8u * round)) & 255u], 1u);
    }
}

// Ends a round: the digit where the count from the largest down reaches the rank (the keys
// may number fewer than the rank: then digit 0, so every key is at least the threshold).
fn close_round(lid: u32, round: u32, decided: u32) {
    workgroupBarrier();
    if (lid == 0u) {
        var above = 0u;
        var d = 255u;
        loop {
            let h = atomicLoad(&hist[d]);
            if (above + h >= remaining || d == 0u) {
                break;
            }
            above += h;
            d -= 1u;
        }
        remaining -= above;
        prefix = decided | (d << (24u - 8u * round));
    }
    workgroupBarrier();
}

@compute @workgroup_size(WG)
fn top_k_slices(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    start(lid);
    let first = wid.x * SLICE;
    var keys: array<u32, PER>; // the keys of logits first + lid + j·WG
    var live = 0u;             // bit j: keys[j] is a logit's (in V, not NaN)
    var bad = false;
    for (var j = 0u; j < PER; j++) {
        let i = first + lid + j * WG;
        if (i < p.vocab) {
            let bits = bitcast<u32>(logits[i]);
            bad = bad || is_non_finite(bits);
            if (!is_nan(bits)) {
                keys[j] = order_key(bits);
                live |= 1u << j;
            }
        }
    }
    if (bad) {
        atomicStore(&non_finite, 1u);
    }
    for (var round = 0u; round < 4u; round++) {
        let decided = open_round(lid);
        for (var j = 0u; j < PER; j++) {
            if ((live & (1u << j)) != 0u) {
                count(keys[j], round, decided);
            }
        }
        close_round(lid, round, decided);
    }
    let threshold = prefix;
    let out = wid.x * (HEADER + 2u * SLICE);
    var best_below = 0u;
    for (var j = 0u; j < PER; j++) {
        if ((live & (1u << j)) == 0u) {
            continue;
        }
        let key = keys[j];
        if (key >= threshold) {
            let slot = atomicAdd(&found, 1u);
            slices[out + HEADER + 2u * slot] = first + lid + j * WG;
            slices[out + HEADER + 2u * slot + 1u] = bitcast<u32>(logits[first + lid + j * WG]);
        } else {
            best_below = max(best_below, key + 1u);
        }
    }
    atomicMax(&below, best_below);
    workgroupBarrier();
    if (lid == 0u) {
        slices[out] = atomicLoad(&found);
        slices[out + 1u] = atomicLoad(&non_finite);
        slices[out + 2u] = atomicLoad(&below);
        slices[out + 3u] = threshold;
    }
}

@compute @workgroup_size(WG)
fn top_k(@builtin(local_invocation_index) lid: u32) {
    start(lid);
    let n = (p.vocab + SLICE - 1u) / SLICE;
    for (var round = 0u; round < 4u; round++) {
        let decided = open_round(lid);
        for (var s = 0u; s < n; s++) {
            let out = s * (HEADER + 2u * SLICE);
            let kept = slices[out];
            for (var j = lid; j < kept; j += WG) {
                count(order_key(slices[out + HEADER + 2u * j + 1u]), round, decided);
            }
        }
        close_round(lid, round, decided);
    }
    let threshold = prefix;
    var best_below = 0u;
    var bad = 0u;
    for (var s = 0u; s < n; s++) {
        let out = s * (HEADER + 2u * SLICE);
        let kept = slices[out];
        for (var j = lid; j < kept; j += WG) {
            let bits = slices[out + HEADER + 2u * j + 1u];
            let key = order_key(bits);
            if (key >= threshold) {
                let slot = atomicAdd(&found, 1u);
                if (slot < p.capacity) {
                    top[4u + 2u * slot] = slices[out + HEADER + 2u * j];
                    top[5u + 2u * slot] = bits;
                }
            } else {
                best_below = max(best_below, key + 1u);
            }
        }
    }
    for (var s = lid; s < n; s += WG) {
        let out = s * (HEADER + 2u * SLICE);
        bad = max(bad, slices[out + 1u]);
        best_below = max(best_below, slices[out + 2u]);
    }
    atomicMax(&below, best_below);
    atomicMax(&non_finite, bad);
    workgroupBarrier();
    if (lid == 0u) {
        top[0] = atomicLoad(&found);
        top[1] = atomicLoad(&non_finite);
        top[2] = atomicLoad(&below);
        top[3] = threshold;
    }
}
