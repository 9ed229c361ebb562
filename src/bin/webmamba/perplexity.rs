//! `webmamba perplexity`: perplexity over a text file, llama.cpp's `llama-perplexity` convention
//! (windows of `--context` tokens from a fresh state, each window's second half scored; see
//! `webmamba::perplexity`), on the CPU or the GPU with any weight format — what a format costs
//! in quality, measured by the user on their own text.

use std::path::PathBuf;

use anyhow::{Context, Result};
use serde_json::json;

use crate::setup::{Backend, LoadArgs, checkpoint, tokenizer};

#[derive(clap::Args)]
pub struct PerplexityArgs {
    /// Model folder (config.json, weights, tokenizer.json) or GGUF file. Default: the embedded
    /// shakespeare-mamba-3m.
    #[arg(long)]
    model: Option<PathBuf>,
    /// UTF-8 text to score.
    #[arg(long)]
    text: PathBuf,
    /// Tokens per window (llama.cpp's n_ctx); the text's tokens past the last whole window are
    /// left out.
    #[arg(long, default_value_t = 512)]
    context: usize,
    #[command(flatten)]
    load: LoadArgs,
    /// One JSON object on stdout instead of the line of text.
    #[arg(long)]
    json: bool,
}

pub fn run(a: PerplexityArgs) -> Result<()> {
    let checkpoint = checkpoint(a.model.as_ref())?;
    let tokenizer = tokenizer(&checkpoint)?;
    let text = std::fs::read_to_string(&a.text).with_context(|| format!("reading {}", a.text.display()))?;
    let tokens = tokenizer.encode(&text, false)?;
    let mut e = a.load.engine(&checkpoint)?;
    let weights = match a.load.backend {
        Backend::Cpu => "f32 (CPU)".to_string(),
        Backend::Gpu => format!("{:?}", a.load.weights).to_lowercase(),
    };
    let report =
        pollster::block_on(webmamba::perplexity::perplexity(&mut e, &tokens, a.context, |done, n, ppl| {
            eprintln!("[{done}/{n}] {ppl:.4}");
        }))?;
    let (ppl, err, scored) = (report.nll.perplexity(), report.nll.uncertainty(), report.nll.count());
    if a.json {
        let out = json!({
            "perplexity": ppl,
            "uncertainty": err,
            "scored_tokens": scored,
            "text_tokens": tokens.len(),
            "windows": report.windows,
            "context": report.context,
            "per_window": report.per_window,
            "backend": e.name(),
            "weights": weights,
        });
        println!("{out}");
    } else {
        println!(
            "perplexity {ppl:.4} ± {err:.4} over {scored} tokens ({} windows of {}, second halves scored; \
             {} of {} text tokens used; {} backend, {weights} weights)",
            report.windows,
            report.context,
            report.windows * report.context,
            tokens.len(),
            e.name()
        );
    }
    Ok(())
}
