//! `webmamba generate`: a prompt's continuation streamed to stdout, through the same text
//! generation as the JS API (`Generation::run`: the decode loop with the device's greedy
//! batches and top-k on the GPU, the state cache; the sampler's options, stop strings and the
//! model's end-of-text token, kept in the history and not printed; a detokenizer error fails).

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use webmamba::GenerateOptions;
use webmamba::session::{Generation, Pace};

use crate::setup::{LoadArgs, SamplingArgs, checkpoint, tokenizer};

/// `webmamba generate`'s flags.
#[derive(Args)]
pub struct GenerateArgs {
    /// Model folder (config.json, model.safetensors or index + shards, tokenizer.json) or
    /// GGUF file (`x.gguf`, or the first of a split set: `x-00001-of-0000N.gguf`).
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
    #[command(flatten)]
    load: LoadArgs,
}

/// Runs it.
pub fn run(a: GenerateArgs) -> Result<()> {
    let checkpoint = checkpoint(a.model.as_ref())?;
    let tokenizer = tokenizer(&checkpoint)?;
    let mut rt = a.load.runtime(&checkpoint, &tokenizer)?;
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
