//! A GGUF model opened for loading: one file, or llama.cpp's split set
//! (`<name>-00001-of-0000N.gguf`, each part's header naming its place in `split.no` /
//! `split.count`, the first holding the model's metadata); each part's header read from a
//! growing prefix; the model mapped back to HF's config and names ([`super::arch`]); and each
//! part given to [`crate::model::Layout`] as a [`FileHeader`] whose data section is the file's
//! (padding between tensors skipped by the stream).

use safetensors::Dtype;

use crate::error::{Error, Result};
use crate::load::files::Files;
use crate::load::gguf::arch::{self, Mapped};
use crate::load::gguf::header::{GgufHeader, Limits, Parsed, parse};
use crate::load::gguf::types::GgmlType;
use crate::load::gguf::value::Metadata;
use crate::model::{FileHeader, TensorEntry};

/// Bytes of the first read of a header (most are smaller: a 250k-token vocabulary with its
/// merges is ~10 MB, read in a few doublings).
pub(crate) const FIRST_READ: u64 = 1 << 20;

/// Parts a split set may have (llama.cpp's `gguf-split` writes `-%05d-of-%05d`).
const MAX_PARTS: u64 = 99_999;

/// A GGUF model's files, as the loaders read them.
pub(crate) struct Opened {
    /// Each part as a [`FileHeader`] (HF names), in order.
    pub files: Vec<FileHeader>,
    /// The `config.json` HF would have.
    pub config_json: Vec<u8>,
    /// The first part's metadata (tokenizer, chat template).
    #[allow(dead_code)] // the tokenizer's (src/load/gguf/tokenizer.rs, being written)
    pub metadata: Metadata,
}

/// Reads file `name`'s GGUF header from `files` (`size` bytes), asking for more as needed.
pub(crate) fn read_header(files: &Files, name: &str, size: u64) -> Result<GgufHeader> {
    let limits = Limits::default();
    let mut want = FIRST_READ.min(size);
    loop {
        let mut prefix = vec![0; want as usize];
        files.read_at(name, 0, &mut prefix)?;
        match parse(name, &prefix, Some(size), limits)? {
            Parsed::Done(h) => return Ok(h),
            Parsed::NeedMore(n) => want = next_read(n, want, size),
        }
    }
}

/// How many bytes to ask for next when `need` are needed and `had` were read (doubling, so a
/// header read piece by piece costs few requests).
pub(crate) fn next_read(need: u64, had: u64, size: u64) -> u64 {
    need.max(had.saturating_mul(2)).min(size).min(Limits::default().header_bytes)
}

/// The names of the split set file `name` opens: itself alone, or every part when it is the
/// first of one (`-00001-of-0000N.gguf`). The parts are in `name`'s folder by construction.
pub(crate) fn part_names(name: &str) -> Result<Vec<String>> {
    let Some((stem, of)) = split_suffix(name) else { return Ok(vec![name.to_string()]) };
    let (no, count) = of;
    if no != 1 {
        return Err(Error::Gguf {
            file: name.into(),
            reason: format!(
                "part {no} of a {count}-part split set: open the first, {stem}-00001-of-{count:05}.gguf"
            ),
        });
    }
    Ok((1..=count).map(|i| format!("{stem}-{i:05}-of-{count:05}.gguf")).collect())
}

/// `(stem, (part, parts))` of a split part's name `<stem>-NNNNN-of-MMMMM.gguf`.
fn split_suffix(name: &str) -> Option<(&str, (u64, u64))> {
    let base = name.strip_suffix(".gguf")?;
    let (rest, count) = base.rsplit_once("-of-")?;
    let (stem, no) = rest.rsplit_once('-')?;
    let digits = |s: &str| s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(no) || !digits(count) {
        return None;
    }
    let (no, count): (u64, u64) = (no.parse().ok()?, count.parse().ok()?);
    (no >= 1 && no <= count && count <= MAX_PARTS).then_some((stem, (no, count)))
}

/// The model of the parts `(name, size, header)`, in order: each part's place checked against
/// its `split.*` metadata, the tensors mapped to HF's names.
pub(crate) fn assemble(parts: Vec<(String, u64, GgufHeader)>) -> Result<Opened> {
    let count = parts.len() as u64;
    let mut total = 0u64;
    for (i, (name, _, h)) in parts.iter().enumerate() {
        let fail = |reason: String| Error::Gguf { file: name.clone(), reason };
        let no = h.metadata.opt_uint("split.no", MAX_PARTS)?;
        let of = h.metadata.opt_uint("split.count", MAX_PARTS)?;
        match (no, of) {
            (None, None) if count == 1 => {}
            (Some(no), Some(of)) if no == i as u64 && of == count => {}
            _ => {
                return Err(fail(format!(
                    "its split.no / split.count ({no:?} / {of:?}) do not make it part {i} (from 0) of {count}"
                )));
            }
        }
        total += h.tensors.len() as u64;
    }
    let first = &parts[0].2;
    if let Some(n) = first.metadata.opt_uint("split.tensors.count", u64::MAX)?.filter(|&n| n != total) {
        return Err(Error::Gguf {
            file: parts[0].0.clone(),
            reason: format!("split.tensors.count says {n} tensors; the {count} parts hold {total}"),
        });
    }
    let all: Vec<_> = parts.iter().flat_map(|(_, _, h)| &h.tensors).collect();
    let Mapped { config_json, names } = arch::map(&first.metadata, &all)?;
    let mut names = names.into_iter();
    let mut files = Vec::with_capacity(parts.len());
    for (name, size, h) in &parts {
        let renamed: Vec<_> = names.by_ref().take(h.tensors.len()).collect();
        files.push(as_file_header(name, *size, h, renamed)?);
    }
    Ok(Opened { files, config_json, metadata: parts.into_iter().next().expect("a part").2.metadata })
}

/// Opens the GGUF model whose (first) file is `name` in `files`.
pub(crate) fn open(files: &Files, name: &str) -> Result<Opened> {
    let mut parts = Vec::new();
    for part in part_names(name)? {
        let size = files.size(&part)?;
        let header = read_header(files, &part, size)?;
        parts.push((part, size, header));
    }
    assemble(parts)
}

/// A part's tensors as a [`FileHeader`] under their HF names (`renamed`, same order; unused
/// ones under their own).
fn as_file_header(
    name: &str,
    size: u64,
    header: &GgufHeader,
    renamed: Vec<Option<arch::Renamed>>,
) -> Result<FileHeader> {
    let data_len = size - header.data_start;
    let mut tensors = Vec::with_capacity(header.tensors.len());
    for (i, (t, renamed)) in header.tensors.iter().zip(renamed).enumerate() {
        let shape = t
            .dims
            .iter()
            .rev()
            .map(|&d| usize::try_from(d))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|_| Error::Gguf {
                file: name.into(),
                reason: format!("tensor {} is too large", t.name),
            })?;
        // A type webmamba does not compute on has no known size: up to the next tensor.
        let end = match t.bytes {
            Some(b) => t.offset + b,
            None => header.tensors.get(i + 1).map_or(data_len, |n| n.offset),
        };
        let (name, stored, dtype) = match &renamed {
            Some(_) if !t.ty.is_supported() => {
                return Err(Error::UnsupportedDtype {
                    tensor: t.name.clone(),
                    dtype: format!(
                        "{} (a GGUF type webmamba does not compute on: F32, F16, BF16, Q8_0, Q4_0, \
                         Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K are)",
                        t.ty
                    ),
                });
            }
            Some(r) => {
                let stored = arch::stored(t.ty, r);
                let dtype = match (stored, t.ty) {
                    (None, GgmlType::F16) => Dtype::F16,
                    (None, GgmlType::Bf16) => Dtype::BF16,
                    _ => Dtype::F32,
                };
                (r.name.clone(), stored, dtype)
            }
            None => (t.name.clone(), None, Dtype::U8),
        };
        tensors.push(TensorEntry { name, dtype, shape, start: t.offset, end, stored });
    }
    Ok(FileHeader { name: name.to_string(), data_start: header.data_start, size, tensors, gguf: true })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_names_are_llama_cpps() {
        assert_eq!(part_names("m.gguf").unwrap(), ["m.gguf"]);
        assert_eq!(
            part_names("Granite-Q4_K_M-00001-of-00003.gguf").unwrap(),
            [
                "Granite-Q4_K_M-00001-of-00003.gguf",
                "Granite-Q4_K_M-00002-of-00003.gguf",
                "Granite-Q4_K_M-00003-of-00003.gguf"
            ]
        );
        assert!(part_names("m-00002-of-00003.gguf").is_err(), "a later part is not opened alone");
        assert_eq!(
            part_names("m-1-of-3.gguf").unwrap(),
            ["m-1-of-3.gguf"],
            "not llama.cpp's pattern: one file"
        );
        assert_eq!(part_names("m-00004-of-00003.gguf").unwrap(), ["m-00004-of-00003.gguf"]);
    }
}
