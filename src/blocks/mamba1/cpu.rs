//! A Mamba-1 block on the CPU reference: the selective scan as a sequential loop, exactly as
//! in the paper (and as HF transformers' slow path computes it), its channels split across the
//! model's threads. Symbols: see the glossary in
//! [`crate::model`].

use crate::blocks::SSM;
use crate::blocks::mamba1::{Mamba1, Weights};
use crate::cpu::conv::{ConvWeights, Run, conv_silu};
use crate::cpu::matmul::linear;
use crate::cpu::ops::{rms_norm_in_place, scan_step, silu, softplus};
use crate::cpu::threads::{chunk_len, for_chunks, min_elements};

/// The block's mixer over x (T, D) from state `st`, updating it; returns (T, D). `a` is
/// A = −exp(A_log), (E·D, N). The layer's state after each of `cap.positions` goes to
/// `cap.states`.
pub(crate) fn forward(p: &Mamba1, w: &Weights, run: Run<'_>) -> Vec<f32> {
    let Run { a, x, st, mut cap } = run;
    let (di, n, k, r) = (p.d_inner, p.d_state, p.d_conv, p.dt_rank);
    let t_len = x.len() / w.ssm.in_proj.cols;

    // [xs | z] = x · W_inᵀ (+ b_in): (T, 2·E·D)
    let xz = linear(x, &w.ssm.in_proj, w.ssm.in_proj_bias.as_deref());

    // u = silu(conv1d(xs) + b_conv): (T, E·D)
    let u = conv_silu(
        ConvWeights { weight: &w.ssm.conv, bias: w.ssm.conv_bias.as_deref(), k },
        &xz,
        2 * di,
        0,
        st,
        &mut cap,
    );

    // [δ | B | C] = u · W_xᵀ: (T, R + 2N); Δ = softplus(δ · W_dtᵀ + b_dt): (T, E·D)
    let mut dbc = linear(&u, &w.x_proj, None);
    if let Some(eps) = p.dbc_norm_eps {
        // Falcon-Mamba: each of δ, B and C divided by its own RMS (no weights); Jamba: then
        // times its gain.
        for row in dbc.chunks_exact_mut(r + 2 * n) {
            let (delta_in, bc) = row.split_at_mut(r);
            let (b, cc) = bc.split_at_mut(n);
            for (i, part) in [delta_in, b, cc].into_iter().enumerate() {
                rms_norm_in_place(part, eps);
                if let Some(gains) = &w.dbc_gains {
                    part.iter_mut().zip(&gains[i]).for_each(|(v, g)| *v *= g);
                }
            }
        }
    }
    let delta_in: Vec<f32> = dbc.chunks_exact(r + 2 * n).flat_map(|row| &row[..r]).copied().collect();
    let mut delta = linear(&delta_in, &w.dt_proj, Some(&w.ssm.dt_bias));
    for_chunks(&mut delta, chunk_len(t_len * di, min_elements(16), 1), |_, d| {
        d.iter_mut().for_each(|v| *v = softplus(*v))
    });

    // Selective scan, sequential in t, in blocks of channels on the model's threads:
    //   h_t = exp(Δ_t A) ⊙ h_{t−1} + (Δ_t u_t) B_t,   y_t = h_t · C_t + D u_t,
    // then the gate: y ← y · silu(z). A step takes a block's channels through token t
    // (`Capture::scan_blocks` keeps the states after captured positions).
    // (`threads::MIN_PIECE` state entries a piece at least: a decode step's whole scan is
    // ~25K, two pieces)
    let channels = chunk_len(di, min_elements(t_len * n).max(64), 1);
    let y = cap.scan_blocks(&mut st.regions[SSM], (t_len, channels, n), |first, t, hs, y_t| {
        let bc = &dbc[t * (r + 2 * n) + r..(t + 1) * (r + 2 * n)];
        let (b, cc) = bc.split_at(n);
        for (j, h) in hs.chunks_exact_mut(n).enumerate() {
            let ch = first + j;
            let dt = delta[t * di + ch];
            let ut = u[t * di + ch];
            let acc = scan_step(h, &a[ch * n..(ch + 1) * n], b, cc, dt, dt * ut);
            let z = xz[t * 2 * di + di + ch];
            y_t[j] = (acc + w.ssm.d[ch] * ut) * silu(z);
        }
    });

    // out = y · W_outᵀ (+ b_out): (T, D)
    linear(&y, &w.ssm.out_proj, w.ssm.out_proj_bias.as_deref())
}
