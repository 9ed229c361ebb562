//! [`CpuModel`]: the reference forward pass in plain f32 Rust, a sequential scan exactly as in
//! the paper (and as HF transformers' slow path computes it). It is the oracle every GPU kernel
//! is tested against — itself checked against HF `MambaForCausalLM` by the committed fixtures —
//! and the fallback where WebGPU is missing. Symbols: see the glossary in [`crate::model`].

use std::sync::Arc;

use crate::cpu::conv::{Capture, conv_silu};
use crate::cpu::matmul::linear;
use crate::cpu::ops::{rms_norm, rms_norm_in_place, scan_step, silu, softplus};
use crate::cpu::ssd;
use crate::error::{Error, Result};
use crate::model::{
    Arch, Config, LayerState, LayerWeights, Logits, MAMBA_SSM, ModelWeights, State, StateLayout,
};

/// Tokens one chunk of a forward call runs at a time: the activations of a chunk, not of the
/// whole call, are what a long prompt keeps in memory (~0.2 MB per token for a 130M model).
pub const CHUNK_TOKENS: usize = 256;

/// A model ready to run on the CPU.
pub struct CpuModel {
    w: ModelWeights,
    /// A = −exp(A_log) per layer, computed once. (E·D, N) each; Mamba-2 (H)
    a: Vec<Vec<f32>>,
    /// The layout of its states (shared by every snapshot it takes).
    layout: Arc<StateLayout>,
}

impl CpuModel {
    /// Wraps loaded weights.
    pub fn new(w: ModelWeights) -> Self {
        let a = w.layers.iter().map(|l| l.a_log.iter().map(|v| -v.exp()).collect()).collect();
        let layout = Arc::new(StateLayout::of(&w.config));
        Self { w, a, layout }
    }

    /// The model's hyper-parameters.
    pub fn config(&self) -> &Config {
        &self.w.config
    }

    /// The weights.
    pub fn weights(&self) -> &ModelWeights {
        &self.w
    }

    /// Runs `tokens` starting from `state` (a fresh [`State::zeros`] for a new sequence) and
    /// leaves `state` at the last token. One call with T tokens equals T calls with one token.
    /// Returns logits for every position, (T, V), or only the last, (V).
    pub fn forward(&self, tokens: &[u32], state: &mut State, which: Logits) -> Result<Vec<f32>> {
        Ok(self.forward_capturing(tokens, state, which, &[])?.0)
    }

    /// Like [`CpuModel::forward`], and also returns the state after token `p` for every `p` in
    /// `positions` (ascending, within `tokens`), taken during the same scan.
    ///
    /// The tokens run in chunks of [`CHUNK_TOKENS`], so memory stays flat however long the
    /// prompt: only the logits asked for grow with it (and are reserved first — a call whose
    /// (T, V) logits cannot be had is [`Error::OutOfMemory`] before any work, not an abort).
    pub fn forward_capturing(
        &self,
        tokens: &[u32],
        state: &mut State,
        which: Logits,
        positions: &[usize],
    ) -> Result<(Vec<f32>, Vec<State>)> {
        let c = &self.w.config;
        c.check_forward(tokens, positions.iter().copied())?;
        if state.layers.len() != c.n_layer {
            return Err(Error::InvalidInput(format!(
                "state has {} layers, the model {}",
                state.layers.len(),
                c.n_layer
            )));
        }
        let wanted = match which {
            Logits::All => tokens.len() as u64 * c.vocab_size as u64,
            Logits::Last => c.vocab_size as u64,
        };
        let mut logits = Vec::new();
        logits.try_reserve_exact(wanted as usize).map_err(|_| Error::OutOfMemory {
            what: format!("the logits of {} positions", tokens.len()),
            needed: 4 * wanted,
            limit: "the allocator refused it (ask for the last position's logits only)".into(),
        })?;
        let mut snapshots = Vec::with_capacity(positions.len());
        for (i, chunk) in tokens.chunks(CHUNK_TOKENS).enumerate() {
            let start = i * CHUNK_TOKENS;
            let here: Vec<usize> = positions
                .iter()
                .filter(|&&p| p >= start && p < start + chunk.len())
                .map(|p| p - start)
                .collect();
            let head = match which {
                Logits::All => Some(Logits::All),
                Logits::Last => (start + chunk.len() == tokens.len()).then_some(Logits::Last),
            };
            let (l, s) = self.forward_chunk(chunk, state, head, &here);
            logits.extend_from_slice(&l);
            snapshots.extend(s);
        }
        Ok((logits, snapshots))
    }

    /// One chunk of at most [`CHUNK_TOKENS`] tokens (already checked): the LM head runs only for
    /// `head` (`None`: a chunk before the last whose logits nobody asked for).
    fn forward_chunk(
        &self,
        tokens: &[u32],
        state: &mut State,
        head: Option<Logits>,
        positions: &[usize],
    ) -> (Vec<f32>, Vec<State>) {
        let c = &self.w.config;
        let d = c.d_model;
        // h: the residual stream, (T, D)
        let mut h: Vec<f32> = Vec::with_capacity(tokens.len() * d);
        let mut scratch = vec![0.0; d];
        for &t in tokens {
            h.extend_from_slice(self.w.embedding.row(t as usize, &mut scratch));
        }
        let mut snapshots = vec![State::empty(self.layout.clone()); positions.len()];
        for (i, ((layer, a), st)) in self.w.layers.iter().zip(&self.a).zip(&mut state.layers).enumerate() {
            let x = rms_norm(&h, &layer.norm, c.norm_eps);
            let y = self.mixer(layer, a, &x, st, Capture { positions, states: &mut snapshots, layer: i });
            h.iter_mut().zip(y).for_each(|(h, y)| *h += y);
        }
        let last = match head {
            None => return (Vec::new(), snapshots),
            Some(Logits::All) => &h[..],
            Some(Logits::Last) => &h[h.len() - d..],
        };
        (linear(&rms_norm(last, &self.w.norm_f, c.norm_eps), self.w.lm_head(), None), snapshots)
    }

    /// One Mamba mixer over x (T, D) from state `st`, updating it; returns (T, D). The
    /// layer's state after each of `cap.positions` goes to `cap.states`.
    fn mixer(
        &self,
        w: &LayerWeights,
        a: &[f32],
        x: &[f32],
        st: &mut LayerState,
        mut cap: Capture<'_>,
    ) -> Vec<f32> {
        let c = &self.w.config;
        let (Some(x_proj), Some(dt_proj)) = (&w.x_proj, &w.dt_proj) else {
            // A Mamba-2 block (Layout gives every architecture's blocks their own tensors).
            return ssd::mixer(c, w, a, x, st, cap);
        };
        let (d, di, n, k, r) = (c.d_model, c.d_inner, c.d_state, c.d_conv, c.dt_rank);
        let t_len = x.len() / d;

        // [xs | z] = x · W_inᵀ (+ b_in): (T, 2·E·D)
        let xz = linear(x, &w.in_proj, w.in_proj_bias.as_deref());

        // u = silu(conv1d(xs) + b_conv): (T, E·D)
        let u = conv_silu(w, &xz, 2 * di, 0, k, st, &mut cap);
        let Capture { positions, states: snapshots, layer: li } = cap;

        // [δ | B | C] = u · W_xᵀ: (T, R + 2N); Δ = softplus(δ · W_dtᵀ + b_dt): (T, E·D)
        let mut dbc = linear(&u, x_proj, None);
        if c.arch == Arch::FalconMamba {
            // Falcon-Mamba: each of δ, B and C divided by its own RMS (no weights).
            for row in dbc.chunks_exact_mut(r + 2 * n) {
                let (delta_in, bc) = row.split_at_mut(r);
                let (b, cc) = bc.split_at_mut(n);
                for part in [delta_in, b, cc] {
                    rms_norm_in_place(part, c.mixer_rms_eps);
                }
            }
        }
        let delta_in: Vec<f32> = dbc.chunks_exact(r + 2 * n).flat_map(|row| &row[..r]).copied().collect();
        let delta: Vec<f32> =
            linear(&delta_in, dt_proj, Some(&w.dt_bias)).into_iter().map(softplus).collect();

        // Selective scan, sequential in t:
        //   h_t = exp(Δ_t A) ⊙ h_{t−1} + (Δ_t u_t) B_t,   y_t = h_t · C_t + D u_t,
        // then the gate: y ← y · silu(z).
        let mut y = vec![0.0; t_len * di];
        let mut next_snapshot = 0;
        for t in 0..t_len {
            let bc = &dbc[t * (r + 2 * n) + r..(t + 1) * (r + 2 * n)];
            let (b, cc) = bc.split_at(n);
            for ch in 0..di {
                let dt = delta[t * di + ch];
                let ut = u[t * di + ch];
                let h = &mut st.regions[MAMBA_SSM][ch * n..(ch + 1) * n];
                let acc = scan_step(h, &a[ch * n..(ch + 1) * n], b, cc, dt, dt * ut);
                let z = xz[t * 2 * di + di + ch];
                y[t * di + ch] = (acc + w.d[ch] * ut) * silu(z);
            }
            if positions.get(next_snapshot) == Some(&t) {
                snapshots[next_snapshot].layers[li].regions[MAMBA_SSM]
                    .copy_from_slice(&st.regions[MAMBA_SSM]);
                next_snapshot += 1;
            }
        }

        // out = y · W_outᵀ (+ b_out): (T, D)
        linear(&y, &w.out_proj, w.out_proj_bias.as_deref())
    }
}
