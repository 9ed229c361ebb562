// scale_segments: multiplies, in place, each of five consecutive column segments of every row
// of x by its own scale — Falcon-H1's µP multipliers on a Mamba-2 in_proj's output z ‖ x ‖ B ‖
// C ‖ δ (`ssm_multipliers`, bias included, before the conv and the scan read it):
//
//   x[t, c] ← x[t, c] · scale_s   for c in segment s = [end_{s−1}, end_s), end_{−1} = 0, end_4 = width
//
// One invocation per (token, column).

const WG: u32 = 64u; // invocations per workgroup

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    width: u32,    // floats per row of x (E·D + conv_dim + H); segment δ ends here
    end_z: u32,    // where segment z ends and x starts (E·D)
    end_x: u32,    // where x ends and B starts (2·E·D)
    end_b: u32,    // where B ends and C starts (2·E·D + G·N)
    end_c: u32,    // where C ends and δ starts (2·E·D + 2·G·N)
    scale_z: f32,
    scale_x: f32,
    scale_b: f32,
    scale_c: f32,
    scale_dt: f32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> x: array<f32>; // (T, width), scaled in place

@compute @workgroup_size(WG)
fn scale_segments(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = (wid.y * nwg.x + wid.x) * WG + lid;
    if (i >= step.t_len * p.width) {
        return;
    }
    let c = i % p.width;
    var s = p.scale_dt;
    if (c < p.end_z) {
        s = p.scale_z;
    } else if (c < p.end_x) {
        s = p.scale_x;
    } else if (c < p.end_b) {
        s = p.scale_b;
    } else if (c < p.end_c) {
        s = p.scale_c;
    }
    x[i] = x[i] * s;
}
