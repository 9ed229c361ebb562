//! The causal depthwise conv1d + SiLU every Mamba block runs before its scan, over the window
//! carried in the state, and where a forward call captures the states it checkpoints.

use crate::blocks::{CONV, SSM};
use crate::cpu::ops::silu;
use crate::cpu::threads::{chunk_len, for_chunks, map_chunks};
use crate::model::{LayerState, State};

/// Where one layer's states are captured: after each token in `positions`, into `states`.
pub(crate) struct Capture<'a> {
    /// Positions (ascending, within this chunk) after which the state is captured.
    pub(crate) positions: &'a [usize],
    /// One snapshot per position.
    pub(crate) states: &'a mut [State],
    /// The layer being run.
    pub(crate) layer: usize,
}

impl Capture<'_> {
    /// A scan of T tokens over this layer's SSM state `state` (E·D channels of N entries), in
    /// blocks of `channels` channels on the model's threads: `step(first, t, h, y_t)` advances a
    /// block's state `h` (its channels from `first` on, N entries each) through token t and
    /// writes their outputs `y_t`. Returns y (T, E·D); the block's state after each of
    /// `positions` goes to the snapshots ([`Capture::join_scan_blocks`]).
    pub(crate) fn scan_blocks(
        &mut self,
        state: &mut [f32],
        (t_len, channels, n): (usize, usize, usize),
        step: impl Fn(usize, usize, &mut [f32], &mut [f32]) + Sync,
    ) -> Vec<f32> {
        let positions = self.positions;
        let blocks = map_chunks(state, channels * n, |i, hs| {
            let first = i * channels;
            let width = hs.len() / n;
            let mut y = vec![0.0; t_len * width];
            let mut snaps = Vec::with_capacity(positions.len() * hs.len());
            let mut next_snapshot = 0;
            for t in 0..t_len {
                step(first, t, hs, &mut y[t * width..(t + 1) * width]);
                if positions.get(next_snapshot) == Some(&t) {
                    snaps.extend_from_slice(hs);
                    next_snapshot += 1;
                }
            }
            (y, snaps)
        });
        self.join_scan_blocks(&blocks, t_len, channels, state.len() / n, n)
    }

    /// Joins a scan of T tokens run in blocks of `channels` channels (the last may be narrower): each
    /// block's (y (T, width), its SSM state rows (width·N) after each captured position) →
    /// y (T, di), and each block's rows into the snapshots' SSM regions of this layer.
    fn join_scan_blocks(
        &mut self,
        blocks: &[(Vec<f32>, Vec<f32>)],
        t_len: usize,
        channels: usize,
        di: usize,
        n: usize,
    ) -> Vec<f32> {
        let mut y = vec![0.0; t_len * di];
        for (i, (part, snaps)) in blocks.iter().enumerate() {
            let (first, width) = (i * channels, part.len() / t_len.max(1));
            for (row, src) in y.chunks_exact_mut(di).zip(part.chunks_exact(width.max(1))) {
                row[first..first + width].copy_from_slice(src);
            }
            for (snapshot, src) in self.states.iter_mut().zip(snaps.chunks_exact((width * n).max(1))) {
                snapshot.layers[self.layer].regions[SSM][first * n..(first + width) * n].copy_from_slice(src);
            }
        }
        y
    }
}

/// One block's run on the CPU: A = −exp(A_log) (precomputed), the normalised input x (T, D),
/// the layer's state (updated) and where its captured states go.
pub(crate) struct Run<'a> {
    pub(crate) a: &'a [f32],
    pub(crate) x: &'a [f32],
    pub(crate) st: &'a mut LayerState,
    pub(crate) cap: Capture<'a>,
}

/// A depthwise conv1d's weights: the kernel (channels, K) and its bias (channels), if any.
pub(crate) struct ConvWeights<'a> {
    pub(crate) weight: &'a [f32],
    pub(crate) bias: Option<&'a [f32]>,
    /// K: the kernel width.
    pub(crate) k: usize,
}

/// u = silu(conv1d(x) + b_conv): the causal depthwise conv over the `weight.len() / K`
/// channels of `proj` (T rows of `stride` floats) that start at column `at`, run over
/// [carried window ‖ this call's rows]. Leaves the new window in `st`'s conv region and, for each
/// captured position, the window after it in its snapshot. (T, channels)
pub(crate) fn conv_silu(
    w: ConvWeights<'_>,
    proj: &[f32],
    stride: usize,
    at: usize,
    st: &mut LayerState,
    cap: &mut Capture<'_>,
) -> Vec<f32> {
    causal_conv(w, proj, stride, at, st, cap, silu)
}

/// The same conv followed by `act` (the identity for LFM2's short conv) instead of SiLU.
pub(crate) fn causal_conv(
    w: ConvWeights<'_>,
    proj: &[f32],
    stride: usize,
    at: usize,
    st: &mut LayerState,
    cap: &mut Capture<'_>,
    act: impl Fn(f32) -> f32 + Sync,
) -> Vec<f32> {
    let k = w.k;
    let ch_len = w.weight.len() / k;
    let t_len = proj.len() / stride;
    // window: the carried K−1 inputs followed by this call's, (K−1+T, channels).
    let mut window = st.regions[CONV].clone();
    for t in 0..t_len {
        window.extend_from_slice(&proj[t * stride + at..t * stride + at + ch_len]);
    }
    // rows of u in pieces on the model's threads (each row reads the window only)
    let mut u = vec![0.0; t_len * ch_len];
    let rows = chunk_len(t_len, 16, 1);
    for_chunks(&mut u, rows * ch_len.max(1), |i, part| {
        for (r, out) in part.chunks_exact_mut(ch_len).enumerate() {
            let t = i * rows + r;
            for (ch, out) in out.iter_mut().enumerate() {
                let mut acc = w.bias.map_or(0.0, |b| b[ch]);
                for j in 0..k {
                    acc += w.weight[ch * k + j] * window[(t + j) * ch_len + ch];
                }
                *out = act(acc);
            }
        }
    });
    st.regions[CONV].copy_from_slice(&window[t_len * ch_len..]);
    for (&p, snap) in cap.positions.iter().zip(cap.states.iter_mut()) {
        // After token p the window holds rows p+1 .. p+K of [carried ‖ inputs].
        snap.layers[cap.layer].regions[CONV].copy_from_slice(&window[(p + 1) * ch_len..(p + k) * ch_len]);
    }
    u
}
