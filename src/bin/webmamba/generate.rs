//! `webmamba generate`: a prompt's continuation streamed to stdout, through the same session
//! runtime as the JS API (`Runtime::generate`: the batched greedy path on the GPU, the state
//! cache), with the sampler's options, stop strings and the model's end-of-text token.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use webmamba::sampling::{Sampler, SamplingOptions, StopStrings};
use webmamba::{CacheConfig, GenerateOptions, Matmul, Runtime, Tokenizer};

use crate::setup::{Backend, Weights, checkpoint, engine};

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
}

/// Runs it.
pub fn run(a: GenerateArgs) -> Result<()> {
    let checkpoint = checkpoint(a.model.as_ref())?;
    let json = checkpoint.tokenizer_json.as_deref().context("the model folder has no tokenizer.json")?;
    let tokenizer = Tokenizer::from_bytes(json)?;
    let engine = engine(&checkpoint, a.backend, Matmul::Auto, a.weights)?;
    let eos = engine.config().eos_token_id;
    let cache = CacheConfig::for_model(engine.config());
    let mut rt = Runtime::new(engine, cache)?;
    let session = rt.new_session()?;
    let ids = tokenizer.encode(&a.prompt, true)?;
    pollster::block_on(rt.append(session, &ids))?;
    let options = SamplingOptions {
        temperature: a.temperature,
        top_k: a.top_k,
        top_p: a.top_p,
        repetition_penalty: a.repetition_penalty,
    };
    let mut sampler = Sampler::new(options, a.seed)?;
    let mut stops = StopStrings::new(a.stop)?;
    let mut stream = tokenizer.stream(true);
    let mut stdout = std::io::stdout().lock();
    write!(stdout, "{}", a.prompt)?;
    let (mut stopped, mut failed) = (false, None);
    let generate = GenerateOptions { max_tokens: a.max_tokens, stop_at_eos: true };
    pollster::block_on(rt.generate(session, &mut sampler, generate, |id| {
        if Some(id) == eos {
            return false; // the end of the text (kept in the history, not printed)
        }
        let shown = match stream.step(&tokenizer, id) {
            Ok(Some(text)) => stops.push(&text),
            Ok(None) => return true,
            Err(e) => {
                failed = Some(e);
                return false;
            }
        };
        stopped = shown.1;
        let written = write!(stdout, "{}", shown.0).and_then(|()| stdout.flush());
        written.is_ok() && !stopped
    }))?;
    if let Some(e) = failed {
        return Err(e.into());
    }
    if !stopped {
        let (tail, _) = stops.push(&stream.finish(&tokenizer)?);
        write!(stdout, "{tail}{}", stops.finish())?;
    }
    writeln!(stdout)?;
    Ok(())
}
