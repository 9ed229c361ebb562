// embedding: gathers token embeddings, h[t, :] = E[ids[t], :].
//
// E may be split by rows across several buffers (a 130M model's f32 embedding is 154 MB, above
// the 128 MiB storage binding limit of lavapipe and many phones). One dispatch per part: a part
// holds rows [row_start, row_start + n_rows) and writes only the tokens that fall in it.

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    _pad0: u32,
    _pad1: u32,
}

struct Params {
    d_model: u32,   // D
    row_start: u32, // first vocabulary row held by this part
    n_rows: u32,    // rows held by this part
    _pad: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> ids: array<u32>;        // (T)
@group(0) @binding(3) var<storage, read> table: array<f32>;      // (n_rows, D) this part of E
@group(0) @binding(4) var<storage, read_write> h: array<f32>;    // (T, D)

@compute @workgroup_size(64)
fn embedding(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    let t = gid.y;
    if (t >= step.t_len || i >= p.d_model) {
        return;
    }
    let id = ids[t];
    if (id < p.row_start || id >= p.row_start + p.n_rows) {
        return;
    }
    h[t * p.d_model + i] = table[(id - p.row_start) * p.d_model + i];
}
