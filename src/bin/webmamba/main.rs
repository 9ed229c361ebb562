//! `webmamba`: the native command-line tool. Without `--model`, commands use the embedded
//! default model (shakespeare-mamba-3m).
//!
//! ```text
//! webmamba logits   [--model DIR] --ids 1,2,3 [--backend cpu|gpu] --out logits.npy
//! webmamba generate [--model DIR] --prompt TEXT --max-tokens N [--temperature 0] [--top-k K]
//!                   [--top-p P] [--repetition-penalty R] [--stop TEXT]... [--seed S] [--backend cpu|gpu]
//! webmamba bench    [--model DIR | --shape 130m] [--prompt-tokens N] [--decode-tokens N]
//! webmamba bench    --suite [--model DIR | --shape 130m] [--json] [--runs N] [--formats f32,f16,int8]
//! webmamba replay   [--model DIR] --ops FILE [--checkpoint-interval B] [--retention dense|sparse:K]
//!                   [--budget BYTES] [--backend cpu|gpu]
//! webmamba random   --shape 790m|mamba2-780m|… [--dtype bf16] [--shards 4] [--seed S] [--zeros] --out DIR
//! ```
//! `logits`, `generate` and `replay` also take `--weights f32|f16|int8` (GPU weight storage).

mod bench;
mod default_model;
mod npy;
mod progress;
mod replay;
mod shapes;
mod suite;

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use webmamba::sampling::{Sampler, SamplingOptions, StopStrings};
use webmamba::{
    Checkpoint, Engine, GpuContext, GpuModel, GpuModelOptions, Logits, Matmul, Tokenizer, WeightFormat,
};

#[derive(Parser)]
#[command(name = "webmamba", version, about = "Mamba language models on WebGPU and the CPU")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Writes the f32 logits of every position as a .npy of shape [L, vocab].
    Logits {
        /// Model folder: config.json, model.safetensors (or index + shards). Default: the
        /// embedded shakespeare-mamba-3m.
        #[arg(long)]
        model: Option<PathBuf>,
        /// Comma-separated token ids.
        #[arg(long, value_delimiter = ',', required = true)]
        ids: Vec<u32>,
        /// Where to run the forward pass.
        #[arg(long, value_enum, default_value_t = Backend::Cpu)]
        backend: Backend,
        /// How the GPU stores weight matrices.
        #[arg(long, value_enum, default_value_t = Weights::F16)]
        weights: Weights,
        /// Output .npy path.
        #[arg(long)]
        out: PathBuf,
    },
    /// Generates text after a prompt and streams it to stdout.
    Generate {
        /// Model folder: config.json, model.safetensors (or index + shards), tokenizer.json.
        /// Default: the embedded shakespeare-mamba-3m.
        #[arg(long)]
        model: Option<PathBuf>,
        /// The prompt text.
        #[arg(long)]
        prompt: String,
        /// Number of tokens to generate (fewer if the model emits its end-of-text token).
        #[arg(long, default_value_t = 64)]
        max_tokens: usize,
        /// 0 = greedy; otherwise sample from softmax(logits / temperature).
        #[arg(long, default_value_t = 0.0)]
        temperature: f32,
        /// Sample among the k most likely tokens only (0: all).
        #[arg(long, default_value_t = 0)]
        top_k: usize,
        /// Sample among the most likely tokens whose probabilities add up to p (1: all).
        #[arg(long, default_value_t = 1.0)]
        top_p: f32,
        /// Penalise tokens already in the history (> 1 discourages repeats; 1: off).
        #[arg(long, default_value_t = 1.0)]
        repetition_penalty: f32,
        /// Stop at this string (not printed); may be given several times.
        #[arg(long)]
        stop: Vec<String>,
        /// Seed of the sampler.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Where to run the forward pass.
        #[arg(long, value_enum, default_value_t = Backend::Cpu)]
        backend: Backend,
        /// How the GPU stores weight matrices.
        #[arg(long, value_enum, default_value_t = Weights::F16)]
        weights: Weights,
    },
    /// Writes a seeded random model of a published shape as a Hugging Face folder (for
    /// loading tests and benchmarks at real sizes).
    Random {
        /// The shape.
        #[arg(long, value_enum)]
        shape: shapes::Shape,
        /// Storage dtype of the weights.
        #[arg(long, value_enum, default_value_t = Dtype::Bf16)]
        dtype: Dtype,
        /// Number of safetensors shards (1: model.safetensors).
        #[arg(long, default_value_t = 1)]
        shards: usize,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// All weights zero, written as sparse files (instant): for tests of models too large
        /// to load.
        #[arg(long)]
        zeros: bool,
        /// The folder to write.
        #[arg(long)]
        out: PathBuf,
    },
    /// Measures prefill and decode speed of each backend, side by side in one run.
    Bench(bench::BenchArgs),
    /// Runs a JSON list of session operations on one checkpoint cache; prints a JSON line each.
    Replay(replay::ReplayArgs),
}

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

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Logits { model, ids, backend, weights, out } => {
            let mut e = engine(&checkpoint(model.as_ref())?, backend, Matmul::Auto, weights)?;
            let logits = pollster::block_on(e.forward(&ids, Logits::All))?;
            let vocab = e.config().vocab_size;
            let file = std::fs::File::create(&out).with_context(|| format!("creating {}", out.display()))?;
            npy::write_f32_2d(std::io::BufWriter::new(file), &logits, ids.len(), vocab)?;
            eprintln!("wrote {} ({} x {vocab}, {} backend)", out.display(), ids.len(), e.name());
        }
        Command::Generate {
            model,
            prompt,
            max_tokens,
            temperature,
            top_k,
            top_p,
            repetition_penalty,
            stop,
            seed,
            backend,
            weights,
        } => {
            let checkpoint = checkpoint(model.as_ref())?;
            let json =
                checkpoint.tokenizer_json.as_deref().context("the model folder has no tokenizer.json")?;
            let tokenizer = Tokenizer::from_bytes(json)?;
            let mut e = engine(&checkpoint, backend, Matmul::Auto, weights)?;
            let eos = e.config().eos_token_id;
            let ids = tokenizer.encode(&prompt, true)?;
            let options = SamplingOptions { temperature, top_k, top_p, repetition_penalty };
            let mut sampler = Sampler::new(options, seed)?;
            let mut stops = StopStrings::new(stop)?;
            let mut stream = tokenizer.stream(true);
            let mut history = ids.clone();
            let mut logits = pollster::block_on(e.forward(&ids, Logits::Last))?;
            let mut stdout = std::io::stdout().lock();
            write!(stdout, "{prompt}")?;
            let mut stopped = false;
            for _ in 0..max_tokens {
                let next = sampler.sample(&logits, &history)?;
                if Some(next) == eos {
                    break;
                }
                history.push(next);
                if let Some(text) = stream.step(&tokenizer, next)? {
                    let (shown, reached) = stops.push(&text);
                    write!(stdout, "{shown}")?;
                    stdout.flush()?;
                    if reached {
                        stopped = true;
                        break;
                    }
                }
                logits = pollster::block_on(e.forward(&[next], Logits::Last))?;
            }
            if !stopped {
                let (tail, _) = stops.push(&stream.finish(&tokenizer)?);
                write!(stdout, "{tail}{}", stops.finish())?;
            }
            writeln!(stdout)?;
        }
        Command::Random { shape, dtype, shards, seed, zeros, out } => {
            let config = shape.config();
            let bytes =
                webmamba::model::write_random_checkpoint(&out, &config, seed, dtype.into(), shards, zeros)?;
            eprintln!(
                "wrote {} ({:?}, {:.2} GB of {dtype:?} weights)",
                out.display(),
                shape,
                bytes as f64 / 1e9
            );
        }
        Command::Bench(args) => bench::run(args)?,
        Command::Replay(args) => replay::run(args)?,
    }
    Ok(())
}
