//! A mixture of experts on the CPU reference: per token, the router's choice of k experts,
//! their outputs summed by the routing weights, plus the shared expert's.

use crate::blocks::mlp;
use crate::blocks::moe::{Moe, Routing, Weights};
use crate::cpu::matmul::linear;
use crate::cpu::ops::softmax;

/// The indices of the k largest of `scores`, largest first (ties: the lower index first).
fn top_k(scores: &[f32], k: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    order.truncate(k);
    order
}

/// The chosen experts and their weights for one token's router logits (E).
pub(crate) fn route(p: &Moe, logits: &[f32], bias: Option<&[f32]>) -> Vec<(usize, f32)> {
    let k = p.top_k;
    match p.routing {
        Routing::SoftmaxTopK => {
            let chosen = top_k(logits, k);
            let weights = softmax(&chosen.iter().map(|&e| logits[e]).collect::<Vec<_>>());
            chosen.into_iter().zip(weights).collect()
        }
        Routing::Softmax { renormalize } => {
            let probs = softmax(logits);
            let chosen = top_k(&probs, k);
            let sum: f32 = chosen.iter().map(|&e| probs[e]).sum();
            let norm = if renormalize { sum } else { 1.0 };
            chosen.into_iter().map(|e| (e, probs[e] / norm)).collect()
        }
        Routing::Sigmoid { n_group, topk_group, normalize, scale } => {
            let s: Vec<f32> = logits.iter().map(|l| 1.0 / (1.0 + (-l).exp())).collect();
            let mut choice: Vec<f32> = match bias {
                Some(b) => s.iter().zip(b).map(|(s, b)| s + b).collect(),
                None => s.clone(),
            };
            if n_group > 1 {
                let size = p.n_experts / n_group;
                let group_scores: Vec<f32> =
                    choice.chunks_exact(size).map(|g| top_k(g, 2).iter().map(|&i| g[i]).sum()).collect();
                let kept = top_k(&group_scores, topk_group);
                for (g, chunk) in choice.chunks_exact_mut(size).enumerate() {
                    if !kept.contains(&g) {
                        chunk.iter_mut().for_each(|v| *v = f32::NEG_INFINITY);
                    }
                }
            }
            let chosen = top_k(&choice, k);
            let sum: f32 = chosen.iter().map(|&e| s[e]).sum();
            let norm = if normalize { sum + 1e-20 } else { 1.0 };
            chosen.into_iter().map(|e| (e, s[e] / norm * scale)).collect()
        }
    }
}

/// The mixture over x (T, D); returns (T, D).
pub(crate) fn forward(p: &Moe, w: &Weights, x: &[f32]) -> Vec<f32> {
    let d = w.router.cols;
    let router_logits = linear(x, &w.router, None); // (T, E)
    let mut out = match (&p.shared, &w.shared) {
        (Some(sp), Some(sw)) => mlp::cpu::forward(sp, sw, x),
        _ => vec![0.0; x.len()],
    };
    for (t, row) in x.chunks_exact(d).enumerate() {
        let chosen =
            route(p, &router_logits[t * p.n_experts..(t + 1) * p.n_experts], w.router_bias.as_deref());
        let o = &mut out[t * d..(t + 1) * d];
        for (e, weight) in chosen {
            let y = mlp::cpu::forward(&p.expert, &w.experts[e], row);
            o.iter_mut().zip(y).for_each(|(o, y)| *o += weight * y);
        }
    }
    out
}
