//! Safetensors headers and the sharded index, read before any weight byte: a file starts with an
//! 8-byte little-endian header length and a JSON table of `name → {dtype, shape, data_offsets}`;
//! the data section follows. Offsets are kept as u64, so a shard larger than 4 GiB (common for
//! 2.8B-parameter models) indexes correctly in wasm32 too, where the `safetensors` crate's
//! `usize` offsets cannot.
//!
//! `model.safetensors.index.json` maps tensor names to shard file names; those names come from
//! the (untrusted) model folder and become paths and URLs, so only plain file names are allowed.

use std::collections::{BTreeMap, HashMap};

use safetensors::Dtype;

use crate::error::{Error, Result};
use crate::load::json_shape::{JsonShape, MAX_SMALL_JSON_VALUES};

/// Largest header accepted (the `safetensors` crate's limit).
pub(crate) const MAX_HEADER_BYTES: u64 = 100_000_000;

/// One tensor's entry in a header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorEntry {
    /// Full name (`backbone.layers.0.mixer.in_proj.weight`).
    pub(crate) name: String,
    /// Element type.
    pub(crate) dtype: Dtype,
    /// Shape.
    pub shape: Vec<usize>,
    /// Byte range within the data section.
    pub start: u64,
    /// End of the byte range (exclusive).
    pub end: u64,
    /// A GGUF tensor converted as it loads (ggml blocks decoded, llama.cpp's `A = −exp(A_log)`
    /// undone): `dtype` is then F32, what the sinks receive.
    pub(crate) stored: Option<Stored>,
}

/// How a GGUF tensor is stored and what undoes the converter's transform of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stored {
    /// ggml's type of the bytes in the file.
    pub ty: crate::load::gguf::GgmlType,
    /// The file holds A = −exp(A_log): A_log = ln(−A) is what the model loads.
    pub ln_neg: bool,
    /// Rows per head (even) of a q/k matrix whose heads llama.cpp stores with rows interleaved
    /// for its RoPE (file row 2j of a head is HF's row j, row 2j + 1 HF's row j + rows/2):
    /// loaded in HF's order, whole heads at a time, its blocks intact; 0 for any other tensor.
    pub head_rows: u32,
}

/// One safetensors file's header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileHeader {
    /// The file's name in the model folder.
    pub(crate) name: String,
    /// Where the data section starts: 8 + header length.
    pub data_start: u64,
    /// The whole file's size: data_start + data length.
    pub size: u64,
    /// Tensors in the order of their data.
    pub tensors: Vec<TensorEntry>,
    /// A GGUF file: its tensors are named and shaped as the model's (safetensors) names them,
    /// may be padded apart (alignment), and may have had unit dimensions squeezed.
    pub(crate) gguf: bool,
}

impl FileHeader {
    /// The header length announced by a file's first 8 bytes, checked against its size
    /// (`file_size`, when known).
    pub fn header_len(file: &str, first8: &[u8], file_size: Option<u64>) -> Result<u64> {
        let fail = |reason: String| Error::Safetensors { file: file.to_string(), reason };
        let Ok(first8) = <[u8; 8]>::try_from(first8) else {
            return Err(fail(format!(
                "file is truncated: {} bytes, shorter than the 8-byte header length",
                first8.len()
            )));
        };
        let len = u64::from_le_bytes(first8);
        if let Some(size) = file_size.filter(|&s| len > s.saturating_sub(8)) {
            return Err(fail(format!(
                "header length {len} is larger than the file ({size} bytes): not a safetensors \
                 file, or truncated inside its header"
            )));
        }
        if len > MAX_HEADER_BYTES {
            return Err(fail(format!(
                "header length {len} is larger than the {MAX_HEADER_BYTES} bytes allowed"
            )));
        }
        Ok(len)
    }

    /// Parses the JSON header `json` of file `name`, whose size is `file_size` when known;
    /// checks that the tensors tile the data section and that it ends where the file does.
    pub fn parse(name: &str, json: &[u8], file_size: Option<u64>) -> Result<Self> {
        let fail = |reason: String| Error::Safetensors { file: name.to_string(), reason };
        #[derive(serde::Deserialize)]
        struct Info {
            dtype: Dtype,
            shape: Vec<usize>,
            data_offsets: (u64, u64),
        }
        JsonShape::counted("the header", json, MAX_SMALL_JSON_VALUES).map_err(fail)?;
        let table: HashMap<String, serde_json::Value> =
            serde_json::from_slice(json).map_err(|e| fail(format!("invalid safetensors header: {e}")))?;
        let mut tensors = Vec::with_capacity(table.len());
        for (tensor, value) in table {
            if tensor == "__metadata__" {
                continue;
            }
            let info: Info = serde_json::from_value(value)
                .map_err(|e| fail(format!("invalid safetensors header entry for {tensor}: {e}")))?;
            let (start, end) = info.data_offsets;
            tensors.push(TensorEntry {
                name: tensor,
                dtype: info.dtype,
                shape: info.shape,
                start,
                end,
                stored: None,
            });
        }
        tensors.sort_by_key(|t| (t.start, t.end));
        let mut at = 0u64;
        for t in &tensors {
            let elements = t.shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d as u64));
            let bytes = elements.and_then(|n| n.checked_mul(t.dtype.bitsize() as u64)).map(|bits| bits / 8);
            if t.start != at || Some(t.end.wrapping_sub(t.start)) != bytes || t.end < t.start {
                return Err(fail(format!(
                    "invalid safetensors header: tensor {} has data_offsets [{}, {}] for shape {:?} \
                     of {}; expected to start at {at}",
                    t.name, t.start, t.end, t.shape, t.dtype
                )));
            }
            at = t.end;
        }
        let data_start = 8 + json.len() as u64;
        let size = data_start.checked_add(at).ok_or_else(|| {
            fail(format!(
                "invalid safetensors header: its tensors end {at} bytes after the header, past 2^64"
            ))
        })?;
        if let Some(file_size) = file_size.filter(|&s| s != size) {
            return Err(fail(format!(
                "file is truncated or padded: its header describes {size} bytes, the file has {file_size}"
            )));
        }
        Ok(Self { name: name.to_string(), data_start, size, tensors, gguf: false })
    }
}

/// The `weight_map` of `model.safetensors.index.json` (tensor name → shard file name), with
/// every shard name checked to be a plain file name inside the model folder.
pub fn parse_index(index_json: &[u8]) -> Result<BTreeMap<String, String>> {
    #[derive(serde::Deserialize)]
    struct Index {
        weight_map: BTreeMap<String, String>,
    }
    let fail = |reason: String| Error::Safetensors { file: "model.safetensors.index.json".into(), reason };
    JsonShape::counted("the index", index_json, MAX_SMALL_JSON_VALUES).map_err(fail)?;
    let map = serde_json::from_slice::<Index>(index_json)
        .map_err(|e| fail(format!("invalid index: {e}")))?
        .weight_map;
    for shard in map.values() {
        check_file_name(shard).map_err(|why| fail(format!("shard {shard:?} {why}")))?;
    }
    Ok(map)
}

/// The shard names of an index, each once, sorted.
pub fn shard_names(weight_map: &BTreeMap<String, String>) -> Vec<String> {
    let mut names: Vec<String> = weight_map.values().cloned().collect();
    names.sort();
    names.dedup();
    names
}

/// Fails unless `name` is a plain file name: not empty, no directory separators, not `.`/`..`,
/// no control characters, no URL syntax.
pub(crate) fn check_file_name(name: &str) -> std::result::Result<(), &'static str> {
    if name.is_empty() || name == "." || name == ".." {
        return Err("is not a file name");
    }
    if name.contains(['/', '\\', ':', '?', '#', '%']) || name.chars().any(char::is_control) {
        return Err("must be a plain file name in the model folder (no paths, no URL syntax)");
    }
    Ok(())
}
