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
use crate::load::gguf::arch_common::Renamed;
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

/// Whether `name` is a GGUF file's name (`.gguf`, any case).
#[cfg(any(target_arch = "wasm32", test))]
pub(crate) fn is_gguf_name(name: &str) -> bool {
    name.len() > 5
        && name.is_char_boundary(name.len() - 5)
        && name[name.len() - 5..].eq_ignore_ascii_case(".gguf")
}

/// `name` (a load's `file` option, or the last part of a `.gguf` URL) if it is a plain GGUF file
/// name: no folder, no URL syntax, ending in `.gguf`; else `InvalidInput`.
#[cfg(any(target_arch = "wasm32", test))]
pub(crate) fn plain_name(name: &str, what: &str) -> Result<String> {
    let plain = !name.is_empty()
        && !name.contains(['/', '\\', '?', '#', '\0'])
        && name != "."
        && name != ".."
        && is_gguf_name(name);
    if !plain {
        return Err(Error::InvalidInput(format!(
            "{what} must be the plain name of a .gguf file in the folder (no path, no URL), not {name:?}"
        )));
    }
    Ok(name.to_string())
}

/// The GGUF file to open among a folder's file `names` (the picked files, or the Hub's tree
/// listing): the one whose name holds `quant` (a quantization type such as `Q4_K_M`, any case)
/// as a whole word — not followed by a letter, digit or `_`, so `Q4_0` is not `Q4_0_4_4`, nor
/// preceded by a letter or digit, so `Q4_K` is not `IQ4_K` — or with no `quant`, the folder's
/// only one. A split set counts once, as its first part (`-00001-of-0000N.gguf`). `Ok(None)`
/// when there is no `quant` and no GGUF file; no match or several is `InvalidInput` listing
/// the candidates.
#[cfg(any(target_arch = "wasm32", test))]
pub(crate) fn choose(names: &[String], quant: Option<&str>) -> Result<Option<String>> {
    let mut files: Vec<&String> = names
        .iter()
        .filter(|n| is_gguf_name(n) && split_suffix(n).is_none_or(|(_, (no, _))| no == 1))
        .collect();
    files.sort();
    files.dedup();
    let matching: Vec<&String> = match quant {
        Some(q) => files.iter().copied().filter(|n| holds_word(n, q)).collect(),
        None => files.clone(),
    };
    let list = |v: &[&String]| v.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(", ");
    match (matching.as_slice(), quant) {
        ([one], _) => Ok(Some(one.to_string())),
        ([], None) => Ok(None),
        ([], Some(q)) if files.is_empty() => {
            Err(Error::InvalidInput(format!("quant {q:?}: the folder has no .gguf file")))
        }
        ([], Some(q)) => Err(Error::InvalidInput(format!(
            "quant {q:?}: no .gguf file of the folder is of that type; it has {}",
            list(&files)
        ))),
        (several, Some(q)) => Err(Error::InvalidInput(format!(
            "quant {q:?} matches {} .gguf files: {} (give the one to load as `file`)",
            several.len(),
            list(several)
        ))),
        (several, None) => Err(Error::InvalidInput(format!(
            "the folder has {} .gguf files: {} (choose one with `quant` or `file`)",
            several.len(),
            list(several)
        ))),
    }
}

/// Whether `name` holds `word` (any case) with no letter or digit before it and no letter,
/// digit or `_` after it.
#[cfg(any(target_arch = "wasm32", test))]
fn holds_word(name: &str, word: &str) -> bool {
    let (name, word) = (name.to_ascii_lowercase(), word.to_ascii_lowercase());
    if word.is_empty() {
        return false;
    }
    let bytes = name.as_bytes();
    name.match_indices(&word).any(|(at, _)| {
        let before = at.checked_sub(1).map(|i| bytes[i]);
        let after = bytes.get(at + word.len()).copied();
        !before.is_some_and(|b| b.is_ascii_alphanumeric())
            && !after.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
    })
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
    renamed: Vec<Option<Renamed>>,
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
    fn choose_picks_one_quant_or_lists_the_candidates() {
        let names: Vec<String> = [
            "README.md",
            "config.json",
            "Model-Q4_0.gguf",
            "Model-Q4_0_4_4.gguf",
            "Model-IQ4_XS.gguf",
            "Model-Q4_K_M.gguf",
            "Model-Q4_K_S.gguf",
            "Model-Q8_0-00001-of-00002.gguf",
            "Model-Q8_0-00002-of-00002.gguf",
            "Model.BF16.GGUF",
        ]
        .map(String::from)
        .to_vec();
        let pick = |q: &str| choose(&names, Some(q));
        assert_eq!(pick("Q4_K_M").unwrap().as_deref(), Some("Model-Q4_K_M.gguf"));
        assert_eq!(pick("q4_k_m").unwrap().as_deref(), Some("Model-Q4_K_M.gguf"), "any case");
        assert_eq!(pick("Q4_0").unwrap().as_deref(), Some("Model-Q4_0.gguf"), "not Q4_0_4_4");
        assert_eq!(
            pick("Q8_0").unwrap().as_deref(),
            Some("Model-Q8_0-00001-of-00002.gguf"),
            "a split set's first part"
        );
        assert_eq!(pick("bf16").unwrap().as_deref(), Some("Model.BF16.GGUF"));
        assert_eq!(pick("XS").unwrap().as_deref(), Some("Model-IQ4_XS.gguf"));
        let none = pick("Q6_K").unwrap_err().to_string();
        assert!(none.contains("no .gguf file") && none.contains("Model-Q4_K_S.gguf"), "{none}");
        assert!(!none.contains("00002-of"), "later parts are not candidates: {none}");
        let several = pick("Q4_K").unwrap_err();
        assert!(matches!(several, Error::InvalidInput(_)), "{several}");
        let several = pick("model").unwrap_err().to_string();
        assert!(several.contains("matches 7"), "{several}");
        assert!(pick("Q4").is_err(), "Q4 is not a type of any file here");
        assert!(choose(&names, None).unwrap_err().to_string().contains("choose one with `quant` or `file`"));
        assert_eq!(choose(&names[..3], None).unwrap().as_deref(), Some("Model-Q4_0.gguf"), "the only one");
        assert_eq!(choose(&names[..2], None).unwrap(), None, "no GGUF file");
        assert!(choose(&names[..2], Some("Q4_0")).is_err());
    }

    #[test]
    fn a_file_option_is_a_plain_gguf_name() {
        assert_eq!(plain_name("m-Q4_K_M.gguf", "file").unwrap(), "m-Q4_K_M.gguf");
        for bad in [
            "",
            "../m.gguf",
            "a/m.gguf",
            "m.safetensors",
            "https://x/m.gguf",
            "m.gguf?x",
            ".gguf",
            "..",
            "a\\m.gguf",
        ] {
            assert!(matches!(plain_name(bad, "file"), Err(Error::InvalidInput(_))), "{bad:?}");
        }
    }

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
