//! What every command shares: the backend and weight-format flags, the model folder (or the
//! embedded default model) and loading it onto a backend with a progress bar.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::ValueEnum;
use webmamba::{Checkpoint, Engine, GpuContext, GpuModel, GpuModelOptions, Matmul, WeightFormat};

use crate::{default_model, progress};

/// Where the forward pass runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// The f32 CPU reference.
    Cpu,
    /// WebGPU/wgpu kernels on the best adapter.
    Gpu,
}

/// How the GPU stores weight matrices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Weights {
    /// 4 bytes per weight.
    F32,
    /// 2 bytes per weight (exact for bf16/f16 checkpoints).
    F16,
    /// 1 byte + an f32 scale per 32 weights.
    Int8,
}

impl From<Weights> for WeightFormat {
    fn from(w: Weights) -> Self {
        match w {
            Weights::F32 => WeightFormat::F32,
            Weights::F16 => WeightFormat::F16,
            Weights::Int8 => WeightFormat::Int8,
        }
    }
}

/// Storage dtypes of random checkpoints.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Dtype {
    F32,
    F16,
    Bf16,
}

impl From<Dtype> for safetensors::Dtype {
    fn from(d: Dtype) -> Self {
        match d {
            Dtype::F32 => safetensors::Dtype::F32,
            Dtype::F16 => safetensors::Dtype::F16,
            Dtype::Bf16 => safetensors::Dtype::BF16,
        }
    }
}

/// Streams `checkpoint`'s weights onto `backend` (a progress bar for large models).
pub fn engine(checkpoint: &Checkpoint, backend: Backend, matmul: Matmul, weights: Weights) -> Result<Engine> {
    let mut reporter = progress::reporter(checkpoint, backend == Backend::Gpu);
    Ok(match backend {
        Backend::Cpu => Engine::cpu(checkpoint.weights_reporting(&mut reporter)?),
        Backend::Gpu => pollster::block_on(async {
            let ctx = GpuContext::new().await?;
            eprintln!("gpu: {}", ctx.summary());
            let options = GpuModelOptions { matmul, weights: weights.into(), ..Default::default() };
            let model = GpuModel::load_reporting(&ctx, checkpoint, options, &mut reporter).await?;
            let m = model.memory();
            let mb = |b: u64| b as f64 / 1e6;
            eprintln!(
                "gpu memory: weights {:.1} MB ({}), activations {:.1} MB, state {:.1} MB",
                mb(m.weights),
                m.weight_format.name(),
                mb(m.activations),
                mb(m.state)
            );
            Ok::<_, webmamba::Error>(Engine::Gpu(Box::new(model)))
        })?,
    })
}

/// The model folder `dir`, or the embedded default model.
pub fn checkpoint(dir: Option<&PathBuf>) -> Result<Checkpoint> {
    match dir {
        Some(dir) => Checkpoint::from_dir(dir).with_context(|| format!("loading {}", dir.display())),
        None => default_model::checkpoint().context(default_model::NAME),
    }
}
