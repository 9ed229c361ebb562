//! `webmamba replay`: runs a JSON list of session operations against one shared checkpoint
//! cache and prints one JSON object per operation — for reproducing what a chat app did.
//!
//! Ops: `{"append": [ids]}`, `{"append_text": "..."}`, `{"generate": N}` (greedy),
//! `{"rewind": LEN}`, `{"edit": [ids]}`, `{"new_session": true}`.
//! Output fields: `op`, `ids` (tokens generated), `prefilled` (tokens this op ran through the
//! model), `resumed_from` (prefix length of the restored checkpoint, or null), `checkpoints`
//! (cached positions on this session's history), `history_len`, `text` for generate, and with
//! `--store DIR` `from_store` (whether it resumed from a checkpoint another run stored).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::{Value, json};
use webmamba::sampling::Sampler;
use webmamba::store::{StoreConfig, folder::Folder};
use webmamba::{CacheConfig, GenerateOptions, Retention, Runtime, Tokenizer};

use crate::setup::{LoadArgs, checkpoint};

/// Options of `webmamba replay`.
#[derive(Args)]
pub struct ReplayArgs {
    /// Model folder or GGUF file (default: the embedded shakespeare-mamba-3m).
    #[arg(long)]
    model: Option<PathBuf>,
    /// JSON file: an array of operations.
    #[arg(long)]
    ops: PathBuf,
    /// B: tokens per checkpoint block (the JS API's `blockSize`; `--checkpoint-interval` is
    /// its old name).
    #[arg(long, alias = "checkpoint-interval", default_value_t = CacheConfig::default().block_size)]
    block_size: usize,
    /// `dense` or `sparse:K` (keep every K-th block boundary, plus prompt ends).
    #[arg(long, default_value = "dense")]
    retention: String,
    /// Cache budget in bytes (default: 64 MiB, or four checkpoints where the model's are larger).
    #[arg(long)]
    budget: Option<u64>,
    #[command(flatten)]
    load: LoadArgs,
    /// A folder of stored checkpoints shared with other runs of the same model: a prefix any
    /// run read is not read again (created if missing).
    #[arg(long)]
    store: Option<PathBuf>,
    /// Remove every stored checkpoint of `--store` first.
    #[arg(long, requires = "store")]
    store_clear: bool,
    /// Store every K-th block checkpoint (prompt ends always).
    #[arg(long, default_value_t = 1, requires = "store")]
    store_sparse_every: usize,
    /// Bytes the store may take on disk before its least recently used records go.
    #[arg(long, default_value_t = StoreConfig::default().budget_bytes, requires = "store")]
    store_budget: u64,
}

fn retention(s: &str) -> Result<Retention> {
    match s.split_once(':') {
        None if s == "dense" => Ok(Retention::Dense),
        Some(("sparse", k)) => Ok(Retention::Sparse(k.parse().context("sparse:K needs a number")?)),
        _ => bail!("--retention must be dense or sparse:K, not {s:?}"),
    }
}

fn ids(v: &Value) -> Result<Vec<u32>> {
    v.as_array()
        .context("expected an array of token ids")?
        .iter()
        .map(|x| {
            x.as_u64()
                .and_then(|x| u32::try_from(x).ok())
                .with_context(|| format!("token ids are integers from 0 to {}, not {x}", u32::MAX))
        })
        .collect()
}

pub fn run(a: ReplayArgs) -> Result<()> {
    let ops: Vec<Value> =
        serde_json::from_slice(&std::fs::read(&a.ops).with_context(|| a.ops.display().to_string())?)
            .context("--ops must be a JSON array")?;
    let checkpoint = checkpoint(a.model.as_ref())?;
    let tokenizer = checkpoint.tokenizer_json.as_deref().map(Tokenizer::from_bytes).transpose()?;
    let engine = a.load.engine(&checkpoint)?;
    let config = CacheConfig {
        block_size: a.block_size,
        retention: retention(&a.retention)?,
        budget_bytes: a.budget.unwrap_or(CacheConfig::for_model(engine.config()).budget_bytes),
    };
    let mut rt = Runtime::new(engine, config)?;
    if let Some(dir) = &a.store {
        if a.store_sparse_every == 0 {
            bail!("--store-sparse-every must be at least 1");
        }
        let config = StoreConfig { budget_bytes: a.store_budget, sparse_every: a.store_sparse_every };
        let store = rt.open_store(Box::new(Folder::open(dir)?), config);
        if a.store_clear {
            pollster::block_on(store.clear())?;
        }
        rt.set_store(Some(store));
    }
    let mut session = rt.new_session()?;
    for op in ops {
        let (name, arg) = op
            .as_object()
            .and_then(|o| o.iter().next())
            .with_context(|| format!("an op is an object with one key, not {op}"))?;
        let (before, stored_before) = (rt.stats(session)?.tokens_prefilled, rt.stats(session)?.store_hits);
        let mut generated = Vec::new();
        let mut resumed_from = None;
        match name.as_str() {
            "append" => resumed_from = pollster::block_on(rt.append(session, &ids(arg)?))?.resumed_from,
            "append_text" => {
                let tok = tokenizer.as_ref().context("append_text needs the model's tokenizer.json")?;
                let tokens = tok.encode(arg.as_str().context("append_text takes a string")?, false)?;
                resumed_from = pollster::block_on(rt.append(session, &tokens))?.resumed_from;
            }
            "edit" => resumed_from = pollster::block_on(rt.edit(session, &ids(arg)?))?.resumed_from,
            "rewind" => {
                let len = arg.as_u64().context("rewind takes a length")? as usize;
                resumed_from = pollster::block_on(rt.rewind(session, len))?.resumed_from;
            }
            "generate" => {
                let n = arg.as_u64().context("generate takes a token count")? as usize;
                let options = GenerateOptions { max_tokens: n, stop_at_eos: true };
                generated =
                    pollster::block_on(rt.generate(session, &mut Sampler::greedy(), options, |_| true))?;
            }
            "new_session" => session = rt.new_session()?,
            other => bail!("unknown op {other:?}"),
        }
        let stats = rt.stats(session)?;
        let mut line = json!({
            "op": name,
            "ids": generated,
            "prefilled": stats.tokens_prefilled - before.min(stats.tokens_prefilled),
            "resumed_from": resumed_from,
            "checkpoints": stats.checkpoints,
            "history_len": rt.history(session)?.len(),
        });
        if a.store.is_some() {
            line["from_store"] = json!(stats.store_hits > stored_before);
        }
        for warning in rt.store().map(|s| s.take_warnings()).unwrap_or_default() {
            eprintln!("warning: {warning}");
        }
        if let (Some(tok), "generate") = (&tokenizer, name.as_str()) {
            line["text"] = json!(tok.decode(&generated, true)?);
        }
        println!("{line}");
    }
    Ok(())
}
