// scan_carry: pass 2 of the chunked selective scan. Chains the per-chunk maps h ↦ a·h + b from
// scan_chunks, starting at the layer's SSM state, and records the state every chunk starts
// from. One invocation per (channel, state index); sequential over the (few) chunks.

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    plane: u32,        // E·D·N: floats per chunk plane
    state_offset: u32, // layer · E·D·N: this layer's SSM state in the state buffer
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> chunk_ab: array<f32>;      // (chunks, 2, E·D, N)
@group(0) @binding(3) var<storage, read> ssm_state: array<f32>;     // (layers, E·D, N)
@group(0) @binding(4) var<storage, read_write> chunk_h0: array<f32>; // (chunks, E·D, N) start states

@compute @workgroup_size(64)
fn scan_carry(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= p.plane) {
        return;
    }
    var h = ssm_state[p.state_offset + i];
    for (var j = 0u; j < step.n_chunks; j++) {
        chunk_h0[j * p.plane + i] = h;
        h = chunk_ab[(2u * j) * p.plane + i] * h + chunk_ab[(2u * j + 1u) * p.plane + i];
    }
}
