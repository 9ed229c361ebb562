//! `webmamba`: the native command-line tool. Without `--model`, commands use the embedded
//! default model (shakespeare-mamba-3m).
//!
//! ```text
//! webmamba logits   [--model DIR] --ids 1,2,3 [--backend cpu|gpu] --out logits.npy
//! webmamba generate [--model DIR] --prompt TEXT --max-tokens N [--temperature 0] [--top-k K]
//!                   [--top-p P] [--repetition-penalty R] [--stop TEXT]... [--seed S] [--backend cpu|gpu]
//! webmamba chat     [--model DIR] [--template FILE] [--system TEXT] [--max-tokens 256] [--temperature 0] …
//! webmamba bench    [--model DIR | --shape 130m] [--prompt-tokens N] [--decode-tokens N]
//! webmamba bench    --suite [--model DIR | --shape 130m] [--json] [--runs N] [--formats f32,f16,int8,q4]
//! webmamba replay   [--model DIR] --ops FILE [--block-size B] [--retention dense|sparse:K]
//!                   [--budget BYTES] [--backend cpu|gpu]
//! webmamba perplexity [--model DIR] --text FILE [--context 512] [--weights f32|f16|int8|q4] [--backend cpu|gpu] [--json]
//! webmamba sizes    [--shape 2.8b]... [--model DIR]... [--json]
//! webmamba random   --shape 790m|mamba2-780m|granite-h-1b|falcon-h1-0.5b|zamba2-1.2b|lfm2-1.2b|qwen3.5-0.8b|qwen3.5-2b|… [--dtype bf16] [--shards 4] [--seed S] [--zeros | --q4-grid] --out DIR
//! ```
//! `logits`, `generate`, `replay` and `perplexity` take `--weights f32|f16|int8|q4` (GPU weight storage).

mod bench;
mod chat;
mod default_model;
mod generate;
mod npy;
mod perplexity;
mod progress;
mod replay;
mod setup;
mod shapes;
mod sizes;
mod suite;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use webmamba::Logits;

use setup::{Dtype, LoadArgs, checkpoint};

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
        /// Model folder (config.json, model.safetensors or index + shards) or GGUF file. Default: the
        /// embedded shakespeare-mamba-3m.
        #[arg(long)]
        model: Option<PathBuf>,
        /// Comma-separated token ids.
        #[arg(long, value_delimiter = ',', required = true)]
        ids: Vec<u32>,
        #[command(flatten)]
        load: LoadArgs,
        /// Output .npy path.
        #[arg(long)]
        out: PathBuf,
    },
    /// Generates text after a prompt and streams it to stdout.
    Generate(generate::GenerateArgs),
    /// A conversation on a terminal with the model's chat template, each turn reading only its
    /// new tokens.
    Chat(chat::ChatArgs),
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
        /// Every weight matrix on the grid q4 (and int8, where q4 falls back) stores exactly,
        /// so `--weights q4` computes what the CPU reference computes from the file.
        #[arg(long, conflicts_with = "zeros")]
        q4_grid: bool,
        /// The folder to write.
        #[arg(long)]
        out: PathBuf,
    },
    /// Measures prefill and decode speed of each backend, side by side in one run.
    Bench(bench::BenchArgs),
    /// Runs a JSON list of session operations on one checkpoint cache; prints a JSON line each.
    Replay(replay::ReplayArgs),
    /// Perplexity over a text file in windows of --context tokens (llama.cpp's convention: a
    /// fresh state per window, its second half scored).
    Perplexity(perplexity::PerplexityArgs),
    /// A model's weights and their GPU bytes in each weight format, from config.json alone.
    Sizes(sizes::SizesArgs),
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Logits { model, ids, load, out } => {
            let mut e = load.engine(&checkpoint(model.as_ref())?)?;
            let logits = pollster::block_on(e.forward(&ids, Logits::All))?;
            let vocab = e.config().vocab_size;
            let file = std::fs::File::create(&out).with_context(|| format!("creating {}", out.display()))?;
            npy::write_f32_2d(std::io::BufWriter::new(file), &logits, ids.len(), vocab)?;
            eprintln!("wrote {} ({} x {vocab}, {} backend)", out.display(), ids.len(), e.name());
        }
        Command::Generate(args) => generate::run(args)?,
        Command::Chat(args) => chat::run(args)?,
        Command::Random { shape, dtype, shards, seed, zeros, q4_grid, out } => {
            let json = shape.config_json();
            let values = match (zeros, q4_grid) {
                (true, _) => webmamba::model::Values::Zeros,
                (_, true) => webmamba::model::Values::Q4Grid,
                _ => webmamba::model::Values::Random,
            };
            let bytes = webmamba::model::write_random_checkpoint_json(
                &out,
                &json,
                seed,
                dtype.into(),
                shards,
                values,
            )?;
            eprintln!(
                "wrote {} ({:?}, {:.2} GB of {dtype:?} weights)",
                out.display(),
                shape,
                bytes as f64 / 1e9
            );
        }
        Command::Bench(args) => bench::run(args)?,
        Command::Replay(args) => replay::run(args)?,
        Command::Perplexity(args) => perplexity::run(args)?,
        Command::Sizes(args) => sizes::run(args)?,
    }
    Ok(())
}
