// rms_norm: Mamba's RMSNorm (HF `MambaRMSNorm`), one row per workgroup.
//
//   y[t, i] = x[t, i] * inverseSqrt(mean_j(x[t, j]^2) + eps) * weight[i]
//
// Each of the WG invocations of a workgroup sums the squares of a strided slice of its row,
// the partial sums are reduced as a tree in workgroup memory, and every invocation then scales
// its slice. Rows are spread over a 2-D grid so more than 65,535 rows can be dispatched.

const WG: u32 = 64u; // invocations per workgroup (a power of two; see the tree reduction)

struct Params {
    rows: u32,     // T: number of rows
    cols: u32,     // d: row length (d_model)
    eps: f32,      // layer_norm_epsilon
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;         // (T, d)
@group(0) @binding(2) var<storage, read> weight: array<f32>;    // (d)
@group(0) @binding(3) var<storage, read_write> y: array<f32>;   // (T, d)

var<workgroup> partial: array<f32, WG>; // (WG) per-invocation sums of squares

@compute @workgroup_size(WG)
fn rms_norm(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = wid.y * nwg.x + wid.x;
    if (row >= p.rows) {
        return; // uniform per workgroup: the whole workgroup leaves together
    }
    let base = row * p.cols;

    var sum = 0.0;
    for (var i = lid; i < p.cols; i += WG) {
        let v = x[base + i];
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
    for (var i = lid; i < p.cols; i += WG) {
        y[base + i] = x[base + i] * scale * weight[i];
    }
}
