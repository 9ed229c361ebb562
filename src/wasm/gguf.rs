//! GGUF in the browser's loaders ([`crate::load::gguf`]): which file a load opens, and its
//! header read into the same [`loader::Opened`] a Hugging Face folder gives, so the weights then
//! stream as safetensors do (`loader::stream`: one pass per file, checked as it goes, into the
//! offline cache, unused tensors' spans skipped).
//!
//! The file is a URL ending in `.gguf` (its folder is where split parts are), the `file` load
//! option (a plain name in the folder), the `quant` option (the folder's one GGUF file of that
//! quantization type, chosen from the Hub's tree listing or the picked files' names), or a
//! folder's only GGUF file where it has no `config.json`. A split set is opened from its first
//! part (`-00001-of-0000N.gguf`); the other parts' names are derived from that name, in the same
//! folder — never read from the file.
//!
//! Each part's header is read from a growing prefix (a first request of
//! [`FIRST_READ`] bytes, then Range requests for the bytes [`next_read`] says, appended) and the
//! prefix is kept for the data pass, which asks only for the rest of the file
//! ([`crate::wasm::prefix`]): the header's bytes cross the network once.

use std::collections::HashMap;

use crate::chat::ChatConfig;
use crate::error::{Error, Result};
use crate::load::gguf::header::{GgufHeader, Limits, MAGIC, Parsed, parse};
use crate::load::gguf::open::{FIRST_READ, assemble, choose, next_read, part_names};
use crate::load::gguf::tokenizer;
use crate::load::integrity::sha256;
use crate::load::{Phase, Reporter};
use crate::model::{Checkpoint, Config, Layout};
use crate::wasm::gguf_choice::{BYTES_NAME, Choice};
use crate::wasm::loader::{self, Opened};
use crate::wasm::web_source::WebSource;

/// The GGUF file `source` is to read, if any (see the module doc).
pub(crate) async fn chosen(source: &WebSource) -> Result<Option<String>> {
    match &source.choice {
        Choice::File(name) => Ok(Some(name.clone())),
        Choice::Quant(quant) => match source.names() {
            Some(names) => choose(&names, Some(quant)),
            None => Err(Error::InvalidInput(format!(
                "quant {quant:?} chooses among the folder's files, and this folder's are not known: that \
                 takes picked files or a URL in the Hub's layout (…/<org>/<name>/resolve/<revision>/) \
                 whose file listing can be read; give the file's name as options.file instead"
            ))),
        },
        Choice::Folder => match source.names() {
            Some(names) if !names.iter().any(|n| n == "config.json") => choose(&names, None),
            _ => Ok(None),
        },
    }
}

/// Reads GGUF file `name` of `source` (every part of its split set): each header, checked, as
/// the model's config and layout; each prefix kept for the data pass. An error in a file read
/// from the offline cache is reported to [`WebSource::suspect`].
pub(crate) async fn open(source: &WebSource, name: &str, reporter: &mut Reporter) -> Result<Opened> {
    let names = part_names(name)?;
    let count = names.len();
    let mut parts = Vec::with_capacity(count);
    let mut heads = HashMap::with_capacity(count);
    for (i, part) in names.iter().enumerate() {
        let (prefix, size, header) = match read_header(source, part).await {
            Ok(Some(read)) => read,
            Ok(None) => {
                let reason = match i {
                    0 => "the folder has no such file".to_string(),
                    _ => format!("part {} of the {count}-part split set {name} is not in its folder", i + 1),
                };
                return Err(Error::Io { path: part.clone(), reason });
            }
            Err(e) => return Err(loader::suspect(source, part, e).await),
        };
        // The data pass must see these bytes again first (they are where the layout came from).
        let len = header.data_start.min(prefix.len() as u64);
        heads.insert(part.clone(), (len, sha256(&prefix[..len as usize])));
        source.keep_prefix(part, prefix, size);
        parts.push((part.clone(), size, header));
    }
    source.digests.option.check_names(names.iter().map(String::as_str))?;
    for (part, size, _) in &parts {
        reporter.report(Phase::Download, part, 0, *size);
    }
    let opened = match assemble(parts) {
        Ok(opened) => opened,
        Err(e) => return Err(loader::suspect(source, name, e).await),
    };
    let config = Config::from_json(&opened.config_json)?;
    let layout = Layout::new(&config, opened.files, None)?;
    // The tokenizer, chat template and special tokens from the `tokenizer.*` metadata, as the HF
    // files a folder would have (as `Checkpoint::from_gguf` makes them natively).
    let tok = tokenizer::from_metadata(&opened.metadata)?;
    let chat = ChatConfig::from_files(
        Some(&tok.tokenizer_config_json),
        None,
        tok.generation_config_json.as_deref(),
        Some(&opened.config_json),
    )?;
    Ok(Opened { config, tokenizer_json: tok.tokenizer_json, chat, layout, heads })
}

/// Part `name`'s header, from a prefix of the file grown until it holds it: the prefix, the
/// file's size and the header; `None` when the folder has no such file.
async fn read_header(source: &WebSource, name: &str) -> Result<Option<(Vec<u8>, u64, GgufHeader)>> {
    let Some((mut prefix, size)) = source.read_head_if_any(name, FIRST_READ).await? else { return Ok(None) };
    let size = size.ok_or_else(|| Error::Io {
        path: name.into(),
        reason: "the server does not say the file's size (a Content-Range or Content-Length it hides), \
                 which a GGUF file's header needs"
            .into(),
    })?;
    loop {
        match parse(name, &prefix, Some(size), Limits::default())? {
            Parsed::Done(header) => return Ok(Some((prefix, size, header))),
            Parsed::NeedMore(need) => {
                let had = prefix.len() as u64;
                let want = next_read(need, had, size);
                if want <= had {
                    return Err(Error::Gguf {
                        file: name.into(),
                        reason: format!("its header needs {need} bytes; {had} were read and no more can be"),
                    });
                }
                let more = source.read_more(name, had..want, size).await?;
                if more.is_empty() {
                    return Err(Error::Io {
                        path: name.into(),
                        reason: format!("no bytes came for the file's bytes {had}..{want} (of {size})"),
                    });
                }
                prefix.extend(more);
            }
        }
    }
}

/// Whether `Model.load`'s bytes are a GGUF file: `weights` starting with `GGUF` and no config
/// (the file holds its own). A config with GGUF weights, or none with other weights, is
/// `InvalidInput`.
pub(crate) fn bytes_are_gguf(config: Option<&[u8]>, weights: &[u8]) -> Result<bool> {
    let gguf = weights.starts_with(MAGIC);
    match (config, gguf) {
        (Some(_), true) => Err(Error::InvalidInput(
            "the weights are a GGUF file, which holds its own config: pass null as the config".into(),
        )),
        (None, false) => Err(Error::InvalidInput(
            "config is null, which only GGUF weights may be (these do not start with \"GGUF\"): give \
             config.json's bytes for safetensors weights"
                .into(),
        )),
        _ => Ok(gguf),
    }
}

/// `Model.load`'s GGUF bytes as a checkpoint; `tokenizer` (a `tokenizer.json`), when given,
/// stands in for the file's own.
pub(crate) fn checkpoint(weights: Vec<u8>, tokenizer: Option<Vec<u8>>) -> Result<Checkpoint> {
    let mut checkpoint = Checkpoint::from_gguf_bytes(BYTES_NAME, weights)?;
    if tokenizer.is_some() {
        checkpoint.tokenizer_json = tokenizer;
    }
    Ok(checkpoint)
}
