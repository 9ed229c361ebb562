//! A Mamba-2 block on the CPU reference (HF `Mamba2Mixer`'s slow path, as a sequential scan).
//! Mamba-2's SSM is Mamba-1's with A a scalar per head and B, C shared by a group of heads:
//!
//!   h_t[c, n] = exp(Δ_t[hd] A[hd]) h_{t−1}[c, n] + Δ_t[hd] x_t[c] B_t[g, n]
//!   y_t[c]    = Σ_n h_t[c, n] C_t[g, n] + D[hd] x_t[c]
//!
//! for channel c = hd · P + p of head hd, in group g = hd / (H / G). HF computes the same
//! recurrence chunk by chunk as SSD's masked matmuls (the duality); the result is the same.
//! Symbols: see the glossary in [`crate::model`].

use crate::blocks::SSM;
use crate::blocks::mamba2::{GatedNorm, Mamba2, Weights};
use crate::cpu::conv::{ConvWeights, Run, conv_silu};
use crate::cpu::matmul::linear;
use crate::cpu::ops::{dot, exp, silu, softplus};

/// The block's mixer over x (T, D) from state `st`, updating it; returns (T, D). `a` is
/// A = −exp(A_log), (H). The layer's state after each of `cap.positions` goes to `cap.states`.
pub(crate) fn forward(c: &Mamba2, w: &Weights, run: Run<'_>) -> Vec<f32> {
    let Run { a, x, st, mut cap } = run;
    let (di, n, k, heads, p, g) = (c.d_inner, c.d_state, c.d_conv, c.n_heads, c.head_dim, c.n_groups);
    let (cd, width) = (c.conv_dim(), c.in_proj_dim());
    let (lo, hi) = c.time_step_limit;
    let t_len = x.len() / w.ssm.in_proj.cols;

    // [z | x | B | C | δ] = x · W_inᵀ (+ b_in): (T, E·D + conv_dim + H)
    let mut zxbcdt = linear(x, &w.ssm.in_proj, w.ssm.in_proj_bias.as_deref());
    if c.in_scales != [1.0; 5] {
        // Falcon-H1's µP multipliers, one per segment z | x | B | C | δ.
        let gn = g * n;
        let ends = [di, 2 * di, 2 * di + gn, 2 * di + 2 * gn, width];
        for row in zxbcdt.chunks_exact_mut(width) {
            let mut start = 0;
            for (end, scale) in ends.iter().zip(c.in_scales) {
                row[start..*end].iter_mut().for_each(|v| *v *= scale);
                start = *end;
            }
        }
    }
    // u = silu(conv1d(x ‖ B ‖ C) + b_conv): (T, conv_dim)
    let u = conv_silu(
        ConvWeights { weight: &w.ssm.conv, bias: w.ssm.conv_bias.as_deref(), k },
        &zxbcdt,
        width,
        di,
        st,
        &mut cap,
    );

    // The scan, sequential in t, then the gate: y ← y · silu(z) (after the norm below for
    // NormThenGate).
    let gate_first = c.gated_norm != GatedNorm::NormThenGate;
    let mut y = vec![0.0; t_len * di];
    let mut next_snapshot = 0;
    for t in 0..t_len {
        let (ut, row) = (&u[t * cd..(t + 1) * cd], &zxbcdt[t * width..(t + 1) * width]);
        for hd in 0..heads {
            // Δ = clamp(softplus(δ + dt_bias), time_step_limit), one per head.
            let dt = softplus(row[di + cd + hd] + w.ssm.dt_bias[hd]).max(lo).min(hi);
            let decay = exp(dt * a[hd]);
            let group = hd / (heads / g);
            let b = &ut[di + group * n..di + (group + 1) * n];
            let cc = &ut[di + (g + group) * n..di + (g + group + 1) * n];
            for ch in hd * p..(hd + 1) * p {
                let xt = ut[ch];
                let h = &mut st.regions[SSM][ch * n..(ch + 1) * n];
                h.iter_mut().zip(b).for_each(|(h, b)| *h = decay * *h + dt * xt * b);
                let gate = if gate_first { silu(row[ch]) } else { 1.0 };
                y[t * di + ch] = (dot(h, cc) + w.ssm.d[hd] * xt) * gate;
            }
        }
        if cap.positions.get(next_snapshot) == Some(&t) {
            cap.states[next_snapshot].layers[cap.layer].regions[SSM].copy_from_slice(&st.regions[SSM]);
            next_snapshot += 1;
        }
    }

    // The gated RMSNorm: each group of E·D / G channels by its own RMS, then the gain.
    let gain = &w.gated_norm;
    if c.gated_norm != GatedNorm::GateOnly {
        for row in y.chunks_exact_mut(di) {
            for (part, gain) in row.chunks_exact_mut(di / g).zip(gain.chunks_exact(di / g)) {
                let scale = 1.0 / (dot(part, part) / part.len() as f32 + c.norm_eps).sqrt();
                part.iter_mut().zip(gain).for_each(|(v, g)| *v *= scale * g);
            }
        }
    }
    if !gate_first {
        for (t, row) in y.chunks_exact_mut(di).enumerate() {
            row.iter_mut().zip(&zxbcdt[t * width..t * width + di]).for_each(|(v, &z)| *v *= silu(z));
        }
    }

    // out = y · W_outᵀ (+ b_out): (T, D)
    linear(&y, &w.ssm.out_proj, w.ssm.out_proj_bias.as_deref())
}
