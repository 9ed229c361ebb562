//! [`CpuModel`]: the reference forward pass in plain f32 Rust, a sequential scan exactly as in
//! the paper (and as HF transformers' slow path computes it). It is the oracle every GPU kernel
//! is tested against — itself checked against HF `MambaForCausalLM` by the committed fixtures —
//! and the fallback where WebGPU is missing. Symbols: see the glossary in [`crate::model`].

use std::any::Any;
use std::sync::Arc;

use crate::blocks::Input;
use crate::blocks::kind::{HostLayer, LayerInputs};
use crate::cpu::conv::Capture;
use crate::cpu::matmul::linear;
use crate::cpu::ops::rms_norm;
use crate::cpu::threads::Threads;
use crate::error::{Error, Result};
use crate::model::{Config, Logits, ModelWeights, State, StateLayout, context};

/// Tokens one chunk of a forward call runs at a time: the activations of a chunk, not of the
/// whole call, are what a long prompt keeps in memory (~0.2 MB per token for a 130M model).
pub const CHUNK_TOKENS: usize = 256;

/// A model ready to run on the CPU.
pub struct CpuModel {
    w: ModelWeights,
    /// A = −exp(A_log) per block, computed once: (E·D, N) for a Mamba-1 mixer, (H) for a
    /// Mamba-2 one, empty for a block without a Mamba mixer.
    a: Vec<Vec<f32>>,
    /// The layout of its states (shared by every snapshot it takes).
    layout: Arc<StateLayout>,
    /// The most tokens of context its attention layers' caches may hold.
    max_context: usize,
    /// The threads a forward pass runs on.
    threads: Threads,
}

impl CpuModel {
    /// Wraps loaded weights, to run on one thread ([`CpuModel::with_threads`] for more).
    pub fn new(w: ModelWeights) -> Self {
        let a = w
            .layers
            .iter()
            .map(|l| l.mixer.ssm().map_or_else(Vec::new, |ssm| ssm.a_log.iter().map(|v| -v.exp()).collect()))
            .collect();
        let layout = Arc::new(w.config.state_layout());
        // The default can only fail for a `wanted` length.
        let max_context = context::max_context(&w.config, None, u64::MAX).unwrap_or(usize::MAX);
        Self { w, a, layout, max_context, threads: Threads::single() }
    }

    /// The model running its forward passes on `threads`.
    pub fn with_threads(mut self, threads: Threads) -> Self {
        self.threads = threads;
        self
    }

    /// How many threads its forward passes use.
    pub(crate) fn threads(&self) -> usize {
        self.threads.count()
    }

    /// The model with a `max_context` of `wanted` (`None`: the default,
    /// [`context::max_context`]).
    pub fn with_max_context(mut self, wanted: Option<usize>) -> Result<Self> {
        self.max_context = context::max_context(&self.w.config, wanted, u64::MAX)?;
        Ok(self)
    }

    /// The most tokens of context it may hold (`usize::MAX` for a model without attention).
    pub fn max_context(&self) -> usize {
        self.max_context
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
        if let Some(context) = state.context() {
            context::check_room(context + tokens.len(), self.max_context)?;
        }
        if state.layers.len() != c.n_layer() {
            return Err(Error::InvalidInput(format!(
                "state has {} layers, the model {}",
                state.layers.len(),
                c.n_layer()
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
        // The chunks, on the model's threads.
        self.threads.run(|| {
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
                let (l, s) = self.forward_chunk(chunk, state, head, &here)?;
                logits.extend_from_slice(&l);
                snapshots.extend(s);
            }
            Ok::<_, Error>(())
        })?;
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
    ) -> Result<(Vec<f32>, Vec<State>)> {
        let c = &self.w.config;
        let d = c.d_model;
        // h: the residual stream, (T, D)
        let mut h: Vec<f32> = Vec::with_capacity(tokens.len() * d);
        let mut scratch = vec![0.0; d];
        for &t in tokens {
            h.extend_from_slice(self.w.embedding.row(t as usize, &mut scratch));
        }
        if c.scales.embedding != 1.0 {
            h.iter_mut().for_each(|v| *v *= c.scales.embedding);
        }
        // What some block reads across layers, computed once for the chunk.
        let reads = |input| c.blocks.iter().any(|b| b.kind.inputs().contains(&input));
        let inputs = LayerInputs { embeddings: reads(Input::Embeddings).then(|| h.clone()) };
        let lookup: Vec<&dyn Any> = self.w.layers.iter().map(|l| l.mixer.as_any()).collect();
        let mut snapshots = vec![State::empty(self.layout.clone()); positions.len()];
        let layers = c.blocks.iter().zip(&self.w.layers).zip(&self.a).zip(&mut state.layers);
        for (i, (((block, layer), a), st)) in layers.enumerate() {
            // The block kind's forward (src/blocks/<kind>/).
            let y = layer.mixer.forward(HostLayer {
                h: &h,
                norm: &layer.norm,
                eps: c.norm_eps,
                a,
                st,
                cap: Capture { positions, states: &mut snapshots, layer: i },
                inputs: &inputs,
                layers: &lookup,
            })?;
            let scale = block.residual_scale;
            h.iter_mut().zip(y).for_each(|(h, y)| *h += scale * y);
        }
        let last = match head {
            None => return Ok((Vec::new(), snapshots)),
            Some(Logits::All) => &h[..],
            Some(Logits::Last) => &h[h.len() - d..],
        };
        let mut logits = linear(&rms_norm(last, &self.w.norm_f, c.norm_eps), self.w.lm_head(), None);
        if c.scales.logits != 1.0 {
            logits.iter_mut().for_each(|v| *v *= c.scales.logits);
        }
        Ok((logits, snapshots))
    }
}
