//! A Zamba2 hybrid layer's shared transformer block on the CPU reference: what it adds to the
//! input of the layer's Mamba-2 mixer.
//!
//!   u = RMSNorm(h ‖ e) (2·D), a = o_proj(attention(q, k, v of u, each + its adapter)),
//!   a = RMSNorm(a), t = down(act(gate) · up) with gate ‖ up = gate_up(a) + adapter(a),
//!   input = h + linear(t)

use crate::blocks::attention;
use crate::blocks::mlp::cpu::activate;
use crate::blocks::zamba2::{Adapter, KV, SharedWeights, Weights, Zamba2Layer};
use crate::cpu::conv::Run;
use crate::cpu::matmul::linear;
use crate::cpu::ops::rms_norm;

/// x·Wᵀ (+ b) plus the adapter's x·Aᵀ·Bᵀ, if any.
fn adapted(
    x: &[f32],
    (w, bias): (&crate::model::Matrix, Option<&[f32]>),
    adapter: &Option<Adapter>,
) -> Vec<f32> {
    let mut y = linear(x, w, bias);
    if let Some((down, up)) = adapter {
        let extra = linear(&linear(x, down, None), up, None);
        y.iter_mut().zip(extra).for_each(|(y, e)| *y += e);
    }
    y
}

/// h + linear(shared block(h ‖ e)) for the chunk's residual stream h and embeddings e (T, D);
/// the shared attention's cache (this use's) in `run.st` grows. `run.x` is unused.
pub(crate) fn input(
    p: &Zamba2Layer,
    w: &Weights,
    s: &SharedWeights,
    (h, e): (&[f32], &[f32]),
    run: Run<'_>,
    eps: f32,
) -> Vec<f32> {
    let d = w.linear.cols;
    let cat: Vec<f32> =
        h.chunks_exact(d).zip(e.chunks_exact(d)).flat_map(|(h, e)| h.iter().chain(e)).copied().collect();
    let u = rms_norm(&cat, &s.norm, eps);
    let a = &p.shared.attention;
    let q = adapted(&u, (&s.attention.q, None), &w.adapters[0]);
    let k = adapted(&u, (&s.attention.k, None), &w.adapters[1]);
    let v = adapted(&u, (&s.attention.v, None), &w.adapters[2]);
    let out = attention::cpu::attend(a, (q, k, v), run, KV);
    let a_out = rms_norm(&linear(&out, &s.attention.o, None), &s.ff_norm, eps);
    let [_, gate_up_bias, down_bias] = &s.mlp.biases;
    let gu = adapted(&a_out, (&s.mlp.up, gate_up_bias.as_deref()), &w.adapters[3]);
    let (inner, act) = (p.shared.mlp.inner, p.shared.mlp.act);
    let hidden: Vec<f32> = gu
        .chunks_exact(2 * inner)
        .flat_map(|row| row[..inner].iter().zip(&row[inner..]).map(|(&g, &u)| activate(act, g) * u))
        .collect();
    let t = linear(&linear(&hidden, &s.mlp.down, down_bias.as_deref()), &w.linear, None);
    h.iter().zip(t).map(|(h, t)| h + t).collect()
}
