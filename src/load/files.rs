//! [`Files`]: a checkpoint's files where they can be read synchronously — bytes in memory (what
//! a caller that already has them passes), or a folder on disk (natively). Headers are read
//! first, with their sizes; then [`Files::stream`] reads each file's data section in pieces of
//! [`READ_BYTES`] into a [`TensorStream`] (only the spans it reads: long runs of tensors the model
//! does not use are skipped). Nothing reads a whole file at once.
//!
//! A model folder may come from anyone, so every file is opened through [`open_in`]: it must be
//! a regular file (not a device, FIFO or folder: `/dev/zero` would be read without end,
//! `/dev/stdin` would hang), and a symbolic link must resolve inside the folder — or, for the
//! Hugging Face cache's layout (`snapshots/<rev>/x -> ../../blobs/<hash>`), inside the same
//! repository's `blobs/` — so a hostile folder cannot make us read any other file.

use crate::error::{Error, Result};
use crate::load::progress::Phase;
use crate::load::stream::{Sink, TensorStream};
use crate::model::{FileHeader, Layout};

/// Bytes read from a file at a time.
pub(crate) const READ_BYTES: usize = 4 << 20;

/// Largest `tokenizer.json` read whole (the largest published tokenizers are ~35 MB).
pub const MAX_TOKENIZER_BYTES: u64 = 128 << 20;

/// Largest `config.json` or `model.safetensors.index.json` read whole: published ones are a few
/// KB (configs) to a few hundred KB (the index of a model with thousands of tensors). A hostile
/// file is refused long before it could grow wasm memory (which never shrinks) by much.
pub const MAX_JSON_BYTES: u64 = 16 << 20;

/// The most bytes read of small file `name`: [`MAX_TOKENIZER_BYTES`] for `tokenizer.json`,
/// [`MAX_JSON_BYTES`] for the others. The same natively and in the browser.
pub(crate) fn max_small_bytes(name: &str) -> u64 {
    if name == "tokenizer.json" { MAX_TOKENIZER_BYTES } else { MAX_JSON_BYTES }
}

/// Where a checkpoint's files are.
pub(crate) enum Files {
    /// In memory, as (file name, bytes).
    Memory(Vec<(String, Vec<u8>)>),
    /// A model folder (natively).
    #[cfg(not(target_arch = "wasm32"))]
    Dir(std::path::PathBuf),
}

impl Files {
    /// Reads a small whole file (`config.json`, `tokenizer.json`, the index); `None` when absent.
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) fn read_small(&self, name: &str) -> Result<Option<Vec<u8>>> {
        match self {
            Files::Memory(_) => Ok(self.in_memory(name).ok().map(<[u8]>::to_vec)),
            Files::Dir(dir) => {
                use std::io::Read;
                if std::fs::symlink_metadata(dir.join(name)).is_err() {
                    return Ok(None);
                }
                let (file, size, path) = open_in(dir, name)?;
                let cap = max_small_bytes(name);
                if size > cap {
                    return Err(Error::Io {
                        path: path.display().to_string(),
                        reason: format!("{size} bytes; at most {cap} are read for this file"),
                    });
                }
                let mut bytes = Vec::new();
                bytes.try_reserve_exact(size as usize).map_err(|e| io(&path, std::io::Error::other(e)))?;
                file.take(size).read_to_end(&mut bytes).map_err(|e| io(&path, e))?;
                Ok(Some(bytes))
            }
        }
    }

    /// Reads the header of safetensors file `name`.
    pub(crate) fn header(&self, name: &str) -> Result<FileHeader> {
        let size = self.size(name)?;
        let mut first8 = vec![0; 8.min(size as usize)];
        self.read_at(name, 0, &mut first8)?;
        let len = FileHeader::header_len(name, &first8, Some(size))?;
        let mut json = vec![0; len as usize];
        self.read_at(name, 8, &mut json)?;
        FileHeader::parse(name, &json, Some(size))
    }

    /// Streams the data section of every file of `layout`, in order, into `sink`: the spans the
    /// stream reads ([`TensorStream::spans`]), the long runs of unused tensors between them
    /// skipped.
    pub(crate) fn stream(
        &self,
        layout: &Layout,
        stream: &mut TensorStream<'_>,
        sink: &mut dyn Sink,
    ) -> Result<()> {
        let mut buf = vec![0; READ_BYTES];
        for (f, header) in layout.files.iter().enumerate() {
            stream.begin_file(f);
            for span in stream.spans(f).to_vec() {
                stream.skip_to(span.start)?;
                let (mut at, end) = (header.data_start + span.start, header.data_start + span.end);
                while at < end {
                    let n = ((end - at) as usize).min(READ_BYTES);
                    self.read_at(&header.name, at, &mut buf[..n])?;
                    at += n as u64;
                    stream.reporter().report(Phase::Download, &header.name, at, header.size);
                    stream.feed(sink, &buf[..n])?;
                }
            }
            stream.skip_to(header.size - header.data_start)?;
            stream.reporter().report(Phase::Download, &header.name, header.size, header.size);
            stream.end_file()?;
        }
        Ok(())
    }

    /// The bytes of in-memory file `name`.
    fn in_memory(&self, name: &str) -> Result<&[u8]> {
        let not_given = || Error::Io { path: name.into(), reason: "not among the files given".into() };
        match self {
            Files::Memory(files) => {
                files.iter().find(|(n, _)| n == name).map(|(_, b)| b.as_slice()).ok_or_else(not_given)
            }
            #[cfg(not(target_arch = "wasm32"))]
            Files::Dir(_) => Err(not_given()),
        }
    }

    pub(crate) fn size(&self, name: &str) -> Result<u64> {
        match self {
            Files::Memory(_) => Ok(self.in_memory(name)?.len() as u64),
            #[cfg(not(target_arch = "wasm32"))]
            Files::Dir(dir) => Ok(open_in(dir, name)?.1),
        }
    }

    /// Fills `buf` from `name` at `offset`.
    pub(crate) fn read_at(&self, name: &str, offset: u64, buf: &mut [u8]) -> Result<()> {
        match self {
            Files::Memory(_) => {
                let bytes = self.in_memory(name)?;
                let range = offset as usize..offset as usize + buf.len();
                buf.copy_from_slice(
                    bytes
                        .get(range)
                        .ok_or_else(|| Error::Io { path: name.into(), reason: "read past the end".into() })?,
                );
                Ok(())
            }
            #[cfg(not(target_arch = "wasm32"))]
            Files::Dir(dir) => {
                use std::io::{Read, Seek, SeekFrom};
                let (mut file, _, path) = open_in(dir, name)?;
                file.seek(SeekFrom::Start(offset)).map_err(|e| io(&path, e))?;
                file.read_exact(buf).map_err(|e| io(&path, e))
            }
        }
    }
}

/// Opens file `name` of model folder `dir` for reading, with its size: only a regular file, and
/// a symbolic link only when it resolves inside `dir` or, when `dir` is a Hugging Face cache
/// snapshot (`…/snapshots/<rev>`), inside that repository's `blobs/`.
#[cfg(not(target_arch = "wasm32"))]
fn open_in(dir: &std::path::Path, name: &str) -> Result<(std::fs::File, u64, std::path::PathBuf)> {
    let path = dir.join(name);
    let refuse = |reason: &str| Error::Io { path: path.display().to_string(), reason: reason.into() };
    let link = std::fs::symlink_metadata(&path).map_err(|e| io(&path, e))?;
    if link.file_type().is_symlink() {
        let target = std::fs::canonicalize(&path).map_err(|e| io(&path, e))?;
        let home = std::fs::canonicalize(dir).map_err(|e| io(dir, e))?;
        let blobs = (home.parent().and_then(|p| p.file_name()) == Some("snapshots".as_ref()))
            .then(|| home.parent().and_then(|p| p.parent()).map(|repo| repo.join("blobs")))
            .flatten();
        if !(target.starts_with(&home) || blobs.is_some_and(|b| target.starts_with(b))) {
            return Err(refuse(
                "is a symbolic link to a file outside the model folder (only links inside it, or a \
                 Hugging Face cache snapshot's links into its blobs/, are followed)",
            ));
        }
    }
    // Checked before opening (opening a FIFO blocks until a writer comes) and again on the
    // opened file, so what is read is what was checked.
    if !std::fs::metadata(&path).map_err(|e| io(&path, e))?.is_file() {
        return Err(refuse("is not a regular file"));
    }
    let file = std::fs::File::open(&path).map_err(|e| io(&path, e))?;
    let meta = file.metadata().map_err(|e| io(&path, e))?;
    if !meta.is_file() {
        return Err(refuse("is not a regular file"));
    }
    Ok((file, meta.len(), path))
}

#[cfg(not(target_arch = "wasm32"))]
fn io(path: &std::path::Path, e: std::io::Error) -> Error {
    Error::Io { path: path.display().to_string(), reason: e.to_string() }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use std::collections::BTreeMap;

    use super::Files;
    use crate::error::{Error, Result};
    use crate::load::progress::Reporter;
    use crate::load::stream::{Sink, TensorStream};
    use crate::model::{Config, Layout, Planned};

    /// Counts the bytes each tensor is given.
    #[derive(Default)]
    struct Count(BTreeMap<String, usize>);

    impl Sink for Count {
        fn rows(&mut self, tensor: &Planned, _first_row: usize, bytes: &[u8]) -> Result<()> {
            *self.0.entry(tensor.name.clone()).or_default() += bytes.len();
            Ok(())
        }
    }

    /// The layout of the tiny Qwen3.5 checkpoint with a vision tower at the end of its file.
    fn vl_layout() -> (Config, Layout, Files) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/qwen35-vl-bf16");
        let config = Config::from_json(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
        let files = Files::Dir(dir);
        let header = files.header("model.safetensors").unwrap();
        let layout = Layout::new(&config, vec![header], None).unwrap();
        (config, layout, files)
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)] // a list of one span
    fn the_vision_tower_is_skipped_and_skip_to_refuses_used_bytes() {
        let (config, layout, files) = vl_layout();
        let header = &layout.files[0];
        let len = header.size - header.data_start;
        let vision =
            header.tensors.iter().filter(|t| t.name.starts_with("model.visual.")).collect::<Vec<_>>();
        let mut reporter = Reporter::silent();
        let mut stream = TensorStream::new(&layout, &mut reporter);
        assert_eq!(stream.spans(0), [0..vision[0].start], "the span ends where the vision tower starts");
        assert_eq!(vision.last().unwrap().end, len);

        // Skipping a used tensor's bytes (the first, or the text model's last) is refused.
        stream.begin_file(0);
        assert!(matches!(stream.skip_to(64), Err(Error::Internal(_))));
        assert!(matches!(stream.skip_to(len), Err(Error::Internal(_))));
        // Read by the native loader: every used tensor whole, and the same fingerprint as when
        // the vision tower is read through.
        let mut sink = Count::default();
        files.stream(&layout, &mut stream, &mut sink).unwrap();
        let skipped = stream.fingerprint(&config);
        let planned = layout.roles[0].iter().flatten().collect::<Vec<_>>();
        assert!(planned.iter().all(|p| sink.0.get(&p.name) == Some(&(p.bytes() as usize))));

        let mut reporter = Reporter::silent();
        let mut through = TensorStream::new(&layout, &mut reporter);
        through.begin_file(0);
        let mut bytes = vec![0; len as usize];
        files.read_at("model.safetensors", header.data_start, &mut bytes).unwrap();
        through.feed(&mut Count::default(), &bytes).unwrap();
        through.end_file().unwrap();
        assert_eq!(through.fingerprint(&config), skipped);
        // Skipping backwards is refused too.
        assert!(matches!(through.skip_to(0), Err(Error::Internal(_))));
    }
}
