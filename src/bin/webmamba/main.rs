//! `webmamba`: the native command-line tool.
//!
//! ```text
//! webmamba logits   --model DIR --ids 1,2,3 [--backend cpu|gpu] --out logits.npy
//! webmamba generate --model DIR --prompt TEXT --max-tokens N [--temperature 0] [--seed S]
//! ```

mod npy;

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand, ValueEnum};
use webmamba::sampling::Sampler;
use webmamba::{Checkpoint, CpuModel, Logits, State, Tokenizer};

#[derive(Parser)]
#[command(
    name = "webmamba",
    version,
    about = "Mamba language models on WebGPU and the CPU"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Writes the f32 logits of every position as a .npy of shape [L, vocab].
    Logits {
        /// Model folder: config.json, model.safetensors (or index + shards).
        #[arg(long)]
        model: PathBuf,
        /// Comma-separated token ids.
        #[arg(long, value_delimiter = ',', required = true)]
        ids: Vec<u32>,
        /// Where to run the forward pass.
        #[arg(long, value_enum, default_value_t = Backend::Cpu)]
        backend: Backend,
        /// Output .npy path.
        #[arg(long)]
        out: PathBuf,
    },
    /// Generates text after a prompt and streams it to stdout.
    Generate {
        /// Model folder: config.json, model.safetensors (or index + shards), tokenizer.json.
        #[arg(long)]
        model: PathBuf,
        /// The prompt text.
        #[arg(long)]
        prompt: String,
        /// Number of tokens to generate (fewer if the model emits its end-of-text token).
        #[arg(long, default_value_t = 64)]
        max_tokens: usize,
        /// 0 = greedy; otherwise sample from softmax(logits / temperature).
        #[arg(long, default_value_t = 0.0)]
        temperature: f32,
        /// Seed of the sampler.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Where to run the forward pass.
        #[arg(long, value_enum, default_value_t = Backend::Cpu)]
        backend: Backend,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Backend {
    /// The f32 CPU reference.
    Cpu,
    /// WebGPU/wgpu kernels.
    Gpu,
}

fn load(dir: &PathBuf, backend: Backend) -> Result<(Checkpoint, CpuModel)> {
    if let Backend::Gpu = backend {
        bail!(
            "--backend gpu is not available yet: the GPU forward pass is issue #4; use --backend cpu"
        );
    }
    let checkpoint =
        Checkpoint::from_dir(dir).with_context(|| format!("loading {}", dir.display()))?;
    let model = CpuModel::new(checkpoint.weights()?);
    Ok((checkpoint, model))
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Logits {
            model,
            ids,
            backend,
            out,
        } => {
            let (_, m) = load(&model, backend)?;
            let mut state = State::zeros(m.config());
            let logits = m.forward(&ids, &mut state, Logits::All)?;
            let file = std::fs::File::create(&out)
                .with_context(|| format!("creating {}", out.display()))?;
            npy::write_f32_2d(
                std::io::BufWriter::new(file),
                &logits,
                ids.len(),
                m.config().vocab_size,
            )?;
            eprintln!(
                "wrote {} ({} x {})",
                out.display(),
                ids.len(),
                m.config().vocab_size
            );
        }
        Command::Generate {
            model,
            prompt,
            max_tokens,
            temperature,
            seed,
            backend,
        } => {
            let (checkpoint, m) = load(&model, backend)?;
            let json = checkpoint
                .tokenizer_json
                .as_deref()
                .context("the model folder has no tokenizer.json")?;
            let tokenizer = Tokenizer::from_bytes(json)?;
            let ids = tokenizer.encode(&prompt, true)?;
            let mut sampler = Sampler::new(temperature, seed)?;
            let mut stream = tokenizer.stream(true);
            let mut state = State::zeros(m.config());
            let mut logits = m.forward(&ids, &mut state, Logits::Last)?;
            let mut stdout = std::io::stdout().lock();
            write!(stdout, "{prompt}")?;
            for _ in 0..max_tokens {
                let next = sampler.sample(&logits)?;
                if Some(next) == m.config().eos_token_id {
                    break;
                }
                if let Some(text) = stream.step(&tokenizer, next)? {
                    write!(stdout, "{text}")?;
                    stdout.flush()?;
                }
                logits = m.forward(&[next], &mut state, Logits::Last)?;
            }
            writeln!(stdout, "{}", stream.finish(&tokenizer)?)?;
        }
    }
    Ok(())
}
