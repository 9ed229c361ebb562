//! `webmamba generate`: a prompt's continuation streamed to stdout, through the same text
//! generation as the JS API (`Generation::run`: the decode loop with the device's greedy
//! batches and top-k on the GPU, the state cache; the sampler's options, stop strings and the
//! model's end-of-text token, kept in the history and not printed; a detokenizer error fails).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use webmamba::session::{Generation, Pace};
use webmamba::{CacheConfig, GenerateOptions, Matmul, Runtime, Tokenizer};

use crate::setup::{Backend, ContextArgs, SamplingArgs, Weights, checkpoint, engine};

/// `webmamba generate`'s flags.
#[derive(Args)]
pub struct GenerateArgs {
    /// Model folder: config.json, model.safetensors (or index + shards), tokenizer.json.
    /// Default: the embedded shakespeare-mamba-3m.
    #[arg(long)]
    model: Option<PathBuf>,
    /// The prompt text.
    #[arg(long)]
    prompt: String,
    /// Number of tokens to generate (fewer if the model emits its end-of-text token).
    #[arg(long, default_value_t = GenerateOptions::DEFAULT_MAX_TOKENS)]
    max_tokens: usize,
    #[command(flatten)]
    sampling: SamplingArgs,
    /// Stop at this string (not printed); may be given several times.
    #[arg(long)]
    stop: Vec<String>,
    /// Where to run the forward pass.
    #[arg(long, value_enum, default_value_t = Backend::Cpu)]
    backend: Backend,
    /// How the GPU stores weight matrices.
    #[arg(long, value_enum, default_value_t = Weights::F16)]
    weights: Weights,
    #[command(flatten)]
    context: ContextArgs,
}

/// Runs it.
pub fn run(a: GenerateArgs) -> Result<()> {
    let checkpoint = checkpoint(a.model.as_ref())?;
    let json = checkpoint.tokenizer_json.as_deref().context("the model folder has no tokenizer.json")?;
    let tokenizer = Tokenizer::from_bytes(json)?;
    let engine = engine(&checkpoint, a.backend, Matmul::Auto, a.weights, a.context)?;
    let cache = CacheConfig::for_model(engine.config());
    let mut rt = Runtime::new(engine, cache)?;
    rt.set_end_tokens(checkpoint.chat.end_ids(|t| tokenizer.token_to_id(t)));
    let session = rt.new_session()?;
    let ids = tokenizer.encode(&a.prompt, true)?;
    pollster::block_on(rt.append(session, &ids))?;
    let sampler = a.sampling.sampler()?;
    let generate = GenerateOptions { max_tokens: a.max_tokens, stop_at_eos: true };
    let mut generation = Generation::new(&tokenizer, sampler, generate, a.stop, Pace::ToEnd)?;
    let mut stdout = std::io::stdout().lock();
    write!(stdout, "{}", a.prompt)?;
    let tail = pollster::block_on(generation.run(&mut rt, session, &tokenizer, |piece| {
        write!(stdout, "{}", piece.text).and_then(|()| stdout.flush()).is_ok()
    }))?;
    write!(stdout, "{tail}")?;
    writeln!(stdout)?;
    Ok(())
}
