// kv_append: copies the keys and values of this call's T tokens into a layer's KV cache at
// positions past .. past + T. K and V rows are read in place from the projection output (a
// fused q ‖ k ‖ v buffer bound as both `k` and `v`, or separate buffers): `*_stride` floats
// between rows, the row's first key / value at column `*_col`. Rotary embedding is applied to
// the keys beforehand, in place, by `rope`; this kernel only copies.
//
// The cache of a layer starts `kv_offset` floats into `kv` (layers share one buffer): its K
// region (capacity, Hkv, hd), then its V region (capacity, Hkv, hd). One invocation per
// (token, column); positions ≥ capacity are not written (the host refuses such calls).

const WG: u32 = 64u; // invocations per workgroup

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    width: u32,     // Hkv · hd: floats of one token's keys (and of its values)
    k_stride: u32,  // floats between rows of k
    k_col: u32,     // column of the first key in a row of k
    v_stride: u32,  // floats between rows of v
    v_col: u32,     // column of the first value in a row of v
    kv_offset: u32, // floats: where the layer's K region starts in kv
    capacity: u32,  // positions the layer's cache holds
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> k: array<f32>;        // (T, k_stride): (Hkv, hd) at k_col
@group(0) @binding(3) var<storage, read> v: array<f32>;        // (T, v_stride): (Hkv, hd) at v_col
@group(0) @binding(4) var<storage, read_write> kv: array<u32>; // at kv_offset: K, V each (capacity, Hkv, hd), in KV_FORMAT

// How the cache stores its values (a pipeline-overridable constant, one pipeline per format):
// 0 = f32 (a value per u32), 1 = f16 (two per u32, element 2i in the low half: an even
// invocation packs its value and the next; the host keeps width and kv_offset even).
override KV_FORMAT: u32 = 0u;

@compute @workgroup_size(WG)
fn kv_append(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = (wid.y * nwg.x + wid.x) * WG + lid;
    if (i >= step.t_len * p.width) {
        return;
    }
    let j = i % p.width;
    let t = i / p.width;
    let pos = step.past + t;
    if (pos >= p.capacity) {
        return;
    }
    let k_at = t * p.k_stride + p.k_col + j;
    let v_at = t * p.v_stride + p.v_col + j;
    let key = p.kv_offset + pos * p.width + j;
    let value = p.kv_offset + (p.capacity + pos) * p.width + j;
    if (KV_FORMAT == 0u) {
        kv[key] = bitcast<u32>(k[k_at]);
        kv[value] = bitcast<u32>(v[v_at]);
    } else if ((j & 1u) == 0u) {
        kv[key >> 1u] = pack2x16float(vec2<f32>(k[k_at], k[k_at + 1u]));
        kv[value >> 1u] = pack2x16float(vec2<f32>(v[v_at], v[v_at + 1u]));
    }
}
