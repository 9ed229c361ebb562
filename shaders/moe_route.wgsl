// moe_route: a mixture of experts' router, after its matmul: for each token the k experts its
// logits choose and their weights, then for each expert the indirect dispatch arguments of its
// matmuls — the host's `workgroups` (the workgroups for this chunk's T) where any token chose the
// expert, zeros where none did, so an expert nobody chose reads none of its weights.
//
//   SOFTMAX_TOP_K (Granite):  the k largest logits; weights softmax over those k
//   SOFTMAX (Jamba):          softmax over all E; the k most probable; weights their
//                             probabilities (divided by their sum with NORMALIZE)
//   SIGMOID (Nemotron-H):     s = sigmoid(logit); choice by s + bias among the experts of the
//                             topk_group best of n_group groups (a group's score: the sum of
//                             its two best); weights s (divided by Σ s + 1e-20 with
//                             NORMALIZE), times `scale`
//
// Ties go to the lower index (as the CPU reference's sort). One workgroup: its invocations
// take tokens t = lid, lid + WG, ... then (after a barrier) experts e = lid, lid + WG, ...
// `route` row t: the k ids (whole numbers as f32 values: u32 bits would be denormals a GPU may
// flush), then the k weights.

const WG: u32 = 64u;
const SOFTMAX_TOP_K: u32 = 0u;
const SOFTMAX: u32 = 1u;
const SIGMOID: u32 = 2u;
const NORMALIZE: u32 = 1u;
const HAS_BIAS: u32 = 2u;
const GROUPS_MAX: u32 = 32u; // most expert groups (n_group)
const NEG_INF: f32 = -3.402823466e+38;

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    experts: u32,    // E
    top_k: u32,      // k
    routing: u32,    // SOFTMAX_TOP_K | SOFTMAX | SIGMOID
    flags: u32,      // NORMALIZE | HAS_BIAS
    n_group: u32,    // SIGMOID: expert groups (≤ GROUPS_MAX; 1: no groups)
    topk_group: u32, // SIGMOID: groups kept
    scale: f32,      // SIGMOID: routed_scaling_factor
    parts: u32,      // P: indirect dispatches per expert (its matmuls' parts)
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> logits: array<f32>;         // (T, E) router logits
@group(0) @binding(3) var<storage, read> bias: array<f32>;           // (E) score correction; a 1-element dummy without HAS_BIAS
@group(0) @binding(4) var<storage, read> workgroups: array<u32>;      // (P, 3) workgroups of each part for this T
@group(0) @binding(5) var<storage, read_write> route: array<f32>;    // (T, 2k): ids (whole numbers as f32 values) ‖ weights
@group(0) @binding(6) var<storage, read_write> args: array<u32>;     // (E, P, 3) indirect dispatch arguments

fn sigmoid(v: f32) -> f32 {
    return 1.0 / (1.0 + exp(-v));
}

// What the choice ranks expert e of token row `at` by (before group masking).
fn choice_score(at: u32, e: u32) -> f32 {
    let l = logits[at + e];
    if (p.routing == SIGMOID) {
        var s = sigmoid(l);
        if ((p.flags & HAS_BIAS) != 0u) {
            s += bias[e];
        }
        return s;
    }
    return l;
}

// Whether expert e is already among the first `n` chosen of route row `row`.
fn taken(row: u32, n: u32, e: u32) -> bool {
    for (var j = 0u; j < n; j++) {
        if (u32(route[row + j]) == e) {
            return true;
        }
    }
    return false;
}

fn route_token(t: u32) {
    let at = t * p.experts;
    let row = t * 2u * p.top_k;
    let k = p.top_k;
    // Groups kept (SIGMOID with n_group > 1): the topk_group best by the sum of their two best.
    var kept: array<bool, GROUPS_MAX>;
    let grouped = p.routing == SIGMOID && p.n_group > 1u;
    if (grouped) {
        let size = p.experts / p.n_group;
        var score: array<f32, GROUPS_MAX>;
        for (var g = 0u; g < p.n_group; g++) {
            var best = NEG_INF;
            var second = NEG_INF;
            var best_i = 0u;
            for (var i = 0u; i < size; i++) {
                let v = choice_score(at, g * size + i);
                if (v > best) {
                    best = v;
                    best_i = i;
                }
            }
            for (var i = 0u; i < size; i++) {
                let v = choice_score(at, g * size + i);
                if (i != best_i && v > second) {
                    second = v;
                }
            }
            score[g] = best + second;
            kept[g] = false;
        }
        for (var j = 0u; j < p.topk_group; j++) {
            var best = NEG_INF;
            var best_g = 0u;
            var found = false;
            for (var g = 0u; g < p.n_group; g++) {
                if (!kept[g] && (!found || score[g] > best)) {
                    best = score[g];
                    best_g = g;
                    found = true;
                }
            }
            kept[best_g] = true;
        }
    }
    // The k choices, best first.
    for (var j = 0u; j < k; j++) {
        var best = NEG_INF;
        var best_e = 0u;
        var found = false;
        for (var e = 0u; e < p.experts; e++) {
            if (grouped && !kept[e / (p.experts / p.n_group)]) {
                continue;
            }
            if (taken(row, j, e)) {
                continue;
            }
            let v = choice_score(at, e);
            if (!found || v > best) {
                best = v;
                best_e = e;
                found = true;
            }
        }
        route[row + j] = f32(best_e); // a whole number as an f32 value, not u32 bits (a denormal)
    }
    // Their weights.
    if (p.routing == SOFTMAX_TOP_K) {
        let m = logits[at + u32(route[row])];
        var total = 0.0;
        for (var j = 0u; j < k; j++) {
            let w = exp(logits[at + u32(route[row + j])] - m);
            route[row + k + j] = w;
            total += w;
        }
        for (var j = 0u; j < k; j++) {
            route[row + k + j] = route[row + k + j] / total;
        }
    } else if (p.routing == SOFTMAX) {
        var m = NEG_INF;
        for (var e = 0u; e < p.experts; e++) {
            m = max(m, logits[at + e]);
        }
        var total = 0.0;
        for (var e = 0u; e < p.experts; e++) {
            total += exp(logits[at + e] - m);
        }
        var chosen = 0.0;
        for (var j = 0u; j < k; j++) {
            let prob = exp(logits[at + u32(route[row + j])] - m) / total;
            route[row + k + j] = prob;
            chosen += prob;
        }
        if ((p.flags & NORMALIZE) != 0u) {
            for (var j = 0u; j < k; j++) {
                route[row + k + j] = route[row + k + j] / chosen;
            }
        }
    } else {
        var total = 0.0;
        for (var j = 0u; j < k; j++) {
            let s = sigmoid(logits[at + u32(route[row + j])]);
            route[row + k + j] = s;
            total += s;
        }
        var norm = 1.0;
        if ((p.flags & NORMALIZE) != 0u) {
            norm = total + 1e-20;
        }
        for (var j = 0u; j < k; j++) {
            route[row + k + j] = route[row + k + j] / norm * p.scale;
        }
    }
}

@compute @workgroup_size(WG)
fn moe_route(@builtin(local_invocation_index) lid: u32) {
    for (var t = lid; t < step.t_len; t += WG) {
        route_token(t);
    }
    storageBarrier();
    workgroupBarrier();
    for (var e = lid; e < p.experts; e += WG) {
        var chosen = false;
        for (var t = 0u; t < step.t_len && !chosen; t++) {
            chosen = taken(t * 2u * p.top_k, p.top_k, e);
        }
        for (var i = 0u; i < 3u * p.parts; i++) {
            args[e * 3u * p.parts + i] = select(0u, workgroups[i], chosen);
        }
    }
}
