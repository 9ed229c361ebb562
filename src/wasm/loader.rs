//! The browser's side of the streaming load ([`crate::load`]): reads a [`WebSource`]'s
//! `config.json`, `tokenizer.json`, the chat files and the index, then each safetensors header through a Range
//! request (everything is checked and every buffer allocated before a weight byte arrives),
//! then streams each file into the same [`TensorStream`] and sinks the native loaders use
//! (from where the header's read stopped, when the server ignored Range and sent it all).
//! With a GPU, the queue is awaited every [`FLUSH_BYTES`] so written pieces never pile up.
//! Whatever ends a load early (an error, a stall, its AbortSignal) drops the file being read,
//! which cancels its download.
//!
//! Integrity: each file is hashed as it streams, from its first byte
//! ([`crate::wasm::verify::Digests::check`]). The data pass reads every weight file from byte
//! 0 (the header again, 64 KiB or so, then the data), so one pass covers the whole file in
//! order, and the SHA-256 of the header bytes the layout was built from (read apart, by a Range
//! request) must be the verified stream's own. A file that fails is an `Integrity` error before
//! its cache copy is committed; an error on a file read from the offline cache marks that copy
//! damaged ([`WebSource::suspect`]).
//!
//! A file whose long runs of unused tensors ([`crate::load::spans`]: a vision tower, a
//! multi-token-prediction head) are worth skipping is read span by span instead, each with an
//! HTTP Range request (a picked file's slice), unless the caller's `integrity` option names it
//! (a whole-file digest needs the whole file) or the whole file is at hand anyway (the offline
//! cache, a server that ignores Range). Its host's published digest cannot be checked then: a
//! warning says so. A file read in spans is not kept in the offline cache.
//!
//! A GGUF file (or split set) stands for all of a folder's files ([`crate::wasm::gguf::open`]: its headers
//! give the config and layout); its data pass goes on from its header's prefix
//! ([`crate::wasm::prefix`]) and is otherwise the same.

use std::collections::HashMap;
use std::ops::Range;

use crate::chat::{ChatConfig, wants_template_file};
use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::gpu_model::FLUSH_BYTES;
use crate::load::integrity::sha256;
use crate::load::spans;
use crate::load::stream::{Sink, TensorStream};
use crate::load::{Phase, Reporter};
use crate::model::{Config, FileHeader, Layout, parse_index, shard_names};
use crate::wasm::reader::Part;
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
    /// Each weight file's header length (8 + JSON) and that header's SHA-256 as read, by name.
    pub heads: HashMap<String, (u64, [u8; 32])>,
}

/// Reads the small files and every header of the folder `source`; every file named by the
/// `integrity` option must be among those read. An error in a file read from the offline
/// cache is reported to [`WebSource::suspect`].
pub(crate) async fn open(source: &WebSource, reporter: &mut Reporter) -> Result<Opened> {
    let mut read: Vec<String> = Vec::new();
    let mut small = async |name: &str| -> Result<Option<Vec<u8>>> {
        let got = match source.read_small(name).await {
            Err(e) => return Err(suspect(source, name, e).await),
            Ok(got) => got,
        };
        let Some((bytes, warning)) = got else { return Ok(None) };
        read.push(name.to_string());
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
    let config = match Config::from_json(&config_json) {
        Ok(config) => config,
        Err(e) => return Err(suspect(source, "config.json", e).await),
    };
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
    let mut single = match source.read_head_if_any("model.safetensors", HEAD_BYTES).await {
        Ok(single) => single,
        Err(e) => return Err(suspect(source, "model.safetensors", e).await),
    };
    let index = if single.is_some() { None } else { small("model.safetensors.index.json").await? };
    let (names, weight_map) = match index {
        Some(index) => {
            let map = parse_index(&index)?;
            (shard_names(&map), Some(map))
        }
        None => (vec!["model.safetensors".to_string()], None),
    };
    let mut headers = Vec::with_capacity(names.len());
    let mut heads = HashMap::with_capacity(names.len());
    for name in &names {
        let (header, head) = match read_header(source, name, single.take()).await {
            Ok(read) => read,
            Err(e) => return Err(suspect(source, name, e).await),
        };
        headers.push(header);
        heads.insert(name.clone(), head);
    }
    source
        .digests
        .option
        .check_names(read.iter().map(String::as_str).chain(names.iter().map(String::as_str)))?;
    // Every weight file's size before its first byte: a progress bar knows the whole from here.
    for h in &headers {
        reporter.report(Phase::Download, &h.name, 0, h.size);
    }
    let layout = Layout::new(&config, headers, weight_map.as_ref())?;
    Ok(Opened { config, tokenizer_json, chat, layout, heads })
}

/// The header of weight file `name` (from `first`, its first bytes if already read), with its
/// length and SHA-256 as read.
async fn read_header(
    source: &WebSource,
    name: &str,
    first: Option<(Vec<u8>, Option<u64>)>,
) -> Result<(FileHeader, (u64, [u8; 32]))> {
    let (mut head, size) = match first {
        Some(head) => head,
        None => source.read_head(name, HEAD_BYTES).await?,
    };
    let len = FileHeader::header_len(name, &head[..head.len().min(8)], size)?;
    if (head.len() as u64) < 8 + len {
        head = source.read_head(name, 8 + len).await?.0;
    }
    let json = head.get(8..8 + len as usize).ok_or_else(|| Error::Safetensors {
        file: name.into(),
        reason: format!("file is truncated inside its {len}-byte header"),
    })?;
    let header = FileHeader::parse(name, json, size)?;
    Ok((header, (8 + len, sha256(&head[..8 + len as usize]))))
}

/// `e`, after telling `source` it happened while reading `name` (a damaged cached copy is
/// dropped: [`WebSource::suspect`]).
pub(crate) async fn suspect(source: &WebSource, name: &str, e: Error) -> Error {
    source.suspect(name, &e).await;
    e
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
            match stream_file(source, opened, f, &mut stream, sink, ctx, &mut since_flush).await {
                Ok(warning) => warnings.extend(warning.map(|w| (name.clone(), header.size, w))),
                Err(e) => return Err(suspect(source, name, e).await),
            }
        }
        stream.fingerprint(&opened.config)
    };
    for (name, size, warning) in warnings {
        reporter.warn(Phase::Download, &name, size, format!("{name}: {warning}"));
    }
    Ok(fingerprint)
}

/// Streams weight file `f` of `opened` into `stream`, checking it as it goes; returns the
/// warning of its cache write, if that failed, or that its published digest was not checked
/// (only its spans were read).
async fn stream_file(
    source: &WebSource,
    opened: &Opened,
    f: usize,
    stream: &mut TensorStream<'_>,
    sink: &mut dyn Sink,
    ctx: Option<&GpuContext>,
    since_flush: &mut u64,
) -> Result<Option<String>> {
    let header = &opened.layout.files[f];
    let name = &header.name;
    let spans = stream.spans(f).to_vec();
    stream.begin_file(f);
    // A digest the caller gave is checked: the whole file is read for it.
    let mut file = None;
    if !spans::whole(&spans, header.size - header.data_start) && source.digests.option.get(name).is_none() {
        let mut read = Pass { header, stream, sink, ctx, since_flush };
        match read_spans(source, &spans, &mut read).await? {
            Spans::Whole(opened) => file = Some(opened),
            Spans::Read(etag) => return Ok(unchecked(source, header, &spans, etag)),
        }
    }
    let mut file = match file {
        Some(file) => file,
        None => source
            .open(name)
            .await?
            .ok_or_else(|| Error::Io { path: name.clone(), reason: "the file disappeared".into() })?,
    };
    if let Some(size) = file.size.filter(|&s| s != header.size) {
        return Err(Error::Safetensors {
            file: name.clone(),
            reason: format!("the file has {size} bytes now, its header described {}", header.size),
        });
    }
    let mut check = source.digests.check(name, &file);
    if let (Some(check), Some(&(len, digest))) = (&mut check, opened.heads.get(name)) {
        check.expect_head(len, digest);
    }
    let mut check = match check {
        Some(check) => Some(source.digests.offload(check, name).await),
        None => None,
    };
    let mut pass = Pass { header, stream, sink, ctx, since_flush };
    let read: Result<()> = async {
        let mut at = 0u64;
        while let Some(piece) = file.reader.next(name).await? {
            if let Some(check) = &mut check {
                check.update(&piece).await?;
            }
            pass.take(&piece, at).await?;
            at += piece.len() as u64;
        }
        pass.stream.end_file()?;
        match check {
            Some(check) => check.finish().await,
            None => Ok(()),
        }
    }
    .await;
    if let Err(e) = read {
        // The download is cancelled and its cache copy errored, and the error waits until the
        // cache has let go of the copy: a worker ended right after it answers (Firefox) could
        // otherwise leave the whole file stored although it failed its check.
        file.reader.abandon();
        source.discard_cache_write(name, file.cache_write.take()).await;
        return Err(e);
    }
    file.reader.commit();
    Ok(source.finish_cache_write(name, file.cache_write).await)
}

/// One file's data pass: where its bytes go.
struct Pass<'p, 's> {
    header: &'p FileHeader,
    stream: &'p mut TensorStream<'s>,
    sink: &'p mut dyn Sink,
    ctx: Option<&'p GpuContext>,
    since_flush: &'p mut u64,
}

impl Pass<'_, '_> {
    /// Hands `piece`, the file's bytes from offset `at`, to the stream — less those before the
    /// stream's position (the header, or bytes of a whole-file answer a span already read) —
    /// and with a GPU waits for its queue every [`FLUSH_BYTES`].
    async fn take(&mut self, piece: &[u8], at: u64) -> Result<()> {
        let (name, size) = (&self.header.name, self.header.size);
        let end = at + piece.len() as u64;
        self.stream.reporter().report(Phase::Download, name, end.min(size), size);
        let from = self.header.data_start + self.stream.position();
        let skip = (from.saturating_sub(at) as usize).min(piece.len());
        self.stream.feed(self.sink, &piece[skip..])?;
        *self.since_flush += (piece.len() - skip) as u64;
        if let Some(ctx) = self.ctx.filter(|_| *self.since_flush >= FLUSH_BYTES) {
            ctx.flush().await?;
            *self.since_flush = 0;
        }
        Ok(())
    }
}

/// How a file's spans were read.
enum Spans {
    /// Each by itself (the rest skipped); the SHA-256 the first answer's ETag carried, if any.
    Read(Option<[u8; 32]>),
    /// The first answer was the whole file (kept from its header's read, in the offline cache,
    /// or a server that ignores Range): it is read whole, and checked, from byte 0.
    Whole(crate::wasm::reader::Opened),
}

/// Reads `spans` of the pass's file (offsets within its data section) and skips the rest: one
/// request per span, each under the stall timer. A later answer that is the whole file (a
/// server that stopped honouring Range) is read through from where the stream is, to its end.
async fn read_spans(source: &WebSource, spans: &[Range<u64>], pass: &mut Pass<'_, '_>) -> Result<Spans> {
    let (name, data_start, size) = (&pass.header.name, pass.header.data_start, pass.header.size);
    if spans.is_empty() {
        source.skip(name);
    }
    let mut etag = None;
    for (i, span) in spans.iter().enumerate() {
        let range = data_start + span.start..data_start + span.end;
        let (mut reader, mut at) = match source.open_part(name, range.clone(), size).await? {
            Part::Whole(opened) if i == 0 => return Ok(Spans::Whole(opened)),
            Part::Whole(opened) => (opened.reader, 0),
            Part::Range(reader, tag) => {
                etag = etag.or(tag);
                pass.stream.skip_to(span.start)?;
                (reader, range.start)
            }
        };
        let through = at == 0;
        while let Some(piece) = reader.next(name).await? {
            pass.take(&piece, at).await?;
            at += piece.len() as u64;
        }
        if through {
            break;
        }
        if at != range.end {
            let reason = format!(
                "the request for bytes {}..{} gave {} bytes",
                range.start,
                range.end,
                at - range.start
            );
            return Err(Error::Io { path: name.clone(), reason });
        }
    }
    pass.stream.skip_to(size - data_start)?;
    pass.stream.reporter().report(Phase::Download, name, size, size);
    pass.stream.end_file()?;
    Ok(Spans::Read(etag))
}

/// The warning for a file read in spans whose host published its SHA-256 (its listing, or the
/// ETag of a span's answer): that digest covers the whole file, and could not be checked.
fn unchecked(
    source: &WebSource,
    header: &FileHeader,
    spans: &[Range<u64>],
    etag: Option<[u8; 32]>,
) -> Option<String> {
    source.digests.published(&header.name, etag)?;
    let skipped = spans::skipped(spans, header.size - header.data_start);
    Some(format!(
        "{skipped} of its {} bytes hold only tensors the model does not use and were not downloaded, \
         so its published SHA-256 was not checked (an `integrity` entry for it has the whole file read \
         and checked)",
        header.size
    ))
}
