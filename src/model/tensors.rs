//! [`TensorStore`]: named tensors read from safetensors files held in memory (the browser has
//! `ArrayBuffer`s, not files), single-file or sharded with `model.safetensors.index.json`.
//! [`Scope`] walks names by prefix (`backbone.layers.3.mixer`) so loading code mirrors the
//! checkpoint layout, and every read checks the tensor's shape and converts F32/F16/BF16 to f32.

use std::collections::HashMap;

use safetensors::tensor::{Dtype, SafeTensorError, SafeTensors, TensorInfo};

use crate::error::{Error, Result};

/// One safetensors file: its bytes, where its data section starts, and its tensor table.
struct Shard {
    name: String,
    bytes: Vec<u8>,
    data_start: usize,
}

/// Where a tensor lives: its shard and its header entry.
struct Entry {
    shard: usize,
    info: TensorInfo,
}

/// All tensors of a checkpoint, by name.
pub struct TensorStore {
    shards: Vec<Shard>,
    entries: HashMap<String, Entry>,
}

impl TensorStore {
    /// Parses one or more safetensors files given as `(file name, bytes)`. With several files,
    /// a name must not appear twice.
    pub fn from_files(files: Vec<(String, Vec<u8>)>) -> Result<Self> {
        let mut shards = Vec::with_capacity(files.len());
        let mut entries = HashMap::new();
        for (index, (name, bytes)) in files.into_iter().enumerate() {
            let (header_len, metadata) = parse_header(&name, &bytes)?;
            for (tensor, info) in metadata.tensors() {
                let entry = Entry { shard: index, info: info.clone() };
                if entries.insert(tensor.clone(), entry).is_some() {
                    return Err(Error::Safetensors {
                        file: name.clone(),
                        reason: format!("tensor {tensor} appears in more than one file"),
                    });
                }
            }
            shards.push(Shard { name, bytes, data_start: 8 + header_len });
        }
        Ok(Self { shards, entries })
    }

    /// Parses a sharded checkpoint: `index_json` is `model.safetensors.index.json` and `files`
    /// must hold every shard its `weight_map` names; each mapped tensor must be in its shard.
    pub fn from_index(index_json: &[u8], files: Vec<(String, Vec<u8>)>) -> Result<Self> {
        let weight_map = parse_index(index_json)?;
        let store = Self::from_files(files)?;
        for (tensor, shard) in &weight_map {
            match store.entries.get(tensor) {
                Some(e) if store.shards[e.shard].name == *shard => {}
                Some(e) => {
                    return Err(Error::Safetensors {
                        file: shard.clone(),
                        reason: format!(
                            "the index puts {tensor} in {shard} but it is in {}",
                            store.shards[e.shard].name
                        ),
                    });
                }
                None => {
                    return Err(Error::MissingTensor { tensor: tensor.clone(), file: shard.clone() });
                }
            }
        }
        Ok(store)
    }

    /// Whether a tensor of this name exists.
    pub fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }

    /// Every tensor as (name, dtype, shape), sorted by name (for fingerprints and listings).
    pub fn describe(&self) -> Vec<(String, String, Vec<usize>)> {
        let mut out: Vec<_> = self
            .entries
            .iter()
            .map(|(n, e)| (n.clone(), e.info.dtype.to_string(), e.info.shape.clone()))
            .collect();
        out.sort();
        out
    }

    /// Reads tensor `name`, checks that its shape is `shape`, and converts it to f32.
    pub fn get_f32(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let entry = self
            .entries
            .get(name)
            .ok_or_else(|| Error::MissingTensor { tensor: name.to_string(), file: self.file_names() })?;
        let info = &entry.info;
        if info.shape != shape {
            return Err(Error::ShapeMismatch {
                tensor: name.to_string(),
                expected: shape.to_vec(),
                got: info.shape.clone(),
            });
        }
        let shard = &self.shards[entry.shard];
        let (start, end) = info.data_offsets;
        let data = &shard.bytes[shard.data_start + start..shard.data_start + end];
        match info.dtype {
            Dtype::F32 => Ok(bytemuck::pod_collect_to_vec::<u8, f32>(data)),
            Dtype::F16 => {
                Ok(data.chunks_exact(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()).collect())
            }
            Dtype::BF16 => {
                Ok(data.chunks_exact(2).map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32()).collect())
            }
            other => Err(Error::UnsupportedDtype { tensor: name.to_string(), dtype: other.to_string() }),
        }
    }

    /// blake3 over `context`, then every tensor's name, dtype, shape and first 4 KiB of data.
    pub fn fingerprint(&self, context: &str) -> [u8; 32] {
        let mut h = blake3::Hasher::new();
        h.update(context.as_bytes());
        let mut names: Vec<&String> = self.entries.keys().collect();
        names.sort();
        for name in names {
            let e = &self.entries[name];
            let shard = &self.shards[e.shard];
            let (start, end) = e.info.data_offsets;
            let data = &shard.bytes[shard.data_start + start..shard.data_start + end.min(start + 4096)];
            h.update(format!("{name} {} {:?}", e.info.dtype, e.info.shape).as_bytes());
            h.update(data);
        }
        *h.finalize().as_bytes()
    }

    fn file_names(&self) -> String {
        self.shards.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
    }

    /// A [`Scope`] rooted at `prefix`.
    pub fn scope(&self, prefix: &str) -> Scope<'_> {
        Scope { store: self, prefix: prefix.to_string() }
    }
}

/// A name prefix into a [`TensorStore`]: `scope.pp("mixer").get("A_log", ..)` reads
/// `<prefix>.mixer.A_log`.
pub struct Scope<'a> {
    store: &'a TensorStore,
    prefix: String,
}

impl Scope<'_> {
    /// A narrower scope: `<prefix>.<part>`.
    pub fn pp(&self, part: impl std::fmt::Display) -> Self {
        Scope { store: self.store, prefix: self.name(&part.to_string()) }
    }

    /// The full name of `leaf` in this scope.
    pub fn name(&self, leaf: &str) -> String {
        if self.prefix.is_empty() { leaf.to_string() } else { format!("{}.{leaf}", self.prefix) }
    }

    /// Reads `<prefix>.<leaf>` with the given shape (see [`TensorStore::get_f32`]).
    pub fn get(&self, leaf: &str, shape: &[usize]) -> Result<Vec<f32>> {
        self.store.get_f32(&self.name(leaf), shape)
    }

    /// Like [`Scope::get`] when `present`, else `Ok(None)` (optional biases).
    pub fn get_if(&self, present: bool, leaf: &str, shape: &[usize]) -> Result<Option<Vec<f32>>> {
        present.then(|| self.get(leaf, shape)).transpose()
    }
}

/// Reads the 8-byte header length and the JSON header, turning the library's errors into
/// messages that say what is wrong with the file.
fn parse_header(file: &str, bytes: &[u8]) -> Result<(usize, safetensors::tensor::Metadata)> {
    let fail = |reason: String| Error::Safetensors { file: file.to_string(), reason };
    if bytes.len() < 8 {
        return Err(fail(format!(
            "file is truncated: {} bytes, shorter than the 8-byte header length",
            bytes.len()
        )));
    }
    let header_len = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
    if header_len > (bytes.len() - 8) as u64 {
        return Err(fail(format!(
            "header length {header_len} is larger than the file ({} bytes): not a safetensors \
             file, or truncated inside its header",
            bytes.len()
        )));
    }
    SafeTensors::read_metadata(bytes).map_err(|e| match e {
        SafeTensorError::MetadataIncompleteBuffer => fail(format!(
            "file is truncated or padded: its header describes a data section that does not end \
             at the end of the file ({} bytes)",
            bytes.len()
        )),
        other => fail(format!("invalid safetensors header: {other}")),
    })
}

/// The `weight_map` of `model.safetensors.index.json`: tensor name → shard file name.
pub(crate) fn parse_index(index_json: &[u8]) -> Result<HashMap<String, String>> {
    #[derive(serde::Deserialize)]
    struct Index {
        weight_map: HashMap<String, String>,
    }
    serde_json::from_slice::<Index>(index_json).map(|i| i.weight_map).map_err(|e| Error::Safetensors {
        file: "model.safetensors.index.json".into(),
        reason: format!("invalid index: {e}"),
    })
}
