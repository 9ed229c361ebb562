// gemv: the same Y = X · Wᵀ (+ bias, softplus, += Y) as linear.wgsl, for a handful of rows
// (the single-token decode step). One invocation per (output, row) walks W's row with four
// accumulators and no barriers: on software adapters barriers cost more than the loads they
// would share (see ARCHITECTURE.md). Same parameters and bindings as linear.wgsl, so the two
// pipelines share bind groups.

const BIAS: u32 = 1u;
const ACCUMULATE: u32 = 2u;
const SOFTPLUS: u32 = 4u;
const LAST_ROW: u32 = 8u;

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    _pad0: u32,
    _pad1: u32,
}

struct Params {
    n_in: u32,        // K: input features
    n_out: u32,       // O: outputs (rows of this W part)
    x_stride: u32,    // floats between rows of X
    x_col: u32,       // first column of X read
    x_row_start: u32, // first row of X read
    y_stride: u32,    // floats between rows of Y
    y_col: u32,       // column of Y written for output 0
    rows_max: u32,    // at most this many rows (0: no limit)
    flags: u32,       // BIAS | ACCUMULATE | SOFTPLUS | LAST_ROW
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<f32>;        // (T, x_stride)
@group(0) @binding(3) var<storage, read> w: array<f32>;        // (O, K)
@group(0) @binding(4) var<storage, read> bias: array<f32>;     // (O), a 1-element dummy without BIAS
@group(0) @binding(5) var<storage, read_write> y: array<f32>;  // (rows, y_stride)

fn n_rows() -> u32 {
    if ((p.flags & LAST_ROW) != 0u) {
        return 1u;
    }
    let available = step.t_len - min(p.x_row_start, step.t_len);
    return select(available, min(available, p.rows_max), p.rows_max != 0u);
}

fn x_row(r: u32) -> u32 {
    return select(p.x_row_start + r, step.t_len - 1u, (p.flags & LAST_ROW) != 0u);
}

fn softplus(v: f32) -> f32 {
    if (v > 20.0) {
        return v;
    }
    if (v < -15.0) {
        return exp(v);
    }
    return log(1.0 + exp(v));
}

@compute @workgroup_size(64)
fn gemv(@builtin(global_invocation_id) gid: vec3<u32>) {
    let o = gid.x;
    let r = gid.y;
    if (o >= p.n_out || r >= n_rows()) {
        return;
    }
    let xb = x_row(r) * p.x_stride + p.x_col;
    let wb = o * p.n_in;
    var a0 = 0.0;
    var a1 = 0.0;
    var a2 = 0.0;
    var a3 = 0.0;
    var k = 0u;
    for (; k + 4u <= p.n_in; k += 4u) {
        a0 += x[xb + k] * w[wb + k];
        a1 += x[xb + k + 1u] * w[wb + k + 1u];
        a2 += x[xb + k + 2u] * w[wb + k + 2u];
        a3 += x[xb + k + 3u] * w[wb + k + 3u];
    }
    for (; k < p.n_in; k++) {
        a0 += x[xb + k] * w[wb + k];
    }
    var v = (a0 + a1) + (a2 + a3);
    if ((p.flags & BIAS) != 0u) {
        v += bias[o];
    }
    if ((p.flags & SOFTPLUS) != 0u) {
        v = softplus(v);
    }
    let at = r * p.y_stride + p.y_col + o;
    if ((p.flags & ACCUMULATE) != 0u) {
        v += y[at];
    }
    y[at] = v;
}
