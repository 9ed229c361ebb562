//! An attention block on the CPU reference (HF's eager attention, batch 1, no padding): the
//! new tokens' keys and values join the cache, then each query row attends to every cached
//! position up to its own.

use crate::blocks::attention::{Attention, Rope, Weights};
use crate::cpu::conv::Run;
use crate::cpu::matmul::linear;
use crate::cpu::ops::{dot, rms_norm_in_place};
use crate::cpu::threads::{chunk_len, for_chunks, min_elements};
use crate::kernels::rope::rope_rows;

/// Index of the key/value cache among an attention block's state regions.
const KV: usize = 0;

/// Rotates the first `rope.dims` channels of each head in `row` (heads × hd), `rotate_half`
/// style: channel i pairs with i + dims/2.
fn rotate(row: &mut [f32], hd: usize, rope: Rope, (cos, sin): (&[f32], &[f32])) {
    let half = rope.dims / 2;
    for head in row.chunks_exact_mut(hd) {
        for i in 0..half {
            let (x1, x2) = (head[i], head[i + half]);
            head[i] = x1 * cos[i] - x2 * sin[i];
            head[i + half] = x2 * cos[i] + x1 * sin[i];
        }
    }
}

/// The block over x (T, D) with the cache in `run.st`, appending to it; returns (T, D). The
/// cache after each of `run.cap.positions` goes to its snapshot.
pub(crate) fn forward(p: &Attention, w: &Weights, run: Run<'_>) -> Vec<f32> {
    forward_at(p, w, run, KV)
}

/// [`forward`] with the cache in region `kv_region` of the layer's state (a block with other
/// regions too, as Falcon-H1's parallel one).
pub(crate) fn forward_at(p: &Attention, w: &Weights, run: Run<'_>, kv_region: usize) -> Vec<f32> {
    let mut q = linear(run.x, &w.q, w.q_bias.as_deref()); // (T, Hq·hd); (T, Hq·2·hd) with a gate
    // Qwen3.5's output gate: per head hd query channels, then hd gate channels.
    let mut gate = None;
    if p.output_gate {
        let (q_only, g): (Vec<&[f32]>, Vec<&[f32]>) =
            q.chunks_exact(2 * p.head_dim).map(|head| head.split_at(p.head_dim)).unzip();
        (q, gate) = (q_only.concat(), Some(g.concat()));
    }
    let mut k = linear(run.x, &w.k, w.k_bias.as_deref()); // (T, Hkv·hd)
    let v = linear(run.x, &w.v, w.v_bias.as_deref()); // (T, Hkv·hd)
    if let (Some(norm), Some((q_gain, k_gain))) = (p.qk_norm, &w.qk_norm) {
        // Each head by its own RMS, times the gain the heads share (before RoPE).
        for (x, gain) in [(&mut q, q_gain), (&mut k, k_gain)] {
            for head in x.chunks_exact_mut(p.head_dim) {
                rms_norm_in_place(head, norm.eps);
                head.iter_mut().zip(gain).for_each(|(v, g)| *v *= g);
            }
        }
    }
    let mut out = attend(p, (q, k, v), run, kv_region);
    if let Some(gate) = gate {
        // × σ(gate), before o_proj.
        out.iter_mut().zip(&gate).for_each(|(o, g)| *o /= 1.0 + (-g).exp());
    }
    linear(&out, &w.o, w.o_bias.as_deref())
}

/// The attention itself, from the projections q (T, Hq·hd), k and v (T, Hkv·hd): keys × the
/// key multiplier, q and k rotated at their positions, k and v appended to the cache (region
/// `kv_region`), then each query row t (position past + t) over positions 0..=past + t:
/// softmax(q·k · scale) · v. Returns (T, Hq·hd), before o_proj.
pub(crate) fn attend(
    p: &Attention,
    (mut q, mut k, v): (Vec<f32>, Vec<f32>, Vec<f32>),
    run: Run<'_>,
    kv_region: usize,
) -> Vec<f32> {
    let Run { st, cap, .. } = run;
    let (hq, hkv, hd) = (p.n_heads, p.n_kv_heads, p.head_dim);
    let (qd, kvd) = (p.q_dim(), p.kv_dim());
    let group = hq / hkv;
    let t_len = q.len() / qd;
    let past = st.regions[kv_region].len() / (2 * kvd);
    if p.key_scale != 1.0 {
        k.iter_mut().for_each(|v| *v *= p.key_scale);
    }
    if let Some(rope) = p.rope {
        // HF's cos/sin of positions past .. past + T (the GPU's table, row for row).
        let half = rope.dims / 2;
        let table = rope_rows(f64::from(rope.theta), rope.dims as u32, past, t_len);
        for (t, row) in table.chunks_exact(2 * half).enumerate() {
            let cos_sin = row.split_at(half);
            rotate(&mut q[t * qd..(t + 1) * qd], hd, rope, cos_sin);
            rotate(&mut k[t * kvd..(t + 1) * kvd], hd, rope, cos_sin);
        }
    }
    // The cache: per token its keys (Hkv·hd), then its values (Hkv·hd).
    let kv = &mut st.regions[kv_region];
    for t in 0..t_len {
        kv.extend_from_slice(&k[t * kvd..(t + 1) * kvd]);
        kv.extend_from_slice(&v[t * kvd..(t + 1) * kvd]);
    }
    for (i, &at) in cap.positions.iter().enumerate() {
        let snapshot = &mut cap.states[i].layers[cap.layer].regions[kv_region];
        *snapshot = kv[..(past + at + 1) * 2 * kvd].to_vec();
    }
    // Each (row t, head h) on its own: `out` (T, Hq·hd) in pieces of whole heads on the
    // model's threads.
    let mut out = vec![0.0; t_len * qd];
    let heads = chunk_len(t_len * hq, min_elements(hd * (past + t_len)), 1);
    let kv = &*kv;
    for_chunks(&mut out, heads * hd, |i, piece| {
        let mut scores = Vec::with_capacity(past + t_len);
        for (j, o) in piece.chunks_exact_mut(hd).enumerate() {
            let (t, h) = ((i * heads + j) / hq, (i * heads + j) % hq);
            let qh = &q[t * qd + h * hd..t * qd + (h + 1) * hd];
            let kv_head = (h / group) * hd;
            scores.clear();
            scores.extend((0..=past + t).map(|j| {
                let key = &kv[j * 2 * kvd + kv_head..j * 2 * kvd + kv_head + hd];
                dot(qh, key) * p.scale
            }));
            let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            scores.iter_mut().for_each(|s| *s = (*s - max).exp());
            let sum: f32 = scores.iter().sum();
            for (j, s) in scores.iter().enumerate() {
                let value = &kv[j * 2 * kvd + kvd + kv_head..j * 2 * kvd + kvd + kv_head + hd];
                o.iter_mut().zip(value).for_each(|(o, v)| *o += s / sum * v);
            }
        }
    });
    out
}
