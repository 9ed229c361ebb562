// delta_step: the Gated DeltaNet's recurrence token by token — a decode step's whole update of
// the state in one dispatch. Per value head h and token t, with q, k of h's key head
// (normalised by delta_prep), β and the log decay g (delta_prep's):
//
//   S ← e^g · S;  m = Sᵀ k;  S ← S + k ⊗ β (v − m);  o = Sᵀ q   → y
//
// A workgroup is (value head, block of JB value channels); each channel's d_k entries of S
// are split over LANES invocations (lane l holds d = l, l + LANES, …: in registers), whose
// parts of Sᵀk and Sᵀq are added in lane order through workgroup memory. Checkpoints as
// delta_state's: after token t with a map entry n + 1, S goes to checkpoint n's slot.
//
// Groups::Fixed(H_v · ceil(d_v / JB)).

const WG: u32 = 128u;     // invocations per workgroup: JB channels × LANES
const JB: u32 = 16u;      // value channels per workgroup
const LANES: u32 = 8u;    // invocations per channel
const PER_LANE: u32 = 16u; // entries of S per invocation: DK_MAX / LANES
const DK_MAX: u32 = 128u; // largest d_k supported

struct Step {
    t_len: u32,    // T: tokens in this forward call
    n_chunks: u32, // scan chunks: ceil(T / CHUNK)
    past: u32,     // tokens in the context before this call: position of its first token
    _pad0: u32,
}

struct Params {
    conv_dim: u32,     // 2·H_k·d_k + H_v·d_v: floats per row of ud
    k_heads: u32,      // H_k
    k_dim: u32,        // d_k
    v_dim: u32,        // d_v
    v_heads: u32,      // H_v
    xz_stride: u32,    // floats per row of xz
    c_at: u32,         // column of β (H_v) in a row of xz; g (H_v) follows (delta_state's name)
    state_offset: u32, // this layer's state (H_v, d_v, d_k) in the SSM state buffer
    map_len: u32,      // T_max: length of the position map at the start of `capture`
    slot_len: u32,     // floats per checkpoint slot
    slot_ssm_at: u32,  // where this layer's state sits in a slot
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> ud: array<f32>;              // (T, conv_dim): q ‖ k ‖ v, q and k normalised
@group(0) @binding(3) var<storage, read> xz: array<f32>;              // (T, xz_stride): β, g at beta_at
@group(0) @binding(4) var<storage, read_write> ssm_state: array<f32>; // (…, H_v, d_v, d_k) at state_offset
@group(0) @binding(5) var<storage, read_write> y: array<f32>;         // (T, H_v·d_v)
@group(0) @binding(6) var<storage, read_write> capture: array<f32>;   // (T_max) map, then (captures, slot_len) slots

var<workgroup> parts: array<f32, 256>; // (2, WG) each lane's part of Sᵀk, then of Sᵀq

@compute @workgroup_size(WG)
fn delta_step(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let blocks = (p.v_dim + JB - 1u) / JB;
    let h = wid.x / blocks;
    let jj = lid / LANES;
    let lane = lid % LANES;
    let c = (wid.x % blocks) * JB + jj; // this invocation's value channel
    let live = c < p.v_dim;
    let dk = p.k_dim;
    let kw = p.k_heads * dk;
    let kh = h / (p.v_heads / p.k_heads);
    let q_at = kh * dk;
    let k_at = kw + q_at;
    let v_at = 2u * kw + h * p.v_dim;
    let at = p.state_offset + (h * p.v_dim + c) * dk; // channel c's entries in the state
    var s: array<f32, PER_LANE>;
    for (var i = 0u; i < PER_LANE; i++) {
        let d = lane + i * LANES;
        s[i] = 0.0;
        if (live && d < dk) {
            s[i] = ssm_state[at + d];
        }
    }
    for (var t = 0u; t < step.t_len; t++) {
        let row = t * p.conv_dim;
        let decay = exp(xz[t * p.xz_stride + p.c_at + p.v_heads + h]);
        let beta = xz[t * p.xz_stride + p.c_at + h];
        var m = 0.0;
        for (var i = 0u; i < PER_LANE; i++) {
            let d = lane + i * LANES;
            if (d < dk) {
                s[i] *= decay;
                m += s[i] * ud[row + k_at + d];
            }
        }
        parts[lid] = m;
        workgroupBarrier();
        m = 0.0;
        for (var l = 0u; l < LANES; l++) {
            m += parts[jj * LANES + l];
        }
        let v = select(0.0, ud[row + v_at + min(c, p.v_dim - 1u)], live);
        let delta = (v - m) * beta;
        var o = 0.0;
        for (var i = 0u; i < PER_LANE; i++) {
            let d = lane + i * LANES;
            if (d < dk) {
                s[i] += ud[row + k_at + d] * delta;
                o += s[i] * ud[row + q_at + d];
            }
        }
        parts[WG + lid] = o;
        workgroupBarrier();
        if (live && lane == 0u) {
            o = 0.0;
            for (var l = 0u; l < LANES; l++) {
                o += parts[WG + jj * LANES + l];
            }
            y[t * p.v_heads * p.v_dim + h * p.v_dim + c] = o;
        }
        let cp = u32(capture[t]); // a whole number as an f32 value: never a denormal
        if (live && cp != 0u) {
            let slot = p.map_len + (cp - 1u) * p.slot_len + p.slot_ssm_at + (h * p.v_dim + c) * dk;
            for (var i = 0u; i < PER_LANE; i++) {
                let d = lane + i * LANES;
                if (d < dk) {
                    capture[slot + d] = s[i];
                }
            }
        }
    }
    for (var i = 0u; i < PER_LANE; i++) {
        let d = lane + i * LANES;
        if (live && d < dk) {
            ssm_state[at + d] = s[i];
        }
    }
}
