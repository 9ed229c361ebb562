//! [`Engine`]: one model on one backend — the CPU reference or the GPU — behind one interface,
//! holding the recurrent state that forward calls continue from. What sessions, the CLI and the
//! benchmarks drive.

use crate::cpu::{CpuModel, Logits, State};
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::gpu_model::{GpuModel, GpuModelOptions};
use crate::model::{Config, ModelWeights};

/// A model and its working state, on the CPU or the GPU.
pub enum Engine {
    /// The f32 CPU reference and its state.
    Cpu {
        /// The model.
        model: Box<CpuModel>,
        /// The working state.
        state: State,
    },
    /// The WebGPU model (its working state lives in GPU buffers).
    Gpu(Box<GpuModel>),
}

impl Engine {
    /// The CPU reference.
    pub fn cpu(weights: ModelWeights) -> Self {
        let state = State::zeros(&weights.config);
        Engine::Cpu { model: Box::new(CpuModel::new(weights)), state }
    }

    /// The GPU model on `ctx`.
    pub async fn gpu(ctx: &GpuContext, weights: &ModelWeights, options: GpuModelOptions) -> Result<Self> {
        Ok(Engine::Gpu(Box::new(GpuModel::new(ctx, weights, options).await?)))
    }

    /// The model's hyper-parameters.
    pub fn config(&self) -> &Config {
        match self {
            Engine::Cpu { model, .. } => model.config(),
            Engine::Gpu(m) => m.config(),
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
            Engine::Cpu { model, state } => model.forward(tokens, state, which),
            Engine::Gpu(m) => m.forward(tokens, which).await,
        }
    }

    /// Resets the working state to the state before any token.
    pub fn reset(&mut self) {
        match self {
            Engine::Cpu { model, state } => *state = State::zeros(model.config()),
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
    pub fn write_state(&mut self, new: &State) -> Result<()> {
        match self {
            Engine::Cpu { model, state } => {
                new.check_fits(model.config())?;
                *state = new.clone();
                Ok(())
            }
            Engine::Gpu(m) => m.write_state(new),
        }
    }
}
