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
use crate::cpu::threads::{chunk_len, min_elements};

/// The block's mixer over x (T, D) from state `st`, updating it; returns (T, D). `a` is
/// A = −exp(A_log), (H). The layer's state after each of `cap.positions` goes to `cap.states`.
pub(crate) fn forward(c: &Mamba2, w: &Weights, run: Run<'_>) -> Vec<f32> {
    let Run { a, x, st, mut cap } = run;
    let (di, n, k, heads, p, g) = (c.d_inner, c.d_state, c.d_conv, c.n_heads, c.head_dim, c.n_groups);
    let (cd, width_in) = (c.conv_dim(), c.in_proj_dim());
    let (lo, hi) = c.time_step_limit;
    let t_len = x.len() / w.ssm.in_proj.cols;

    // [z | x | B | C | δ] = x · W_inᵀ (+ b_in): (T, E·D + conv_dim + H)
    let mut zxbcdt = linear(x, &w.ssm.in_proj, w.ssm.in_proj_bias.as_deref());
    if c.in_scales != [1.0; 5] {
        // Falcon-H1's µP multipliers, one per segment z | x | B | C | δ.
        let gn = g * n;
        let ends = [di, 2 * di, 2 * di + gn, 2 * di + 2 * gn, width_in];
        for row in zxbcdt.chunks_exact_mut(width_in) {
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
        width_in,
        di,
        st,
        &mut cap,
    );

    // The scan, sequential in t, in blocks of whole heads on the model's threads, then the
    // gate: y ← y · silu(z) (after the norm below for NormThenGate). A step takes a block's
    // heads through token t (`Capture::scan_blocks` keeps the states after captured positions).
    let gate_first = c.gated_norm != GatedNorm::NormThenGate;
    // (`threads::MIN_PIECE` state entries a piece at least, as Mamba-1's scan)
    let channels = chunk_len(di, min_elements(t_len * n).max(64), p);
    let mut y = cap.scan_blocks(&mut st.regions[SSM], (t_len, channels, n), |first, t, hs, y_t| {
        let (ut, row) = (&u[t * cd..(t + 1) * cd], &zxbcdt[t * width_in..(t + 1) * width_in]);
        for (j, h_head) in hs.chunks_exact_mut(p * n).enumerate() {
            let hd = first / p + j;
            // Δ = clamp(softplus(δ + dt_bias), time_step_limit), one per head.
            let dt = softplus(row[di + cd + hd] + w.ssm.dt_bias[hd]).max(lo).min(hi);
            let decay = exp(dt * a[hd]);
            let group = hd / (heads / g);
            let b = &ut[di + group * n..di + (group + 1) * n];
            let cc = &ut[di + (g + group) * n..di + (g + group + 1) * n];
            for (q, h) in h_head.chunks_exact_mut(n).enumerate() {
                let ch = hd * p + q;
                let xt = ut[ch];
                h.iter_mut().zip(b).for_each(|(h, b)| *h = decay * *h + dt * xt * b);
                let gate = if gate_first { silu(row[ch]) } else { 1.0 };
                y_t[ch - first] = (dot(h, cc) + w.ssm.d[hd] * xt) * gate;
            }
        }
    });

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
            row.iter_mut().zip(&zxbcdt[t * width_in..t * width_in + di]).for_each(|(v, &z)| *v *= silu(z));
        }
    }

    // out = y · W_outᵀ (+ b_out): (T, D)
    linear(&y, &w.ssm.out_proj, w.ssm.out_proj_bias.as_deref())
}
