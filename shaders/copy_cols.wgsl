// copy_cols: copies a block of columns from every row of x into y (Zamba2's shared block:
// h and the embeddings into one row of hidden ‖ embeddings, the residual into the Mamba
// input):
//
//   y[t, y_col + j] = x[t, x_col + j]      for t < T, j < width
//
// One invocation per value.

const WG: u32 = 64u; // invocations per workgroup

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    width: u32,    // columns copied per row
    x_stride: u32, // floats between rows of x
    x_col: u32,    // first column read
    y_stride: u32, // floats between rows of y
    y_col: u32,    // first column written
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<f32>;       // (T, x_stride)
@group(0) @binding(3) var<storage, read_write> y: array<f32>; // (T, y_stride)

@compute @workgroup_size(WG)
fn copy_cols(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = (wid.y * nwg.x + wid.x) * WG + lid;
    if (i >= step.t_len * p.width) {
        return;
    }
    let t = i / p.width;
    let j = i % p.width;
    y[t * p.y_stride + p.y_col + j] = x[t * p.x_stride + p.x_col + j];
}
