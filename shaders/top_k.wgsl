// top_k: the top of the V logits for sampling with top-k on the host — every logit at least
// as large as the k-th largest (ties included, as torch.topk's threshold keeps them), as
// (index, value) pairs in no particular order, plus the largest logit below them — so a
// sampled decode step reads back a few KB, not V floats.
//
// One workgroup. Logits are mapped to u32 keys that order like the floats; a radix select
// (four rounds over 8-bit digits, most significant first, a 256-bin histogram in workgroup
// memory per round) finds the k-th largest key exactly; a last pass collects every logit whose
// key is at least that. NaN and ±Inf are tested on the bits (WGSL lets a compiler assume them
// away) and reported: the model overflowed, and the host refuses such logits. NaNs are left
// out of the select (they have no order).

const WG: u32 = 256u; // invocations; also the histogram's bins (one digit of 8 bits)

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

@compute @workgroup_size(WG)
fn top_k(@builtin(local_invocation_index) lid: u32) {
    if (lid == 0u) {
        prefix = 0u;
        remaining = p.k;
        atomicStore(&found, 0u);
        atomicStore(&below, 0u);
        atomicStore(&non_finite, 0u);
    }
    var mask = 0u; // the decided digits' bits (the same in every invocation)
    for (var round = 0u; round < 4u; round++) {
        let shift = 24u - 8u * round;
        atomicStore(&hist[lid], 0u);
        workgroupBarrier();
        let decided = prefix;
        for (var i = lid; i < p.vocab; i += WG) {
            let bits = bitcast<u32>(logits[i]);
            if (is_non_finite(bits)) {
                atomicStore(&non_finite, 1u);
            }
            if (is_nan(bits)) {
                continue;
            }
            let key = order_key(bits);
            if ((key & mask) == decided) {
                atomicAdd(&hist[(key >> shift) & 255u], 1u);
            }
        }
        workgroupBarrier();
        if (lid == 0u) {
            // From the largest digit down: the digit where the count reaches the rank.
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
            prefix = decided | (d << shift);
        }
        mask |= 255u << shift;
        workgroupBarrier();
    }
    let threshold = prefix;
    var best_below = 0u;
    for (var i = lid; i < p.vocab; i += WG) {
        let bits = bitcast<u32>(logits[i]);
        if (is_nan(bits)) {
            continue;
        }
        let key = order_key(bits);
        if (key >= threshold) {
            let slot = atomicAdd(&found, 1u);
            if (slot < p.capacity) {
                top[4u + 2u * slot] = i;
                top[5u + 2u * slot] = bits;
            }
        } else {
            best_below = max(best_below, key + 1u);
        }
    }
    atomicMax(&below, best_below);
    workgroupBarrier();
    if (lid == 0u) {
        top[0] = atomicLoad(&found);
        top[1] = atomicLoad(&non_finite);
        top[2] = atomicLoad(&below);
        top[3] = threshold;
    }
}
