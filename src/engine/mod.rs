//! [`Engine`]: one model on one backend — the CPU reference or the GPU — behind one interface,
//! holding the recurrent state that forward calls continue from. What sessions, the CLI and the
//! benchmarks drive.

mod cpu_pages;
mod records;

use std::ops::Range;

use cpu_pages::{CpuPages, CpuSlot};

use crate::cpu::CpuModel;
use crate::cpu::threads::Threads;
use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::gpu_model::{GpuModel, GpuModelOptions};
use crate::kernels::top_k::Top;
use crate::model::{Checkpoint, Config, ModelWeights, context};
use crate::model::{Logits, State};

/// What the device can pick by itself, as data: the limits of [`DevicePicks`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PickLimits {
    /// Most decode steps one greedy batch runs ([`DevicePicks::greedy`]).
    pub(crate) max_batch: usize,
    /// The largest `k` whose top the device summarises ([`DevicePicks::forward_top`]).
    pub(crate) max_top_k: usize,
}

impl PickLimits {
    fn of(m: &GpuModel) -> Self {
        PickLimits { max_batch: m.max_greedy_steps(), max_top_k: m.max_top_k() }
    }
}

/// The engine's device-side picking, a capability of the GPU engine ([`Engine::device_picks`]):
/// decode steps whose next token is picked where the logits are, so a step reads back a pick
/// or the top of the logits instead of all V of them. The logits after the last step stay on
/// the device ([`DevicePicks::last_logits`] reads them).
pub struct DevicePicks<'a>(&'a mut GpuModel);

impl DevicePicks<'_> {
    /// Greedy decode steps picked and fed on the device, one submit ([`GpuModel::greedy`]):
    /// feeds `first`, then each pick; returns the picks (fewer than `steps` after non-finite
    /// logits).
    pub async fn greedy(&mut self, first: u32, steps: usize) -> Result<Vec<u32>> {
        self.0.greedy(first, steps).await
    }

    /// Records and drops, unsubmitted, the batch that would follow the last
    /// [`DevicePicks::greedy`]; the dispatches it recorded (`None` before any batch). For
    /// benchmarks: the CPU's part of a batch, timed alone.
    pub fn record_next_unsubmitted(&self) -> Option<u64> {
        self.0.record_next_greedy_unsubmitted()
    }

    /// One decode step and the top `k` of the logits after it ([`GpuModel::forward_top`]).
    pub async fn forward_top(&mut self, token: u32, k: usize) -> Result<Top> {
        self.0.forward_top(token, k).await
    }

    /// Back to the working state before the last [`DevicePicks::greedy`] batch
    /// ([`GpuModel::rewind`]).
    pub fn rewind(&mut self) -> Result<()> {
        self.0.rewind()
    }

    /// The logits (V) after the last token fed, read back ([`GpuModel::last_logits`]).
    pub async fn last_logits(&self) -> Result<Vec<f32>> {
        self.0.last_logits().await
    }
}

/// A model and its working state, on the CPU or the GPU.
pub enum Engine {
    /// The f32 CPU reference and its state.
    Cpu {
        /// The model.
        model: Box<CpuModel>,
        /// The working state.
        state: State,
        /// Checkpoint slots, filled on first use (so an unused budget costs no memory).
        slots: Vec<Option<CpuSlot>>,
        /// Key/value pages (pages mode).
        pages: CpuPages,
    },
    /// The WebGPU model (its working state lives in GPU buffers).
    Gpu(Box<GpuModel>),
}

impl Engine {
    /// The CPU reference, on every core ([`Threads::new`]`(None)`).
    pub fn cpu(weights: ModelWeights) -> Self {
        let state = State::zeros(&weights.config);
        let threads = Threads::new(None).unwrap_or_else(|_| Threads::single());
        Engine::Cpu {
            model: Box::new(CpuModel::new(weights).with_threads(threads)),
            state,
            slots: Vec::new(),
            pages: CpuPages::default(),
        }
    }

    /// The CPU reference with a context of at most `max_context` tokens (`None`: the default,
    /// [`crate::model::context::max_context`]), on `threads`.
    pub fn cpu_with(weights: ModelWeights, max_context: Option<usize>, threads: Threads) -> Result<Self> {
        let state = State::zeros(&weights.config);
        let model = CpuModel::new(weights).with_max_context(max_context)?.with_threads(threads);
        Ok(Engine::Cpu { model: Box::new(model), state, slots: Vec::new(), pages: CpuPages::default() })
    }

    /// The most tokens of context the model may hold (`usize::MAX` for a model without
    /// attention).
    pub(crate) fn max_context(&self) -> usize {
        match self {
            Engine::Cpu { model, .. } => model.max_context(),
            Engine::Gpu(m) => m.max_context(),
        }
    }

    /// How many threads the CPU forward pass runs on (`None` on the GPU).
    pub fn cpu_threads(&self) -> Option<usize> {
        match self {
            Engine::Cpu { model, .. } => Some(model.threads()),
            Engine::Gpu(_) => None,
        }
    }

    /// Bytes of one key or value in the model's attention caches (and in its checkpoints): 4
    /// on the CPU, the [`KvFormat`](crate::KvFormat)'s on the GPU.
    pub fn kv_value_bytes(&self) -> usize {
        match self {
            Engine::Cpu { .. } => 4,
            Engine::Gpu(m) => m.kv_format().bytes(),
        }
    }

    /// `checkpoint` streamed onto the GPU of `ctx`.
    pub async fn gpu(ctx: &GpuContext, checkpoint: &Checkpoint, options: GpuModelOptions) -> Result<Self> {
        Ok(Engine::Gpu(Box::new(GpuModel::load(ctx, checkpoint, options).await?)))
    }

    /// The model's hyper-parameters.
    pub fn config(&self) -> &Config {
        match self {
            Engine::Cpu { model, .. } => model.config(),
            Engine::Gpu(m) => m.config(),
        }
    }

    /// The model's fingerprint ([`ModelWeights::fingerprint`]; the same on both backends).
    pub(crate) fn fingerprint(&self) -> [u8; 32] {
        match self {
            Engine::Cpu { model, .. } => model.weights().fingerprint,
            Engine::Gpu(m) => m.fingerprint(),
        }
    }

    /// `"cpu"` or `"gpu"`.
    pub fn name(&self) -> &'static str {
        match self {
            Engine::Cpu { .. } => "cpu",
            Engine::Gpu(_) => "gpu",
        }
    }

    /// Runs `tokens` from the working state (see [`CpuModel::forward`]).
    pub async fn forward(&mut self, tokens: &[u32], which: Logits) -> Result<Vec<f32>> {
        match self {
            Engine::Cpu { model, state, .. } => model.forward(tokens, state, which),
            Engine::Gpu(m) => m.forward(tokens, which).await,
        }
    }

    /// Runs `tokens` and writes the state after token `pos` into slot `slot` for every
    /// `(pos, slot)` of `captures` (ascending positions), from the same scan.
    pub async fn forward_capturing(
        &mut self,
        tokens: &[u32],
        which: Logits,
        captures: &[(usize, usize)],
    ) -> Result<Vec<f32>> {
        match self {
            Engine::Cpu { model, state, slots, pages } => {
                if let Some(&(_, bad)) = captures.iter().find(|(_, s)| *s >= slots.len()) {
                    return Err(Error::InvalidInput(format!("no checkpoint slot {bad}")));
                }
                let positions: Vec<usize> = captures.iter().map(|c| c.0).collect();
                let (logits, states) = model.forward_capturing(tokens, state, which, &positions)?;
                for (&(_, slot), s) in captures.iter().zip(states) {
                    slots[slot] = Some(pages.slot_of(s)?);
                }
                Ok(logits)
            }
            Engine::Gpu(m) => m.forward_capturing(tokens, which, captures).await,
        }
    }

    /// Picking tokens on the device, where the engine can ([`DevicePicks`]): the GPU engine.
    pub fn device_picks(&mut self) -> Option<DevicePicks<'_>> {
        match self {
            Engine::Cpu { .. } => None,
            Engine::Gpu(m) => Some(DevicePicks(m)),
        }
    }

    /// The limits of [`Engine::device_picks`], where the engine picks on the device.
    pub fn pick_limits(&self) -> Option<PickLimits> {
        match self {
            Engine::Cpu { .. } => None,
            Engine::Gpu(m) => Some(PickLimits::of(m)),
        }
    }

    /// Adds `n` checkpoint slots (each holds one whole state); returns their ids.
    pub fn add_slots(&mut self, n: usize) -> Result<Range<usize>> {
        match self {
            Engine::Cpu { slots, .. } => {
                let first = slots.len();
                slots.try_reserve(n).map_err(|_| Error::InvalidInput(format!("{n} checkpoint slots")))?;
                slots.resize(first + n, None);
                Ok(first..slots.len())
            }
            Engine::Gpu(m) => m.add_slots(n),
        }
    }

    /// Copies the whole working state, every key/value row included, into `slot` (a parked
    /// session's live state).
    pub fn save_state(&mut self, slot: usize) -> Result<()> {
        match self {
            Engine::Cpu { state, slots, .. } => {
                let saved = CpuSlot { state: state.try_clone()?, from: 0 };
                *slots.get_mut(slot).ok_or_else(|| no_slot(slot))? = Some(saved);
                Ok(())
            }
            Engine::Gpu(m) => m.save_state(slot),
        }
    }

    /// Copies the working state into checkpoint `slot`: in pages mode
    /// ([`Engine::enable_pages`]) only the key/value rows after its whole pages, which
    /// [`Engine::save_pages`] keeps; else all of it.
    pub(crate) fn save_checkpoint(&mut self, slot: usize) -> Result<()> {
        match self {
            Engine::Cpu { state, slots, pages, .. } => {
                let saved = CpuPages::slot_from(state, pages.tail_start(state.context().unwrap_or(0)))?;
                *slots.get_mut(slot).ok_or_else(|| no_slot(slot))? = Some(saved);
                Ok(())
            }
            Engine::Gpu(m) => m.save_checkpoint(slot),
        }
    }

    /// Replaces the working state with `slot`'s, saved whole ([`Engine::save_state`]).
    pub fn load_state(&mut self, slot: usize) -> Result<()> {
        self.load_checkpoint(slot, &[])
    }

    /// Replaces the working state with checkpoint `slot`'s over `pages`: the pages of its whole
    /// blocks, in order (none outside pages mode).
    pub(crate) fn load_checkpoint(&mut self, slot: usize, ids: &[usize]) -> Result<()> {
        match self {
            Engine::Cpu { state, slots, pages, .. } => {
                let saved = slots.get(slot).and_then(Option::as_ref).ok_or_else(|| no_slot(slot))?;
                *state = pages.restore(saved, ids)?;
                Ok(())
            }
            Engine::Gpu(m) => m.load_checkpoint(slot, ids),
        }
    }

    /// Pages mode: `n` key/value page slots of `block` positions each (filled on first write);
    /// returns their ids. Only for a model with attention.
    pub(crate) fn enable_pages(&mut self, block: usize, n: usize) -> Result<Range<usize>> {
        match self {
            Engine::Cpu { model, pages, .. } => {
                if block == 0 || model.config().state_layout().per_token_floats() == 0 {
                    return Err(Error::InvalidInput(
                        "key/value pages need attention layers and a block size".into(),
                    ));
                }
                if pages.block != 0 && pages.block != block {
                    return Err(Error::InvalidInput(format!(
                        "pages of {} positions exist already",
                        pages.block
                    )));
                }
                pages.block = block;
                let first = pages.pages.len();
                pages
                    .pages
                    .try_reserve(n)
                    .map_err(|_| Error::InvalidInput(format!("{n} key/value pages")))?;
                pages.pages.resize(first + n, None);
                Ok(first..pages.pages.len())
            }
            Engine::Gpu(m) => m.enable_pages(block, n),
        }
    }

    /// Writes block `b` of the working state's key/value caches (positions b·B..(b+1)·B, all
    /// computed) into page `page`, for every `(page, b)` of `which`.
    pub(crate) fn save_pages(&mut self, which: &[(usize, usize)]) -> Result<()> {
        match self {
            Engine::Cpu { state, pages, .. } => which.iter().try_for_each(|&(p, b)| pages.save(state, p, b)),
            Engine::Gpu(m) => m.save_pages(which),
        }
    }

    /// Resets the working state to the state before any token.
    pub fn reset(&mut self) {
        match self {
            Engine::Cpu { model, state, .. } => *state = State::zeros(model.config()),
            Engine::Gpu(m) => m.reset_state(),
        }
    }

    /// A CPU copy of the working state.
    pub async fn read_state(&self) -> Result<State> {
        match self {
            Engine::Cpu { state, .. } => Ok(state.clone()),
            Engine::Gpu(m) => m.read_state().await,
        }
    }

    /// Replaces the working state.
    pub(crate) fn write_state(&mut self, new: &State) -> Result<()> {
        match self {
            Engine::Cpu { model, state, .. } => {
                new.check_fits(model.config())?;
                context::check_room(new.context().unwrap_or(0), model.max_context())?;
                *state = new.clone();
                Ok(())
            }
            Engine::Gpu(m) => m.write_state(new),
        }
    }
}

pub(crate) fn no_slot(slot: usize) -> Error {
    Error::InvalidInput(format!("no checkpoint slot {slot}, or nothing saved in it"))
}
