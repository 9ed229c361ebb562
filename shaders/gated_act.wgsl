// gated_act: an MLP's activation between its two projections, per token t and inner index j:
//
//   gated:  y[t, j] = act(x[t, gate_col + j] · gate_scale) · x[t, up_col + j]   (SwiGLU and kin)
//   plain:  y[t, j] = act(x[t, up_col + j])
//
// act is silu, the exact GELU (erf), GELU's tanh approximation or relu² (`act`). A routed
// expert's call (a mixture of experts: `expert` ≠ NOT_ROUTED) multiplies row t by the router's
// weight for this expert when token t chose it, and writes 0 when it did not (so the down
// projection after it adds nothing for that token). One invocation per (token, j).

const WG: u32 = 64u; // invocations per workgroup
const NOT_ROUTED: u32 = 0xffffffffu;
const SILU: u32 = 0u;
const GELU: u32 = 1u;
const GELU_TANH: u32 = 2u;
const RELU2: u32 = 3u;

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    inner: u32,       // I: values per token written
    x_stride: u32,    // floats between rows of x
    gate_col: u32,    // column of the gate's first value in a row of x (gated)
    up_col: u32,      // column of up's first value in a row of x
    y_stride: u32,    // floats between rows of y
    act: u32,         // SILU | GELU | GELU_TANH | RELU2
    gated: u32,       // 1: act(gate · gate_scale) · up; 0: act(up)
    gate_scale: f32,  // multiplies the gate before the activation (Falcon-H1's gate multiplier)
    expert: u32,      // this routed expert's id, or NOT_ROUTED
    top_k: u32,       // routed: experts each token chose (k ids, then k weights per row of route)
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<f32>;        // (T, x_stride)
@group(0) @binding(3) var<storage, read> route: array<f32>;    // (T, 2·top_k): ids (whole numbers as f32 values) ‖ weights; a 1-element dummy when not routed
@group(0) @binding(4) var<storage, read_write> y: array<f32>;  // (T, y_stride)

// erfc(z) for z ≥ 0: Numerical Recipes' Chebyshev fit (fractional error < 1.2e-7).
fn erfc_pos(z: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418
        + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587
        + t * (-0.82215223 + t * 0.17087277))))))));
    return t * exp(poly);
}

fn activate(v: f32) -> f32 {
    switch p.act {
        case SILU: {
            return v / (1.0 + exp(-v));
        }
        case GELU: {
            // x · Φ(x) = x/2 · erfc(−x/√2), from the side where erfc is accurate.
            let e = erfc_pos(abs(v) * 0.70710678118654752);
            if (v >= 0.0) {
                return 0.5 * v * (2.0 - e);
            }
            return 0.5 * v * e;
        }
        case GELU_TANH: {
            let inner = 0.7978845608028654 * (v + 0.044715 * v * v * v);
            return 0.5 * v * (1.0 + tanh(inner));
        }
        default: {
            let r = max(v, 0.0);
            return r * r;
        }
    }
}

// The router's weight of this call's expert for token t, or −1 when t did not choose it.
fn routed_weight(t: u32) -> f32 {
    let row = t * 2u * p.top_k;
    for (var j = 0u; j < p.top_k; j++) {
        if (u32(route[row + j]) == p.expert) {
            return route[row + p.top_k + j];
        }
    }
    return -1.0;
}

@compute @workgroup_size(WG)
fn gated_act(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = (wid.y * nwg.x + wid.x) * WG + lid;
    if (i >= step.t_len * p.inner) {
        return;
    }
    let t = i / p.inner;
    let j = i % p.inner;
    let out = t * p.y_stride + j;
    var scale = 1.0;
    if (p.expert != NOT_ROUTED) {
        scale = routed_weight(t);
        if (scale < 0.0) {
            y[out] = 0.0;
            return;
        }
    }
    let row = t * p.x_stride;
    var v: f32;
    if (p.gated != 0u) {
        v = activate(x[row + p.gate_col + j] * p.gate_scale) * x[row + p.up_col + j];
    } else {
        v = activate(x[row + p.up_col + j]);
    }
    y[out] = v * scale;
}
