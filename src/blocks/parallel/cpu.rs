//! Falcon-H1's parallel mixer on the CPU reference: `mamba(x · s_in) · s_out + attention(x ·
//! a_in) · a_out`, each branch on its own regions of the layer's state.

use crate::blocks::parallel::{KV, Parallel, Weights};
use crate::blocks::{attention, mamba2};
use crate::cpu::conv::{Capture, Run};

/// x · s, a copy (each branch reads its own scaled input).
fn scaled(x: &[f32], s: f32) -> Vec<f32> {
    x.iter().map(|v| v * s).collect()
}

/// The block over x (T, D) from its state in `run.st`; returns (T, D).
pub(crate) fn forward(p: &Parallel, w: &Weights, run: Run<'_>) -> Vec<f32> {
    let Run { a, x, st, cap } = run;
    let Capture { positions, states, layer } = cap;
    let (m_in, m_out) = p.mamba_scales;
    let (a_in, a_out) = p.attention_scales;
    let xm = scaled(x, m_in);
    let mamba_run = Run { a, x: &xm, st: &mut *st, cap: Capture { positions, states: &mut *states, layer } };
    let m = mamba2::cpu::forward(&p.mamba, &w.mamba, mamba_run);
    let xa = scaled(x, a_in);
    let attention_run = Run { a, x: &xa, st, cap: Capture { positions, states, layer } };
    let at = attention::cpu::forward_at(&p.attention, &w.attention, attention_run, KV);
    m.iter().zip(at).map(|(m, at)| m * m_out + at * a_out).collect()
}
