// rms_norm: Mamba's RMSNorm (HF `MambaRMSNorm`), one row per workgroup.
//
//   y[r, i] = x[r, i] * inverseSqrt(mean_j(x[r, j]^2) + eps) * weight[i]
//
// Each of the WG invocations of a workgroup sums the squares of a strided slice of its row,
// the partial sums are reduced as a tree in workgroup memory, and every invocation then scales
// its slice. Rows are spread over a 2-D grid so more than 65,535 rows can be dispatched.
// With LAST_ROW only x's row T-1 is normalised, into y's row 0 (decode / last-logits path).
// With `groups` G > 1 every token's row holds G rows of `cols` (Mamba-2's gated RMSNorm: each
// group of E·D / G channels by its own RMS), and row r takes weight[(r % G) · cols ..]; with
// SHARED every row takes weight[0 .. cols] (the Gated DeltaNet's norm: one gain for its heads).

const WG: u32 = 64u; // invocations per workgroup (a power of two; see the tree reduction)
const LAST_ROW: u32 = 1u;
const SHARED: u32 = 2u;

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    cols: u32,  // d: row length (d_model)
    eps: f32,   // layer_norm_epsilon
    flags: u32,  // LAST_ROW | SHARED
    groups: u32, // G: rows per token (1 but for Mamba-2's gated norm)

}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<f32>;         // (T, d)
@group(0) @binding(3) var<storage, read> weight: array<f32>;    // (G · d)
@group(0) @binding(4) var<storage, read_write> y: array<f32>;   // (T, d), or (1, d) with LAST_ROW

var<workgroup> partial: array<f32, WG>; // (WG) per-invocation sums of squares

@compute @workgroup_size(WG)
fn rms_norm(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let last = (p.flags & LAST_ROW) != 0u;
    let rows = select(step.t_len * p.groups, 1u, last);
    let row = wid.y * nwg.x + wid.x;
    if (row >= rows) {
        return; // uniform per workgroup: the whole workgroup leaves together
    }
    let src = select(row, step.t_len - 1u, last) * p.cols;
    let dst = row * p.cols;

    var sum = 0.0;
    for (var i = lid; i < p.cols; i += WG) {
        let v = x[src + i];
        sum += v * v;
    }
    partial[lid] = sum;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if (lid < stride) {
            partial[lid] += partial[lid + stride];
        }
        workgroupBarrier();
    }

    let scale = inverseSqrt(partial[0] / f32(p.cols) + p.eps);
    let w_at = select((row % p.groups) * p.cols, 0u, (p.flags & SHARED) != 0u);
    for (var i = lid; i < p.cols; i += WG) {
        y[dst + i] = x[src + i] * scale * weight[w_at + i];
    }
}
