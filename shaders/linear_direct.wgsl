// linear_direct: the same Y = X · Wᵀ (+ bias, softplus, += Y) as linear.wgsl, for adapters
// that run on the CPU (lavapipe, SwiftShader). Each invocation computes a 4×4 block of Y in
// registers straight from storage memory, with no workgroup memory and no barriers: those
// adapters emulate barriers expensively, and this variant ran a 130M-shaped prefill 1.8× faster
// than the tiled one on lavapipe (ARCHITECTURE.md). Same parameters and bindings as linear.wgsl.

const TILE: u32 = 32u; // rows and outputs per workgroup (8×8 invocations × 4×4 each)
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
    // torch.nn.functional.softplus: v above 20, else log(1 + e^v) (≈ e^v far below 0).
    if (v > 20.0) {
        return v;
    }
    if (v < -15.0) {
        return exp(v);
    }
    return log(1.0 + exp(v));
}

fn store(r: u32, o: u32, rows: u32, acc: f32) {
    if (r >= rows || o >= p.n_out) {
        return;
    }
    var v = acc;
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

@compute @workgroup_size(8, 8)
fn linear_direct(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    let rows = n_rows();
    let r0 = wid.y * TILE + lid.y * 4u;
    let o0 = wid.x * TILE + lid.x * 4u;
    let x0 = x_row(min(r0, rows - 1u)) * p.x_stride + p.x_col;
    let x1 = x_row(min(r0 + 1u, rows - 1u)) * p.x_stride + p.x_col;
    let x2 = x_row(min(r0 + 2u, rows - 1u)) * p.x_stride + p.x_col;
    let x3 = x_row(min(r0 + 3u, rows - 1u)) * p.x_stride + p.x_col;
    let w0 = min(o0, p.n_out - 1u) * p.n_in;
    let w1 = min(o0 + 1u, p.n_out - 1u) * p.n_in;
    let w2 = min(o0 + 2u, p.n_out - 1u) * p.n_in;
    let w3 = min(o0 + 3u, p.n_out - 1u) * p.n_in;
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    for (var k = 0u; k < p.n_in; k++) {
        let b = vec4<f32>(w[w0 + k], w[w1 + k], w[w2 + k], w[w3 + k]);
        acc0 += x[x0 + k] * b;
        acc1 += x[x1 + k] * b;
        acc2 += x[x2 + k] * b;
        acc3 += x[x3 + k] * b;
    }
    let accs = array<vec4<f32>, 4>(acc0, acc1, acc2, acc3);
    for (var i = 0u; i < 4u; i++) {
        for (var j = 0u; j < 4u; j++) {
            store(r0 + i, o0 + j, rows, accs[i][j]);
        }
    }
}
