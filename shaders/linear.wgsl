// linear: Y = X · Wᵀ (+ bias), then optionally softplus, then optionally Y += (residual add):
// PyTorch's `nn.Linear` for the prefill path (many rows), tiled in workgroup memory.
//
// Each 8×8 workgroup computes a 32×32 tile of Y (32 rows × 32 outputs); each invocation a 4×4
// block. K is walked in slices of 32: both operand slices are staged in workgroup memory, then
// every invocation does 4×4 multiply-adds per k from there.
//
// Rows: all T rows from x_row_start (at most rows_max if it is not 0), or with LAST_ROW only row
// T-1 (written as Y's row 0). W may be one part of a row-split matrix: output o of the part is
// Y column y_col + o.

const TILE: u32 = 32u; // rows and outputs per workgroup
const BK: u32 = 32u;   // K per slice
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

var<workgroup> xs: array<f32, 1024>; // (TILE rows, BK) slice of X
var<workgroup> ws: array<f32, 1024>; // (TILE outputs, BK) slice of W

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

@compute @workgroup_size(8, 8)
fn linear(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let rows = n_rows();
    let row0 = wid.y * TILE;
    let out0 = wid.x * TILE;
    var acc: array<f32, 16>; // (4 rows, 4 outputs) of this invocation

    for (var k0 = 0u; k0 < p.n_in; k0 += BK) {
        for (var i = li; i < TILE * BK; i += 64u) {
            let r = i / BK;
            let k = k0 + i % BK;
            var xv = 0.0;
            if (row0 + r < rows && k < p.n_in) {
                xv = x[x_row(row0 + r) * p.x_stride + p.x_col + k];
            }
            xs[i] = xv;
            var wv = 0.0;
            if (out0 + r < p.n_out && k < p.n_in) {
                wv = w[(out0 + r) * p.n_in + k];
            }
            ws[i] = wv;
        }
        workgroupBarrier();
        for (var k = 0u; k < BK; k++) {
            var a: array<f32, 4>;
            var b: array<f32, 4>;
            for (var i = 0u; i < 4u; i++) {
                a[i] = xs[(lid.y * 4u + i) * BK + k];
                b[i] = ws[(lid.x * 4u + i) * BK + k];
            }
            for (var i = 0u; i < 4u; i++) {
                for (var j = 0u; j < 4u; j++) {
                    acc[i * 4u + j] += a[i] * b[j];
                }
            }
        }
        workgroupBarrier();
    }

    for (var i = 0u; i < 4u; i++) {
        let r = row0 + lid.y * 4u + i;
        for (var j = 0u; j < 4u; j++) {
            let o = out0 + lid.x * 4u + j;
            if (r < rows && o < p.n_out) {
                var v = acc[i * 4u + j];
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
        }
    }
}
