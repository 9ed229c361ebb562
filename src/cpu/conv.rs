//! The causal depthwise conv1d + SiLU every Mamba block runs before its scan, over the window
//! carried in the state, and where a forward call captures the states it checkpoints.

use crate::cpu::ops::silu;
use crate::model::{LayerState, LayerWeights, MAMBA_CONV, State};

/// Where one layer's states are captured: after each token in `positions`, into `states`.
pub(super) struct Capture<'a> {
    pub positions: &'a [usize],
    pub states: &'a mut [State],
    pub layer: usize,
}

/// u = silu(conv1d(x) + b_conv): the causal depthwise conv over the `conv.len() / (K−1)`
/// channels of `proj` (T rows of `stride` floats) that start at column `at`, run over
/// [carried window ‖ this call's rows]. Leaves the new window in `st`'s conv region and, for each
/// captured position, the window after it in its snapshot. (T, channels)
pub(super) fn conv_silu(
    w: &LayerWeights,
    proj: &[f32],
    stride: usize,
    at: usize,
    k: usize,
    st: &mut LayerState,
    cap: &mut Capture<'_>,
) -> Vec<f32> {
    let ch_len = w.conv.len() / k;
    let t_len = proj.len() / stride;
    // window: the carried K−1 inputs followed by this call's, (K−1+T, channels).
    let mut window = st.regions[MAMBA_CONV].clone();
    for t in 0..t_len {
        window.extend_from_slice(&proj[t * stride + at..t * stride + at + ch_len]);
    }
    let mut u = vec![0.0; t_len * ch_len];
    for t in 0..t_len {
        for ch in 0..ch_len {
            let mut acc = w.conv_bias.as_ref().map_or(0.0, |b| b[ch]);
            for j in 0..k {
                acc += w.conv[ch * k + j] * window[(t + j) * ch_len + ch];
            }
            u[t * ch_len + ch] = silu(acc);
        }
    }
    st.regions[MAMBA_CONV].copy_from_slice(&window[t_len * ch_len..]);
    for (&p, snap) in cap.positions.iter().zip(cap.states.iter_mut()) {
        // After token p the window holds rows p+1 .. p+K of [carried ‖ inputs].
        snap.layers[cap.layer].regions[MAMBA_CONV]
            .copy_from_slice(&window[(p + 1) * ch_len..(p + k) * ch_len]);
    }
    u
}
