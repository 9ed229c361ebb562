//! What every command shares: the backend, weight-format and context flags, the model folder
//! (or the embedded default model), its tokenizer, and loading it onto a backend with a progress
//! bar.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use webmamba::cpu::threads::Threads;
use webmamba::{
    CacheConfig, Checkpoint, Engine, GpuContext, GpuModel, GpuModelOptions, KvFormat, Matmul, Runtime,
    Tokenizer, WeightFormat,
};

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
    /// 4 bits + an f16 step and minimum per 64 weights (GGUF's Q4_1 in groups of 64).
    Q4,
}

impl From<Weights> for WeightFormat {
    fn from(w: Weights) -> Self {
        match w {
            Weights::F32 => WeightFormat::F32,
            Weights::F16 => WeightFormat::F16,
            Weights::Int8 => WeightFormat::Int8,
            Weights::Q4 => WeightFormat::Q4,
        }
    }
}

/// The sampler's flags (`generate`, `chat`).
#[derive(Clone, Copy, Debug, clap::Args)]
pub struct SamplingArgs {
    /// 0 = greedy; otherwise sample from softmax(logits / temperature).
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// Sample among the k most likely tokens only (0: all).
    #[arg(long, default_value_t = 0)]
    pub top_k: usize,
    /// Sample among the most likely tokens whose probabilities add up to p (1: all).
    #[arg(long, default_value_t = 1.0)]
    pub top_p: f32,
    /// Penalise tokens already in the history (> 1 discourages repeats; 1: off).
    #[arg(long, default_value_t = 1.0)]
    pub repetition_penalty: f32,
    /// Seed of the sampler.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl SamplingArgs {
    /// The sampler these flags describe.
    pub fn sampler(&self) -> webmamba::Result<webmamba::sampling::Sampler> {
        let options = webmamba::sampling::SamplingOptions {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            repetition_penalty: self.repetition_penalty,
        };
        webmamba::sampling::Sampler::new(options, self.seed)
    }
}

/// How the GPU stores a hybrid's cached keys and values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Kv {
    /// 4 bytes a value (exact).
    #[default]
    F32,
    /// 2 bytes a value (half the memory; the logits move slightly).
    F16,
}

/// The attention caches of hybrid models (nothing changes for a pure Mamba model): the
/// `maxContext` and `kvFormat` load options of the JS API; the CPU backend's threads; the GPU's
/// unfused decode and its sums without subgroups (for comparisons).
#[derive(Clone, Copy, Debug, Default, clap::Args)]
pub struct ContextArgs {
    /// Most tokens of context; past it a call fails with ContextFull (default: what 1 GiB of
    /// keys and values holds, capped by max_position_embeddings where the model has RoPE).
    #[arg(long)]
    pub max_context: Option<usize>,
    /// How the GPU stores cached keys and values (the CPU keeps f32).
    #[arg(long, value_enum, default_value_t = Kv::F32)]
    pub kv_format: Kv,
    /// Threads of the CPU backend's forward pass (default: every core). Results are the same
    /// at any count.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=webmamba::cpu::threads::MAX_THREADS as i64))]
    pub threads: Option<u16>,
    /// GPU decode steps run the kernels a prefill runs (7 dispatches per Mamba-1 layer instead
    /// of the fused 4, 6 per Mamba-2 layer instead of 3): for comparisons; the results agree
    /// within rounding.
    #[arg(long)]
    pub unfused: bool,
    /// The GPU's GEMV kernels sum across a workgroup as a tree in workgroup memory even where
    /// the adapter has subgroup operations: for comparisons; the results agree within rounding.
    #[arg(long)]
    pub no_subgroups: bool,
}

/// Where and how a command runs the model (`logits`, `generate`, `chat`, `replay`,
/// `perplexity`): the backend, the GPU's weight format and the context flags.
#[derive(Clone, Copy, Debug, clap::Args)]
pub struct LoadArgs {
    /// Where to run the forward pass.
    #[arg(long, value_enum, default_value_t = Backend::Cpu)]
    pub backend: Backend,
    /// How the GPU stores weight matrices.
    #[arg(long, value_enum, default_value_t = Weights::F16)]
    pub weights: Weights,
    #[command(flatten)]
    pub context: ContextArgs,
}

impl LoadArgs {
    /// [`engine`] with these flags and `Matmul::Auto`.
    pub fn engine(self, checkpoint: &Checkpoint) -> Result<Engine> {
        engine(checkpoint, self.backend, Matmul::Auto, self.weights, self.context)
    }

    /// A runtime over [`LoadArgs::engine`] with the model's default cache, its replies ending at
    /// the model's end-of-turn tokens (`generate`, `chat`).
    pub fn runtime(self, checkpoint: &Checkpoint, tokenizer: &Tokenizer) -> Result<Runtime> {
        let engine = self.engine(checkpoint)?;
        let cache = CacheConfig::for_model(engine.config());
        let mut rt = Runtime::new(engine, cache)?;
        rt.set_end_tokens(checkpoint.chat.end_ids(|t| tokenizer.token_to_id(t)));
        Ok(rt)
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
pub fn engine(
    checkpoint: &Checkpoint,
    backend: Backend,
    matmul: Matmul,
    weights: Weights,
    context: ContextArgs,
) -> Result<Engine> {
    let mut reporter = progress::reporter(checkpoint, backend == Backend::Gpu);
    let kv_format = match context.kv_format {
        Kv::F32 => KvFormat::F32,
        Kv::F16 if backend == Backend::Gpu => KvFormat::F16,
        Kv::F16 => bail!("--kv-format f16 needs --backend gpu (the CPU reference keeps f32 keys and values)"),
    };
    Ok(match backend {
        Backend::Cpu => {
            let threads = Threads::new(context.threads.map(usize::from))?;
            Engine::cpu_with(checkpoint.weights_reporting(&mut reporter)?, context.max_context, threads)?
        }
        Backend::Gpu => pollster::block_on(async {
            let ctx = GpuContext::new().await?;
            eprintln!("gpu: {}", ctx.summary());
            let options = GpuModelOptions {
                matmul,
                weights: weights.into(),
                max_context: context.max_context,
                kv_format,
                fused: !context.unfused,
                subgroups: !context.no_subgroups,
                ..Default::default()
            };
            let model = GpuModel::load_reporting(&ctx, checkpoint, options, &mut reporter).await?;
            let m = model.memory();
            let mb = |b: u64| b as f64 / 1e6;
            eprintln!(
                "gpu memory: weights {:.1} MB ({}), activations {:.1} MB, state {:.1} MB",
                mb(m.weights),
                model.weight_formats().iter().map(|f| f.name()).collect::<Vec<_>>().join("+"),
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

/// The tokenizer of `checkpoint` (its tokenizer.json).
pub fn tokenizer(checkpoint: &Checkpoint) -> Result<Tokenizer> {
    let json = checkpoint.tokenizer_json.as_deref().context("the model folder has no tokenizer.json")?;
    Ok(Tokenizer::from_bytes(json)?)
}
