// rope: rotary position embedding in place, HF's NeoX style (`rotate_half`), with partial
// rotary: within the first `rot` dims of each head, dims i and i + rot/2 form a pair
//
//   x'[i]         = x[i]         * cos(pos·f_i) - x[i + rot/2] * sin(pos·f_i)
//   x'[i + rot/2] = x[i + rot/2] * cos(pos·f_i) + x[i]         * sin(pos·f_i)     (i < rot/2)
//
// and dims ≥ rot pass through untouched. Token t of the call is at position pos = past + t.
// cos and sin come from a table the host computes once (`kernels::rope::rope_table`, HF's
// f32 arithmetic). One invocation per (token, head, pair); rows may sit inside a wider
// buffer (a fused q ‖ k ‖ v projection): `stride` floats apart, head 0 at column `col`.

const WG: u32 = 64u; // invocations per workgroup

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    stride: u32,    // floats from one token's row of x to the next
    col: u32,       // column of head 0's first dim in a row
    heads: u32,     // heads per row to rotate
    head_dim: u32,  // hd
    rot: u32,       // rotated dims per head (even, ≤ hd): hd · partial_rotary_factor
    positions: u32, // rows of the table: positions past + t ≥ this are left untouched
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> cos_sin: array<f32>; // (positions, 2, rot/2): cos ‖ sin per position
@group(0) @binding(3) var<storage, read_write> x: array<f32>;  // (T, stride): (heads, hd) at col

@compute @workgroup_size(WG)
fn rope(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let half = p.rot / 2u;
    let i = (wid.y * nwg.x + wid.x) * WG + lid;
    if (i >= step.t_len * p.heads * half) {
        return;
    }
    let k = i % half;
    let h = (i / half) % p.heads;
    let t = i / (half * p.heads);
    let pos = step.past + t;
    if (pos >= p.positions) {
        return;
    }
    let c = cos_sin[pos * p.rot + k];
    let s = cos_sin[pos * p.rot + half + k];
    let at = t * p.stride + p.col + h * p.head_dim + k;
    let x1 = x[at];
    let x2 = x[at + half];
    x[at] = x1 * c - x2 * s;
    x[at + half] = x2 * c + x1 * s;
}
