//! An MLP on the CPU reference: `down(act(gate(x) · s_g) ⊙ up(x)) · s_d`, or
//! `down(act(up(x)))` for a plain one.

use crate::blocks::mlp::{Activation, Mlp, Weights};
use crate::cpu::matmul::linear;
use crate::cpu::ops::silu;

/// `act(x)`, as PyTorch computes it in f32.
pub(crate) fn activate(act: Activation, x: f32) -> f32 {
    match act {
        Activation::Silu => silu(x),
        Activation::Gelu => 0.5 * x * (1.0 + libm::erff(x * std::f32::consts::FRAC_1_SQRT_2)),
        Activation::GeluTanh => {
            let inner = (2.0 / std::f32::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            0.5 * x * (1.0 + inner.tanh())
        }
        Activation::Relu2 => {
            let r = x.max(0.0);
            r * r
        }
    }
}

/// The MLP over x (T, D); returns (T, D).
pub(crate) fn forward(p: &Mlp, w: &Weights, x: &[f32]) -> Vec<f32> {
    let i = p.inner;
    let (gate_scale, out_scale) = p.scales;
    // h = act(gate · s_g) ⊙ up, or act(up): (T, I)
    let [gate_bias, up_bias, down_bias] = &w.biases;
    let up = linear(x, &w.up, up_bias.as_deref());
    let gated = |g: &[f32], u: &[f32]| -> Vec<f32> {
        g.iter().zip(u).map(|(&g, &u)| activate(p.act, g * gate_scale) * u).collect()
    };
    let h: Vec<f32> = match (&w.gate, p.gated()) {
        (Some(gate), _) => gated(&linear(x, gate, gate_bias.as_deref()), &up),
        // One matrix gives gate ‖ up per token, the gate first.
        (None, true) => up.chunks_exact(2 * i).flat_map(|row| gated(&row[..i], &row[i..])).collect(),
        (None, false) => up.into_iter().map(|u| activate(p.act, u)).collect(),
    };
    let mut y = linear(&h, &w.down, down_bias.as_deref());
    if out_scale != 1.0 {
        y.iter_mut().for_each(|v| *v *= out_scale);
    }
    y
}
