//! A Gated DeltaNet block on the CPU reference: the gated delta rule token by token, as HF's
//! `torch_recurrent_gated_delta_rule` computes it (its chunked form is the same sums in
//! another order), the value heads split across the model's threads.

use crate::blocks::SSM;
use crate::blocks::delta_net::{DeltaNet, Weights};
use crate::cpu::conv::{ConvWeights, Run, conv_silu};
use crate::cpu::matmul::linear;
use crate::cpu::ops::{dot, rms_norm_in_place, silu, softplus};
use crate::cpu::threads::{chunk_len, min_elements};

/// x · (Σ x² + 10⁻⁶)^−½: HF's `l2norm` (FLA's convention).
fn l2norm(x: &mut [f32]) {
    let scale = 1.0 / (dot(x, x) + 1e-6).sqrt();
    x.iter_mut().for_each(|v| *v *= scale);
}

/// The block over x (T, D) from state `st`, updating it; returns (T, D). The state after each
/// of `cap.positions` goes to `cap.states`.
pub(crate) fn forward(p: &DeltaNet, w: &Weights, run: Run<'_>) -> Vec<f32> {
    let Run { x, st, mut cap, .. } = run;
    let (hv, dk, dv) = (p.v_heads, p.k_dim, p.v_dim);
    let (kw, cd) = (p.key_width(), p.conv_dim());
    let group = hv / p.k_heads;
    let t_len = x.len() / w.qkv.cols;

    // q ‖ k ‖ v = silu(conv1d(x · W_qkvᵀ)): (T, conv_dim); z (T, H_v·d_v); b, a (T, H_v)
    let qkv = linear(x, &w.qkv, None);
    let conv = ConvWeights { weight: &w.conv, bias: None, k: p.conv };
    let u = conv_silu(conv, &qkv, cd, 0, st, &mut cap);
    let z = linear(x, &w.z, None);
    let b = linear(x, &w.b, None);
    let a = linear(x, &w.a, None);

    // Per token: q and k of every key head L2-normalised (q also · d_k^−½); per value head
    // the decay exp(g) and β.
    let scale = 1.0 / (dk as f32).sqrt();
    let mut q = Vec::with_capacity(t_len * kw);
    let mut k = Vec::with_capacity(t_len * kw);
    for row in u.chunks_exact(cd) {
        for (out, part, s) in [(&mut q, &row[..kw], scale), (&mut k, &row[kw..2 * kw], 1.0)] {
            for head in part.chunks_exact(dk) {
                let from = out.len();
                out.extend_from_slice(head);
                l2norm(&mut out[from..]);
                out[from..].iter_mut().for_each(|v| *v *= s);
            }
        }
    }
    let a_neg: Vec<f32> = w.a_log.iter().map(|l| -l.exp()).collect();
    let mut decay = vec![0.0; t_len * hv];
    let mut beta = vec![0.0; t_len * hv];
    for t in 0..t_len {
        for h in 0..hv {
            let g = a_neg[h] * softplus(a[t * hv + h] + w.dt_bias[h]);
            decay[t * hv + h] = g.exp();
            beta[t * hv + h] = 1.0 / (1.0 + (-b[t * hv + h]).exp());
        }
    }

    // The recurrence, sequential in t, in blocks of whole value heads on the model's threads.
    // S of head h is (d_v, d_k): row j holds S[:, j]. Per token and head:
    // S ← exp(g)·S; Sᵀk; S ← S + k ⊗ β(v − Sᵀk); o = Sᵀq.
    let per_head = dv * dk;
    let heads = chunk_len(hv, min_elements(t_len * per_head).max(1), 1);
    let mut o = cap.scan_blocks(&mut st.regions[SSM], (t_len, heads * dv, dk), |first, t, s, out| {
        let mut kv_mem = vec![0.0; dv];
        for (j, (sh, out)) in s.chunks_exact_mut(per_head).zip(out.chunks_exact_mut(dv)).enumerate() {
            let h = first / dv + j;
            let kh = h / group;
            let (qt, kt) = (&q[(t * p.k_heads + kh) * dk..][..dk], &k[(t * p.k_heads + kh) * dk..][..dk]);
            let vt = &u[t * cd + 2 * kw + h * dv..][..dv];
            let (g, bt) = (decay[t * hv + h], beta[t * hv + h]);
            for (row, mem) in sh.chunks_exact_mut(dk).zip(kv_mem.iter_mut()) {
                row.iter_mut().for_each(|v| *v *= g);
                *mem = dot(row, kt);
            }
            for (c, row) in sh.chunks_exact_mut(dk).enumerate() {
                let delta = (vt[c] - kv_mem[c]) * bt;
                row.iter_mut().zip(kt).for_each(|(v, kk)| *v += kk * delta);
                out[c] = dot(row, qt);
            }
        }
    });

    // The gated RMSNorm per head: rms_norm(o) · w ⊙ silu(z); then out_proj: (T, D)
    for (head, gate) in o.chunks_exact_mut(dv).zip(z.chunks_exact(dv)) {
        rms_norm_in_place(head, p.eps);
        for ((v, wn), zz) in head.iter_mut().zip(&w.norm).zip(gate) {
            *v = *v * wn * silu(*zz);
        }
    }
    linear(&o, &w.out_proj, None)
}
