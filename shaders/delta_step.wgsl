// delta_step: a decode step of the Gated DeltaNet in one dispatch — delta_prep's work for its
// heads and the recurrence. Per value head h and token t, from the conv's q ‖ k ‖ v (raw) and
// b, a in xz:
//
//   q̂ = q · (Σ q² + 10⁻⁶)^−½ · d_k^−½,  k̂ = k · (Σ k² + 10⁻⁶)^−½   (h's key head)
//   β = σ(b_h),  g = A_h · softplus(a_h + dt_bias_h)
//   S ← e^g · S;  m = Sᵀ k̂;  S ← S + k̂ ⊗ β (v − m);  o = Sᵀ q̂   → y
//
// as delta_prep then delta_state compute them (the prefill's passes; prep writes q̂, k̂, β and
// g in place there, here they stay in registers: the buffers are left as they were).
// A workgroup is (value head, block of JB value channels); each channel's d_k entries of S
// are split over LANES invocations (lane l holds d = l, l + LANES, …: in registers), whose
// parts of Sᵀk and Sᵀq are added in lane order through workgroup memory; the squares of q and
// k are summed as a tree over the workgroup, each of its WG ≥ d_k invocations holding one
// entry. Checkpoints as delta_state's: after token t with a map entry n + 1, S goes to
// checkpoint n's slot.
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
    beta_at: u32,      // column of b (H_v) in a row of xz; a (H_v) follows
    state_offset: u32, // this layer's state (H_v, d_v, d_k) in the SSM state buffer
    map_len: u32,      // T_max: length of the position map at the start of `capture`
    slot_len: u32,     // floats per checkpoint slot
    slot_ssm_at: u32,  // where this layer's state sits in a slot
    scale: f32,        // d_k^−½
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> ud: array<f32>;              // (T, conv_dim): q ‖ k ‖ v (the conv's output)
@group(0) @binding(3) var<storage, read> xz: array<f32>;              // (T, xz_stride): b, a at beta_at
@group(0) @binding(4) var<storage, read_write> ssm_state: array<f32>; // (…, H_v, d_v, d_k) at state_offset
@group(0) @binding(5) var<storage, read_write> y: array<f32>;         // (T, H_v·d_v)
@group(0) @binding(6) var<storage, read_write> capture: array<f32>;   // (T_max) map, then (captures, slot_len) slots
@group(0) @binding(7) var<storage, read> a_dt: array<f32>;            // (2·H_v): A = −exp(A_log) ‖ dt_bias

var<workgroup> parts: array<f32, 256>; // (2, WG) each lane's part of Sᵀk, then of Sᵀq; first the squares of q and k

fn softplus(v: f32) -> f32 {
    // softplus(v) = max(v, 0) + log1p(e^−|v|), with log1p(x) = 2·atanh(x / (2 + x)) summed as
    // its series (x ≤ 1, so s ≤ 1/3: eight terms reach f32's precision). No log(1 + e^v): the
    // rounding of 1 + e^v loses Δ's digits below v ≈ −8 (5% at −15), and many GPUs' log is
    // only accurate to 2^−21 absolute near 1. Above 20 it is v, as torch's threshold gives.
    let x = exp(-abs(v));
    let s = x / (2.0 + x);
    let s2 = s * s;
    let odd = 1.0 / 9.0 + s2 * (1.0 / 11.0 + s2 * (1.0 / 13.0 + s2 * (1.0 / 15.0)));
    let series = 1.0 + s2 * (1.0 / 3.0 + s2 * (1.0 / 5.0 + s2 * (1.0 / 7.0 + s2 * odd)));
    return max(v, 0.0) + 2.0 * s * series;
}

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
        // delta_prep's norms: invocation lid holds entry lid of q and of k (WG ≥ DK_MAX).
        workgroupBarrier(); // the previous token's reads of parts are done
        let qi = select(0.0, ud[row + q_at + min(lid, dk - 1u)], lid < dk);
        let ki = select(0.0, ud[row + k_at + min(lid, dk - 1u)], lid < dk);
        parts[lid] = qi * qi;
        parts[WG + lid] = ki * ki;
        workgroupBarrier();
        for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
            if (lid < stride) {
                parts[lid] += parts[lid + stride];
                parts[WG + lid] += parts[WG + lid + stride];
            }
            workgroupBarrier();
        }
        let q_scale = inverseSqrt(parts[0] + 1e-6) * p.scale;
        let k_scale = inverseSqrt(parts[WG] + 1e-6);
        workgroupBarrier(); // every invocation has read the sums before parts is reused
        let b = xz[t * p.xz_stride + p.beta_at + h];
        let a = xz[t * p.xz_stride + p.beta_at + p.v_heads + h];
        let beta = 1.0 / (1.0 + exp(-b));
        let decay = exp(a_dt[h] * softplus(a + a_dt[p.v_heads + h]));
        var m = 0.0;
        for (var i = 0u; i < PER_LANE; i++) {
            let d = lane + i * LANES;
            if (d < dk) {
                s[i] *= decay;
                m += s[i] * (ud[row + k_at + d] * k_scale);
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
                s[i] += (ud[row + k_at + d] * k_scale) * delta;
                o += s[i] * (ud[row + q_at + d] * q_scale);
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
