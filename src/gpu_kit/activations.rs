//! Activation and state buffers, sized once at load for the largest forward chunk.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::gpu::{GpuContext, Readback};
use crate::kernels::{Step, argmax, top_k};
use std::sync::Arc;

use crate::model::{Config, StateLayout};

/// Scratch buffers of one forward chunk of at most `max_tokens` tokens (T ≤ max_tokens).
pub(crate) struct Activations {
    pub(crate) step: wgpu::Buffer, // Step uniform
    /// (max_picks) Steps, copied one by one into `step` between a greedy batch's passes.
    pub(crate) step_list: wgpu::Buffer,
    pub(crate) ids: wgpu::Buffer,    // (T) u32
    pub(crate) h: wgpu::Buffer,      // (T, D) residual stream
    pub(crate) x_norm: wgpu::Buffer, // (T, D) normalised h
    /// The scratch buffers the block kinds ask for, by name, each as large as the largest
    /// request of its name ([`Scratch`]): e.g. `xz` (T, in_proj rows), `ud`, `y` of the Mamba
    /// mixers, `dbc` of Mamba-1, `router`/`route` of a mixture (the kinds' gpu.rs say what
    /// each holds).
    scratch: BTreeMap<&'static str, wgpu::Buffer>,
    /// The inputs some block reads across layers (`blocks::Input`, by its name; (T, D) each),
    /// filled by the plan.
    inputs: Vec<(&'static str, wgpu::Buffer)>,
    pub(crate) chunk_ab: wgpu::Buffer, // (chunks, 2, E·D, N) per-chunk affine maps
    pub(crate) chunk_h0: wgpu::Buffer, // (chunks, E·D, N) chunk start states
    pub(crate) logits: wgpu::Buffer,   // (logits_rows, V)
    pub(crate) capture: wgpu::Buffer,  // (T_max) position → checkpoint number + 1, then (captures, slot_len)
    pub(crate) readback: Readback,     // logits_rows · V floats
    /// (1 + max_picks) u32: count, then the greedy picks in order; or the top-k summary,
    /// top_k::words(CAPACITY) u32 — as long as the longer of the two.
    pub(crate) picks: wgpu::Buffer,
    pub(crate) picks_readback: Readback, // as long as `picks`
    /// (slices(V), words) u32: what the first stage of `argmax` (and `top_k`) found in each
    /// slice of the logits, for the second.
    pub(crate) slices: wgpu::Buffer,
    /// Greedy steps one submit can run (the picks list's room).
    pub(crate) max_picks: usize,
    pub(crate) max_tokens: usize,
    pub(crate) logits_rows: usize,
    pub(crate) chunk: usize,
    /// Where the position map and the captured checkpoints sit in `capture`.
    pub(crate) capture_layout: CaptureLayout,
}

/// What one block kind needs of the scratch buffers for a chunk of T_max tokens: buffers by
/// name, in floats ([`Activations`] makes each name's buffer as large as the largest request of
/// it, so kinds that ask for the same name share one buffer — the Mamba mixers' `xz`, `ud`,
/// `y`), and the prefill scan's chunk maps.
pub(crate) struct Scratch {
    /// (name, floats) of each buffer it asks for.
    pub(crate) buffers: Vec<(&'static str, usize)>,
    /// One chunk map's plane of the prefill scan (E·D · N); 1 for a block without a scan.
    pub(crate) plane: usize,
    /// Tokens per scan chunk (every block with a scan must agree: `checks.rs`); 0 for a
    /// block without one.
    pub(crate) chunk: usize,
}

impl Scratch {
    /// No buffer, no scan.
    pub(crate) fn none() -> Self {
        Self { buffers: Vec::new(), plane: 1, chunk: 0 }
    }

    /// This and a buffer `name` of `floats`.
    pub(crate) fn with(mut self, name: &'static str, floats: usize) -> Self {
        self.buffers.push((name, floats));
        self
    }

    /// What a kind made of `parts` needs: each name as large as the largest part asks.
    pub(crate) fn most(parts: impl IntoIterator<Item = Scratch>) -> Self {
        parts.into_iter().fold(Scratch::none(), |mut all, part| {
            all.buffers.extend(part.buffers);
            Scratch { plane: all.plane.max(part.plane), chunk: all.chunk.max(part.chunk), ..all }
        })
    }

    /// Floats asked for under `name` (0: none).
    pub(crate) fn floats(&self, name: &str) -> usize {
        self.buffers.iter().filter(|(n, _)| *n == name).map(|(_, f)| *f).max().unwrap_or(0)
    }
}

/// Most checkpoints one forward chunk captures.
pub(crate) const CAPTURES_MAX: usize = 64;

/// The capture area's size at load unless asked otherwise (`GpuModelOptions::capture_bytes`).
pub(crate) const CAPTURE_BYTES: u64 = 32 << 20;

/// The capture buffer's layout, known here only: a (T_max) map from token position to
/// checkpoint number + 1 (0: none; u32 bits in f32 slots), then `captures` areas of one whole
/// state each in a checkpoint slot's layout — the [`StateLayout`]'s flat order: every layer's
/// conv window (K−1, conv_dim), then every layer's SSM state (E·D, N). `conv1d_silu` and the
/// scan outputs write the areas (their `Params` come from here); the forward pass copies area i
/// to its slot.
#[derive(Clone, Debug)]
pub(crate) struct CaptureLayout {
    /// T_max: the map's length.
    pub(crate) map_len: usize,
    /// Floats in one whole state.
    pub(crate) slot_len: usize,
    /// Checkpoints one forward chunk can capture.
    pub(crate) captures: usize,
    state: Arc<StateLayout>,
}

impl CaptureLayout {
    fn new(state: Arc<StateLayout>, map_len: usize, captures: usize) -> Self {
        Self { map_len, slot_len: state.fixed_floats(), captures, state }
    }

    /// Floats of the whole buffer.
    pub(crate) fn floats(&self) -> usize {
        self.map_len + self.captures * self.slot_len
    }

    /// The same layout with room for `captures` checkpoints.
    pub(crate) fn with_captures(&self, captures: usize) -> Self {
        Self { captures, ..self.clone() }
    }

    /// How many checkpoints (at most `CAPTURES_MAX`; 0 where not one) a buffer of `bytes`
    /// holds after the map.
    pub(crate) fn captures_within(&self, bytes: u64) -> usize {
        let room = (bytes as usize).saturating_sub(4 * self.map_len);
        (room / (4 * self.slot_len.max(1))).min(CAPTURES_MAX)
    }

    /// Where layer `layer`'s conv window sits in a state (in the state buffer and in an area).
    pub(crate) fn conv_at(&self, layer: usize) -> usize {
        self.state.offset(layer, "conv").unwrap_or(0)
    }

    /// Where layer `layer`'s SSM state sits in an area (after every layer's conv window).
    pub(crate) fn ssm_at(&self, layer: usize) -> usize {
        self.state.offset(layer, "ssm").unwrap_or(0)
    }

    /// Where layer `layer`'s SSM state sits in the live SSM buffer (which holds the SSM states
    /// alone, in the same order).
    pub(crate) fn ssm_in_buffer(&self, layer: usize) -> usize {
        self.ssm_at(layer).saturating_sub(self.state.floats_named("conv"))
    }

    /// The byte offset of area `i` in the buffer.
    pub(crate) fn area_offset(&self, i: usize) -> u64 {
        4 * (self.map_len + i * self.slot_len) as u64
    }
}

/// The recurrent state of every layer on the GPU (the same layout as [`crate::State`]).
pub(crate) struct StateBuffers {
    pub(crate) conv: wgpu::Buffer, // (layers, K−1, conv_dim)
    pub(crate) ssm: wgpu::Buffer,  // (layers, E·D, N)
    /// The state before a greedy batch (conv ‖ ssm, a checkpoint slot's layout), to rewind to
    /// when generation stops inside the batch.
    pub(crate) rewind: wgpu::Buffer,
    /// Bytes of conv window state in all (0 when K = 1).
    pub(crate) conv_bytes: u64,
    /// Bytes of SSM state in all (0 for a model without one, as LFM2: its buffer is then a
    /// minimal placeholder).
    pub(crate) ssm_bytes: u64,
}

impl Activations {
    /// The buffers for chunks of `max_tokens` tokens, each scratch buffer as large as the
    /// largest of the blocks' `needs` (for `max_tokens`), room for `max_picks` greedy picks, and
    /// a checkpoint capture area of about `capture_bytes` (at least one state, at most
    /// `CAPTURES_MAX`, within one binding; it grows on demand: `GpuModel::reserve_captures`).
    pub(crate) fn new(
        ctx: &GpuContext,
        c: &Config,
        (needs, reads): (&[Scratch], &[&'static str]),
        (max_tokens, max_picks): (usize, usize),
        capture_bytes: u64,
    ) -> Result<Self> {
        let t = max_tokens;
        let chunk = needs.iter().map(|s| s.chunk).max().unwrap_or(0).max(1);
        let chunks = t.div_ceil(chunk);
        let plane = needs.iter().map(|s| s.plane).max().unwrap_or(1);
        // All-position logits are computed in blocks of rows that fit one binding (≤ 64 MiB).
        let logits_rows = ((64 << 20).min(ctx.max_binding()) as usize / (4 * c.vocab_size)).clamp(1, t);
        // Checkpoint captures per forward chunk: within `capture_bytes` and one binding.
        let state = Arc::new(c.state_layout());
        let capture_layout = CaptureLayout::new(state, t, 1);
        let captures = capture_layout.captures_within(capture_bytes.min(ctx.max_binding())).max(1);
        let capture_layout = capture_layout.with_captures(captures);
        let z = |label: &str, len: usize| ctx.storage_zeroed_f32(label, len);
        let mut sizes: BTreeMap<&'static str, usize> = BTreeMap::new();
        for (name, floats) in needs.iter().flat_map(|s| &s.buffers) {
            let size = sizes.entry(name).or_insert(1);
            *size = (*size).max(*floats);
        }
        let scratch =
            sizes.into_iter().map(|(name, len)| Ok((name, z(name, len)?))).collect::<Result<_>>()?;
        let inputs = reads.iter().map(|&name| Ok((name, z(name, t * c.d_model)?))).collect::<Result<_>>()?;
        let picks_len = (1 + max_picks).max(top_k::words(top_k::CAPACITY));
        let slices_len = (argmax::slices(c.vocab_size) * argmax::SLICE_WORDS)
            .max(top_k::slices(c.vocab_size) * top_k::SLICE_WORDS);
        Ok(Self {
            step: ctx.uniform("step", &Step::default()),
            step_list: ctx.create_buffer(
                "greedy steps",
                (max_picks.max(1) * std::mem::size_of::<Step>()) as u64,
                wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            ),
            ids: z("ids", t)?,
            h: z("h", t * c.d_model)?,
            x_norm: z("x_norm", t * c.d_model)?,
            scratch,
            inputs,
            chunk_ab: z("chunk_ab", chunks * 2 * plane)?,
            chunk_h0: z("chunk_h0", chunks * plane)?,
            logits: z("logits", logits_rows * c.vocab_size)?,
            capture: z("checkpoint capture", capture_layout.floats())?,
            readback: Readback::new(ctx, (logits_rows * c.vocab_size * 4) as u64, "logits readback"),
            picks: z("greedy picks, top k", picks_len)?,
            slices: z("argmax, top k slices", slices_len)?,
            picks_readback: Readback::new(ctx, 4 * picks_len as u64, "greedy picks, top k readback"),
            max_picks,
            max_tokens,
            logits_rows,
            chunk,
            capture_layout,
        })
    }
}

impl Activations {
    /// The scratch buffer a block kind asked for as `name` ([`Scratch`]).
    pub(crate) fn scratch(&self, name: &str) -> Result<&wgpu::Buffer> {
        self.scratch
            .get(name)
            .ok_or_else(|| Error::Internal(format!("no block kind asked for a scratch buffer `{name}`")))
    }

    /// The buffer (T, D) of the input across layers named `name` (`blocks::Input::name`),
    /// where a block kind reads it.
    pub(crate) fn input(&self, name: &str) -> Result<&wgpu::Buffer> {
        self.inputs
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, b)| b)
            .ok_or_else(|| Error::Internal(format!("no block kind declared that it reads the {name}")))
    }

    /// Bytes of every activation buffer (the readback staging buffer included).
    pub(crate) fn bytes(&self) -> u64 {
        [&self.ids, &self.h, &self.x_norm, &self.chunk_ab, &self.chunk_h0]
            .into_iter()
            .chain(self.scratch.values())
            .chain(self.inputs.iter().map(|(_, b)| b))
            .chain([&self.logits, &self.capture, &self.picks])
            .map(|b| b.size())
            .sum::<u64>()
            + self.readback.capacity()
            + self.picks_readback.capacity()
    }
}

impl StateBuffers {
    /// Bytes of the working state and its rewind copy.
    pub(crate) fn bytes(&self) -> u64 {
        self.conv.size() + self.ssm.size() + self.rewind.size()
    }

    /// Records copying the working state to (`save`) or from `buffer` at `offset`, laid out as
    /// a checkpoint slot (conv ‖ ssm).
    pub(crate) fn record_copy(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        buffer: &wgpu::Buffer,
        offset: u64,
        save: bool,
    ) {
        let parts = [(&self.conv, 0, self.conv_bytes), (&self.ssm, self.conv_bytes, self.ssm_bytes)];
        for (live, at, bytes) in parts.into_iter().filter(|p| p.2 > 0) {
            if save {
                encoder.copy_buffer_to_buffer(live, 0, buffer, offset + at, bytes);
            } else {
                encoder.copy_buffer_to_buffer(buffer, offset + at, live, 0, bytes);
            }
        }
    }

    pub(crate) fn new(ctx: &GpuContext, c: &Config) -> Result<Self> {
        let layout = c.state_layout();
        let (conv_len, ssm_len) = (layout.floats_named("conv"), layout.floats_named("ssm"));
        Ok(Self {
            conv: ctx.storage_zeroed_f32("conv state", conv_len)?,
            ssm: ctx.storage_zeroed_f32("ssm state", ssm_len)?,
            rewind: ctx.storage_zeroed_f32("rewind state", layout.fixed_floats())?,
            conv_bytes: 4 * conv_len as u64,
            ssm_bytes: 4 * ssm_len as u64,
        })
    }
}
