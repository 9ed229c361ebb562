//! [`TensorStream`]: turns the bytes of a checkpoint's files, as they arrive (a network stream,
//! file reads), into pieces of whole rows of each tensor the model uses, handed to a [`Sink`]
//! that converts and stores them (GPU buffers, or memory for the CPU backend) before the next
//! piece is read. At most one piece (≈ [`PIECE_BYTES`]) is held at a time, so loading needs the
//! same small amount of memory whatever the model's size.
//!
//! A source may leave out the long runs of unused tensors ([`super::spans`]): it says where it
//! goes on with [`TensorStream::skip_to`], which refuses to pass over a byte of a used tensor.
//!
//! It also keeps the first 4 KiB of every tensor inside the spans read for the model's
//! fingerprint.

use std::collections::BTreeMap;
use std::ops::Range;

use safetensors::Dtype;

use crate::error::{Error, Result};
use crate::load::gguf::dequant::dequantize;
use crate::load::progress::{Phase, Reporter};
use crate::load::spans::layout_spans;
use crate::model::{Config, Layout, Planned, Stored};

/// Bytes of source data gathered before they are handed on (rounded to whole rows, at least
/// one row).
pub(crate) const PIECE_BYTES: usize = 4 << 20;

/// Bytes of each tensor that go into the fingerprint.
const FINGERPRINT_PREFIX: u64 = 4096;

/// Where converted weights go.
pub(crate) trait Sink {
    /// Rows `first_row ..` of `tensor` as stored (little-endian `tensor.dtype`), whole rows; a
    /// GGUF tensor's rows decoded to f32, or its ggml blocks as the file has them where
    /// [`Sink::raw_blocks`] says so.
    fn rows(&mut self, tensor: &Planned, first_row: usize, bytes: &[u8]) -> Result<()>;

    /// Whether a GGUF `tensor` held in ggml blocks is wanted as those blocks (the GPU computes
    /// on them as stored) rather than decoded.
    fn raw_blocks(&self, _tensor: &Planned) -> bool {
        false
    }
}

/// Walks the data sections of a layout's files in order (see the module doc).
pub(crate) struct TensorStream<'a> {
    layout: &'a Layout,
    /// `spans[f]`: the bytes of file `f`'s data section a load reads ([`super::spans::spans`]).
    spans: Vec<Vec<Range<u64>>>,
    /// The file being read (its index in `layout.files`).
    file: usize,
    /// Bytes of its data section consumed.
    pos: u64,
    /// The tensor `pos` is in.
    tensor: usize,
    /// Bytes of the current tensor gathered but not handed on (less than a piece).
    staged: Vec<u8>,
    /// Rows of the current tensor handed on.
    rows_done: usize,
    /// The first bytes of every tensor, by name.
    prefixes: BTreeMap<String, Vec<u8>>,
    reporter: &'a mut Reporter,
}

impl<'a> TensorStream<'a> {
    /// A stream over `layout`'s files, reporting "upload" progress through `reporter`.
    pub(crate) fn new(layout: &'a Layout, reporter: &'a mut Reporter) -> Self {
        Self {
            layout,
            spans: layout_spans(layout),
            file: usize::MAX,
            pos: 0,
            tensor: 0,
            staged: Vec::new(),
            rows_done: 0,
            prefixes: BTreeMap::new(),
            reporter,
        }
    }

    /// Starts file `file` (its data section; the header is the reader's to skip).
    pub(crate) fn begin_file(&mut self, file: usize) {
        self.file = file;
        self.pos = 0;
        self.tensor = 0;
        self.staged.clear();
        self.rows_done = 0;
    }

    /// The next `bytes` of the current file's data section.
    pub(crate) fn feed(&mut self, sink: &mut dyn Sink, mut bytes: &[u8]) -> Result<()> {
        let header = &self.layout.files[self.file];
        while !bytes.is_empty() {
            // Past the tensors already complete (and any empty ones).
            while header.tensors.get(self.tensor).is_some_and(|t| t.end <= self.pos) {
                self.tensor += 1;
                self.rows_done = 0;
            }
            let entry = header.tensors.get(self.tensor);
            if header.gguf && entry.is_none_or(|e| self.pos < e.start) {
                // GGUF pads tensors apart to its alignment, and may end after the last one.
                let to = entry.map_or(header.size - header.data_start, |e| e.start);
                let take = ((to - self.pos) as usize).min(bytes.len());
                self.pos += take as u64;
                bytes = &bytes[take..];
                continue;
            }
            let Some(entry) = entry else {
                return Err(Error::Safetensors {
                    file: header.name.clone(),
                    reason: "more data than the header describes".into(),
                });
            };
            let within = self.pos - entry.start;
            let take = ((entry.end - self.pos) as usize).min(bytes.len());
            let (now, rest) = bytes.split_at(take);
            if within < FINGERPRINT_PREFIX
                && self.spans[self.file].iter().any(|s| s.start <= entry.start && entry.end <= s.end)
            {
                let keep = now.len().min((FINGERPRINT_PREFIX - within) as usize);
                self.prefixes.entry(entry.name.clone()).or_default().extend_from_slice(&now[..keep]);
            }
            if let Some(planned) = &self.layout.roles[self.file][self.tensor] {
                self.staged.extend_from_slice(now);
                let done = self.pos + take as u64 == entry.end;
                if done || self.staged.len() >= PIECE_BYTES.max(unit_rows(planned) * planned.file_row_bytes())
                {
                    self.hand_on(sink, planned, done)?;
                }
            }
            self.pos += take as u64;
            bytes = rest;
            self.reporter.report(Phase::Upload, &header.name, self.pos, header.size - header.data_start);
        }
        Ok(())
    }

    /// Hands the whole rows gathered so far (all of them when the tensor is `done`) to `sink`.
    fn hand_on(&mut self, sink: &mut dyn Sink, planned: &Planned, done: bool) -> Result<()> {
        let row_bytes = planned.file_row_bytes().max(1);
        // An even number of rows but at the tensor's end, so every piece starts at an even row
        // (q4's scales of a row may end mid-u32: `WeightFormat::for_shape`); whole heads where
        // a head's rows are put back in HF's order.
        let rows = self.staged.len() / row_bytes;
        let rows = if done { rows } else { rows - rows % unit_rows(planned) };
        if rows > 0 {
            let head_rows = planned.stored.map_or(0, |s| s.head_rows as usize);
            let unpermuted =
                (head_rows > 0).then(|| unpermute(&self.staged[..rows * row_bytes], row_bytes, head_rows));
            let stored = unpermuted.as_deref().unwrap_or(&self.staged[..rows * row_bytes]);
            // Decoded for the check even when the sink takes the blocks: a scale may be NaN.
            let decoded = planned.stored.map(|s| decode(s, stored));
            let piece = decoded.as_deref().unwrap_or(stored);
            if let Some(i) = first_non_finite(planned.dtype, piece) {
                return Err(Error::NonFiniteWeight {
                    tensor: planned.name.clone(),
                    index: (self.rows_done * planned.cols + i) as u64,
                });
            }
            let raw = planned.stored.is_some() && sink.raw_blocks(planned);
            sink.rows(planned, self.rows_done, if raw { stored } else { piece })?;
            self.rows_done += rows;
            self.staged.drain(..rows * row_bytes);
        }
        if done {
            self.staged.clear();
        }
        Ok(())
    }

    /// Bytes of the current file's data section read or skipped.
    #[cfg(target_arch = "wasm32")]
    pub(crate) fn position(&self) -> u64 {
        self.pos
    }

    /// The spans of file `file`'s data section to read (offsets within it): the others hold
    /// only tensors the model does not use, and may be [`Self::skip_to`]ped.
    pub(crate) fn spans(&self, file: usize) -> &[Range<u64>] {
        &self.spans[file]
    }

    /// Goes on at offset `to` of the current file's data section, the bytes before it left
    /// unread. An `Internal` error if they hold any byte of a tensor the model uses (or `to` is
    /// behind the bytes read, or past the data section's end).
    pub(crate) fn skip_to(&mut self, to: u64) -> Result<()> {
        let header = &self.layout.files[self.file];
        let len = header.size - header.data_start;
        if to < self.pos || to > len {
            return Err(Error::Internal(format!(
                "{}: cannot skip from byte {} of the data section to {to} (of {len})",
                header.name, self.pos
            )));
        }
        let roles = &self.layout.roles[self.file];
        let used = header
            .tensors
            .iter()
            .zip(roles)
            .find(|(t, r)| r.is_some() && t.end > t.start && t.start < to && t.end > self.pos);
        if let Some((t, _)) = used {
            return Err(Error::Internal(format!(
                "{}: skipping bytes {}..{to} would leave out bytes of {}, which the model uses",
                header.name, self.pos, t.name
            )));
        }
        self.pos = to;
        self.reporter.report(Phase::Upload, &header.name, self.pos, len);
        Ok(())
    }

    /// Ends the current file; fails unless its whole data section was read.
    pub(crate) fn end_file(&mut self) -> Result<()> {
        let header = &self.layout.files[self.file];
        let expected = header.size - header.data_start;
        if self.pos != expected {
            return Err(Error::Safetensors {
                file: header.name.clone(),
                reason: format!(
                    "file is truncated: its data section ended after {} of {expected} bytes",
                    self.pos
                ),
            });
        }
        Ok(())
    }

    /// The model's fingerprint: blake3 over the config, then every tensor's name, dtype, shape
    /// and first 4 KiB, in name order (so two fine-tunes of one architecture differ).
    pub(crate) fn fingerprint(&self, config: &Config) -> [u8; 32] {
        let mut h = blake3::Hasher::new();
        h.update(config.identity().as_bytes());
        let mut entries: Vec<_> = self.layout.files.iter().flat_map(|f| &f.tensors).collect();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        for e in entries {
            h.update(format!("{} {} {:?}", e.name, e.dtype, e.shape).as_bytes());
            h.update(self.prefixes.get(&e.name).map_or(&[][..], Vec::as_slice));
        }
        *h.finalize().as_bytes()
    }

    /// The progress reporter (for drivers that report downloads through the same callback).
    pub(crate) fn reporter(&mut self) -> &mut Reporter {
        self.reporter
    }
}

/// Rows a piece of `planned` holds a multiple of (but at its end): 2 (q4's scales of a row may
/// end mid-u32), or a head's rows where they are reordered.
fn unit_rows(planned: &Planned) -> usize {
    planned.stored.map_or(2, |s| (s.head_rows as usize).max(2))
}

/// Whole heads of `head_rows` rows (`row_bytes` each) in HF's order from llama.cpp's (its
/// `permute` for interleaved RoPE: file row 2j of a head is HF's row j, row 2j + 1 HF's row
/// j + head_rows/2). Rows are moved whole, so a row's ggml blocks stay as they are.
fn unpermute(bytes: &[u8], row_bytes: usize, head_rows: usize) -> Vec<u8> {
    let mut out = vec![0; bytes.len()];
    let half = head_rows / 2;
    for (r, row) in bytes.chunks_exact(row_bytes).enumerate() {
        let (head, local) = (r / head_rows, r % head_rows);
        let to = head * head_rows + local / 2 + (local % 2) * half;
        out[to * row_bytes..(to + 1) * row_bytes].copy_from_slice(row);
    }
    out
}

/// A GGUF piece as f32 bytes: ggml's blocks decoded, and A_log = ln(−A) where the file holds
/// llama.cpp's A = −exp(A_log).
fn decode(stored: Stored, bytes: &[u8]) -> Vec<u8> {
    let mut values = Vec::new();
    dequantize(stored.ty, bytes, &mut values);
    if stored.ln_neg {
        values.iter_mut().for_each(|a| *a = (-*a).ln());
    }
    bytemuck::cast_slice(&values).to_vec()
}

/// The index of the first NaN or ±Inf among `bytes` (little-endian `dtype`: F32, F16 or BF16):
/// all exponent bits set. A model with such a weight computes NaN logits.
fn first_non_finite(dtype: Dtype, bytes: &[u8]) -> Option<usize> {
    match dtype {
        Dtype::F32 => bytes
            .chunks_exact(4)
            .position(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) & 0x7f80_0000 == 0x7f80_0000),
        Dtype::F16 => bytes.chunks_exact(2).position(|b| u16::from_le_bytes([b[0], b[1]]) & 0x7c00 == 0x7c00),
        _ => bytes.chunks_exact(2).position(|b| u16::from_le_bytes([b[0], b[1]]) & 0x7f80 == 0x7f80),
    }
}
