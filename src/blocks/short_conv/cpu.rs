//! A short-convolution block on the CPU reference, as HF's `Lfm2ShortConv.slow_forward`
//! computes it.

use crate::blocks::short_conv::{ShortConv, Weights};
use crate::cpu::conv::{ConvWeights, Run, causal_conv};
use crate::cpu::matmul::linear;

/// The block over x (T, D) from the state's conv window, moving it on; returns (T, D). The
/// window after each of `cap.positions` goes to `cap.states`.
pub(crate) fn forward(p: &ShortConv, w: &Weights, run: Run<'_>) -> Vec<f32> {
    let Run { x, st, mut cap, .. } = run;
    let d = p.channels;
    // B ‖ C ‖ x̃ = x · W_inᵀ (+ b_in): (T, 3·D)
    let bcx = linear(x, &w.in_proj, w.in_bias.as_deref());
    // B ⊙ x̃: (T, D)
    let bx: Vec<f32> = bcx
        .chunks_exact(3 * d)
        .flat_map(|row| row[..d].iter().zip(&row[2 * d..]).map(|(b, x)| b * x))
        .collect();
    // conv1d(B ⊙ x̃) + b_conv over [window ‖ these rows], no activation: (T, D)
    let conv = ConvWeights { weight: &w.conv, bias: w.conv_bias.as_deref(), k: p.taps };
    let conv = causal_conv(conv, &bx, d, 0, st, &mut cap, |v| v);
    // y = C ⊙ conv: (T, D)
    let y: Vec<f32> = bcx
        .chunks_exact(3 * d)
        .zip(conv.chunks_exact(d))
        .flat_map(|(row, c)| row[d..2 * d].iter().zip(c).map(|(c, v)| c * v))
        .collect();
    // out = y · W_outᵀ (+ b_out): (T, D)
    linear(&y, &w.out_proj, w.out_bias.as_deref())
}
