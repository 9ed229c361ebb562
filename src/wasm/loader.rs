//! The browser's side of the streaming load ([`crate::load`]): reads a [`WebSource`]'s
//! `config.json`, `tokenizer.json`, the chat files and the index, then each safetensors header through a Range
//! request (everything is checked and every buffer allocated before a weight byte arrives),
//! then streams each file into the same [`TensorStream`] and sinks the native loaders use
//! (from where the header's read stopped, when the server ignored Range and sent it all).
//! With a GPU, the queue is awaited every [`FLUSH_BYTES`] so written pieces never pile up.
//! Whatever ends a load early (an error, a stall, its AbortSignal) drops the file being read,
//! which cancels its download.

use crate::chat::{ChatConfig, wants_template_file};
use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::gpu_model::FLUSH_BYTES;
use crate::load::stream::{Sink, TensorStream};
use crate::load::{Phase, Reporter};
use crate::model::{Config, FileHeader, Layout, parse_index, shard_names};
use crate::wasm::web_source::WebSource;

/// Bytes asked for when reading a header: enough for the headers of models with thousands of
/// tensors; a larger header costs a second request.
const HEAD_BYTES: u64 = 64 << 10;

/// A checkpoint whose headers are read and checked.
pub(crate) struct Opened {
    pub config: Config,
    pub tokenizer_json: Option<Vec<u8>>,
    /// The chat files' settings (`tokenizer_config.json`, `chat_template.jinja`,
    /// `generation_config.json`, each when the folder has it).
    pub chat: ChatConfig,
    pub layout: Layout,
}

/// Reads the small files and every header of the folder `source`.
pub(crate) async fn open(source: &WebSource, reporter: &mut Reporter) -> Result<Opened> {
    let mut small = async |name: &str| -> Result<Option<Vec<u8>>> {
        let Some((bytes, warning)) = source.read_small(name).await? else { return Ok(None) };
        let len = bytes.len() as u64;
        reporter.report(Phase::Download, name, len, len);
        if let Some(w) = warning {
            reporter.warn(Phase::Download, name, len, format!("{name}: {w}"));
        }
        Ok(Some(bytes))
    };
    let config_json = small("config.json").await?.ok_or_else(|| Error::Io {
        path: "config.json".into(),
        reason: "the model folder has no config.json".into(),
    })?;
    let config = Config::from_json(&config_json)?;
    let tokenizer_json = small("tokenizer.json").await?;
    let tokenizer_config = small("tokenizer_config.json").await?;
    let chat_template = match wants_template_file(tokenizer_config.as_deref()) {
        true => small("chat_template.jinja").await?,
        false => None,
    };
    let generation_config = small("generation_config.json").await?;
    let chat = ChatConfig::from_files(
        tokenizer_config.as_deref(),
        chat_template.as_deref(),
        generation_config.as_deref(),
        Some(&config_json),
    )?;
    // `model.safetensors` first, as natively: asking a single-file folder for an index it does
    // not have would be a failed request (a red line in the page's console) on every load.
    let mut single = source.read_head_if_any("model.safetensors", HEAD_BYTES).await?;
    let index = if single.is_some() { None } else { small("model.safetensors.index.json").await? };
    let (names, weight_map) = match index {
        Some(index) => {
            let map = parse_index(&index)?;
            (shard_names(&map), Some(map))
        }
        None => (vec!["model.safetensors".to_string()], None),
    };
    let mut headers = Vec::with_capacity(names.len());
    for name in &names {
        let (mut head, size) = match single.take() {
            Some(head) => head,
            None => source.read_head(name, HEAD_BYTES).await?,
        };
        let len = FileHeader::header_len(name, &head[..head.len().min(8)], size)?;
        if (head.len() as u64) < 8 + len {
            head = source.read_head(name, 8 + len).await?.0;
        }
        let json = head.get(8..8 + len as usize).ok_or_else(|| Error::Safetensors {
            file: name.clone(),
            reason: format!("file is truncated inside its {len}-byte header"),
        })?;
        headers.push(FileHeader::parse(name, json, size)?);
    }
    // Every weight file's size before its first byte: a progress bar knows the whole from here.
    for h in &headers {
        reporter.report(Phase::Download, &h.name, 0, h.size);
    }
    let layout = Layout::new(&config, headers, weight_map.as_ref())?;
    Ok(Opened { config, tokenizer_json, chat, layout })
}

/// Streams every file of `opened` into `sink`; with `ctx`, waits for the GPU queue every
/// [`FLUSH_BYTES`]. Returns the model's fingerprint.
pub(crate) async fn stream(
    source: &WebSource,
    opened: &Opened,
    sink: &mut dyn Sink,
    ctx: Option<&GpuContext>,
    reporter: &mut Reporter,
) -> Result<[u8; 32]> {
    let layout = &opened.layout;
    let mut warnings = Vec::new();
    let fingerprint = {
        let mut stream = TensorStream::new(layout, reporter);
        let mut since_flush = 0u64;
        for (f, header) in layout.files.iter().enumerate() {
            let name = &header.name;
            let mut file = source
                .open(name)
                .await?
                .ok_or_else(|| Error::Io { path: name.clone(), reason: "the file disappeared".into() })?;
            if let Some(size) = file.size.filter(|&s| s != header.size) {
                return Err(Error::Safetensors {
                    file: name.clone(),
                    reason: format!("the file has {size} bytes now, its header described {}", header.size),
                });
            }
            stream.begin_file(f);
            let mut at = 0u64;
            while let Some(piece) = file.reader.next(name).await? {
                let start = at;
                at += piece.len() as u64;
                stream.reporter().report(Phase::Download, name, at.min(header.size), header.size);
                let skip = (header.data_start.saturating_sub(start) as usize).min(piece.len());
                // On any error, `file` drops here: its download is cancelled.
                stream.feed(sink, &piece[skip..])?;
                since_flush += piece.len() as u64;
                if let Some(ctx) = ctx.filter(|_| since_flush >= FLUSH_BYTES) {
                    ctx.flush().await?;
                    since_flush = 0;
                }
            }
            stream.end_file()?;
            if let Some(w) = source.finish_cache_write(name, file.cache_write).await {
                warnings.push((name.clone(), header.size, w));
            }
        }
        stream.fingerprint(&opened.config)
    };
    for (name, size, warning) in warnings {
        reporter.warn(Phase::Download, &name, size, format!("{name}: {warning}"));
    }
    Ok(fingerprint)
}
