//! A GGUF file's header, read from a prefix of the file before any tensor byte: the magic and
//! version (2 or 3), the metadata key/values, the tensor infos (name, dims, type, offset), and
//! the data section's start (the header's end rounded up to `general.alignment`, default 32).
//!
//! The header is untrusted input: every count, length and size it announces is checked against
//! [`Limits`] and against the bytes and file size at hand before anything is allocated for it.
//! A prefix that ends inside the header gives [`Parsed::NeedMore`] with how many bytes are
//! needed at least, so a network reader asks for more and tries again.

use std::collections::{BTreeMap, HashSet};

use crate::error::{Error, Result};
use crate::load::gguf::types::GgmlType;
use crate::load::gguf::value::{Metadata, Value};

/// The magic bytes a GGUF file starts with.
pub const MAGIC: &[u8; 4] = b"GGUF";
/// Arrays nest at most this deep (llama.cpp writes flat arrays).
pub const MAX_ARRAY_DEPTH: usize = 2;
/// Dimensions a tensor may have (ggml's `GGML_MAX_DIMS`).
pub const MAX_DIMS: usize = 4;
/// Elements a tensor may have.
pub const MAX_ELEMENTS: u64 = 1 << 40;
/// Bytes of a tensor name (ggml's `GGML_MAX_NAME` is 64; a little room for other writers).
const MAX_NAME: u64 = 256;

/// Bounds on what a header may make the reader do.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Bytes of header (metadata and tensor infos).
    pub header_bytes: u64,
    /// Array elements in all, over every key (a tokenizer's tokens, scores, types and merges).
    pub array_values: u64,
    /// Tensor infos.
    pub tensors: u64,
    /// Metadata keys.
    pub keys: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self { header_bytes: 256 << 20, array_values: 1 << 23, tensors: 1 << 16, keys: 1 << 16 }
    }
}

/// One tensor's info.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// Its name (`blk.0.ssm_in.weight`).
    pub name: String,
    /// Dimensions, ggml's order: `dims[0]` is the innermost (a row's length).
    pub dims: Vec<u64>,
    /// Element type.
    pub ty: GgmlType,
    /// Start within the data section.
    pub offset: u64,
    /// Bytes, when the type's block size is known (a type webmamba computes on).
    pub bytes: Option<u64>,
}

impl TensorInfo {
    /// Number of elements.
    pub fn elements(&self) -> u64 {
        self.dims.iter().product()
    }
}

/// A parsed header.
#[derive(Clone, Debug, PartialEq)]
pub struct GgufHeader {
    /// GGUF version (2 or 3).
    pub version: u32,
    /// Metadata.
    pub metadata: Metadata,
    /// Tensor infos, in the order of their offsets.
    pub tensors: Vec<TensorInfo>,
    /// The data section's alignment.
    pub alignment: u64,
    /// Where the data section starts in the file.
    pub data_start: u64,
}

/// What a prefix gave.
#[derive(Debug)]
pub enum Parsed {
    /// The whole header.
    Done(GgufHeader),
    /// The prefix ends inside the header: at least this many bytes from the file's start are
    /// needed.
    NeedMore(u64),
}

/// Why a read stopped.
enum Stop {
    Short(u64),
    Bad(String),
}

impl From<String> for Stop {
    fn from(s: String) -> Self {
        Stop::Bad(s)
    }
}

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    limits: Limits,
    array_values: u64,
}

impl Cursor<'_> {
    fn take(&mut self, n: u64) -> std::result::Result<&[u8], Stop> {
        let end = self.pos as u64 + n;
        if end > self.limits.header_bytes {
            return Err(Stop::Bad(format!(
                "the header runs past {} bytes (a {n}-byte read at byte {}), more than the {} allowed",
                end, self.pos, self.limits.header_bytes
            )));
        }
        if end > self.bytes.len() as u64 {
            return Err(Stop::Short(end));
        }
        let s = &self.bytes[self.pos..end as usize];
        self.pos = end as usize;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> std::result::Result<[u8; N], Stop> {
        Ok(self.take(N as u64)?.try_into().expect("N bytes"))
    }

    fn u32(&mut self) -> std::result::Result<u32, Stop> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> std::result::Result<u64, Stop> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn string(&mut self, what: &str) -> std::result::Result<String, Stop> {
        let len = self.u64()?;
        if len > self.limits.header_bytes {
            return Err(Stop::Bad(format!("{what} claims {len} bytes, more than the header may hold")));
        }
        Ok(String::from_utf8_lossy(self.take(len)?).into_owned())
    }

    /// A value of type `ty`, `depth` arrays deep.
    fn value(&mut self, ty: u32, depth: usize, key: &str) -> std::result::Result<Value, Stop> {
        Ok(match ty {
            0 => Value::Uint(self.array::<1>()?[0] as u64),
            1 => Value::Int(self.array::<1>()?[0] as i8 as i64),
            2 => Value::Uint(u16::from_le_bytes(self.array()?) as u64),
            3 => Value::Int(i16::from_le_bytes(self.array()?) as i64),
            4 => Value::Uint(self.u32()? as u64),
            5 => Value::Int(self.u32()? as i32 as i64),
            6 => Value::F32(f32::from_le_bytes(self.array()?)),
            7 => match self.array::<1>()?[0] {
                b @ (0 | 1) => Value::Bool(b == 1),
                b => return Err(Stop::Bad(format!("metadata {key}: bool byte {b}"))),
            },
            8 => Value::Str(self.string(&format!("metadata {key}'s string"))?),
            9 => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(Stop::Bad(format!(
                        "metadata {key}: arrays nested more than {MAX_ARRAY_DEPTH} deep"
                    )));
                }
                let ty = self.u32()?;
                let n = self.u64()?;
                // Each element takes at least one byte of header: a count the header cannot
                // hold fails before anything is reserved.
                self.array_values = self.array_values.saturating_add(n);
                if self.array_values > self.limits.array_values || n > self.limits.header_bytes {
                    return Err(Stop::Bad(format!(
                        "metadata {key}: an array of {n} values, more than the {} allowed in all",
                        self.limits.array_values
                    )));
                }
                let room = (self.bytes.len().saturating_sub(self.pos)) as u64 + 1;
                let mut out = Vec::with_capacity(n.min(room) as usize);
                for _ in 0..n {
                    out.push(self.value(ty, depth + 1, key)?);
                }
                Value::Array(out)
            }
            10 => Value::Uint(self.u64()?),
            11 => Value::Int(self.u64()? as i64),
            12 => Value::F64(f64::from_le_bytes(self.array()?)),
            t => return Err(Stop::Bad(format!("metadata {key}: value type {t} unknown"))),
        })
    }
}

/// Parses the header of GGUF file `file` from `prefix` (its first bytes), checking tensor
/// extents against `file_size` when known.
pub fn parse(file: &str, prefix: &[u8], file_size: Option<u64>, limits: Limits) -> Result<Parsed> {
    let fail = |reason: String| Error::Gguf { file: file.to_string(), reason };
    let mut c = Cursor { bytes: prefix, pos: 0, limits, array_values: 0 };
    match read(&mut c, file, file_size) {
        Ok(h) => Ok(Parsed::Done(h)),
        Err(Stop::Short(n)) => match file_size {
            Some(size) if n > size => {
                Err(fail(format!("truncated: the header needs at least {n} bytes and the file has {size}")))
            }
            _ => Ok(Parsed::NeedMore(n)),
        },
        Err(Stop::Bad(reason)) => Err(fail(reason)),
    }
}

fn read(c: &mut Cursor, file: &str, file_size: Option<u64>) -> std::result::Result<GgufHeader, Stop> {
    let magic = c.array::<4>()?;
    if &magic != MAGIC {
        return Err(Stop::Bad(format!("not a GGUF file: it starts with {magic:02x?}, not \"GGUF\"")));
    }
    let version = c.u32()?;
    if !(2..=3).contains(&version) {
        return Err(Stop::Bad(format!("GGUF version {version}: only versions 2 and 3 are read")));
    }
    let n_tensors = c.u64()?;
    let n_keys = c.u64()?;
    if n_tensors > c.limits.tensors || n_keys > c.limits.keys {
        return Err(Stop::Bad(format!(
            "{n_tensors} tensors and {n_keys} metadata keys: at most {} and {} are read",
            c.limits.tensors, c.limits.keys
        )));
    }
    let mut values = BTreeMap::new();
    for _ in 0..n_keys {
        let key = c.string("a metadata key")?;
        let ty = c.u32()?;
        let value = c.value(ty, 0, &key)?;
        if values.insert(key.clone(), value).is_some() {
            return Err(Stop::Bad(format!("metadata key {key} appears twice")));
        }
    }
    let metadata = Metadata { file: file.to_string(), values };
    let alignment = match metadata.get("general.alignment") {
        None => 32,
        Some(Value::Uint(a)) if a.is_power_of_two() && *a <= 1 << 20 => *a,
        Some(v) => {
            return Err(Stop::Bad(format!("general.alignment {v:?} is not a power of two of at most 1 MiB")));
        }
    };
    let mut tensors = Vec::with_capacity(n_tensors.min(c.bytes.len() as u64 / 24 + 1) as usize);
    let mut names = HashSet::new();
    for _ in 0..n_tensors {
        tensors.push(tensor_info(c)?);
        let name = &tensors.last().expect("pushed").name;
        if !names.insert(name.clone()) {
            return Err(Stop::Bad(format!("tensor {name} appears twice")));
        }
    }
    let mut data_start = (c.pos as u64).div_ceil(alignment) * alignment;
    if tensors.is_empty() {
        // A vocabulary-only file (`convert_hf_to_gguf.py --vocab-only`) ends with its metadata.
        data_start = data_start.min(file_size.unwrap_or(data_start).max(c.pos as u64));
    }
    let data_len = match file_size {
        Some(size) if size < data_start => {
            return Err(Stop::Bad(format!(
                "the data section would start at {data_start}, past the file's {size} bytes"
            )));
        }
        Some(size) => Some(size - data_start),
        None => None,
    };
    tensors.sort_by_key(|t| t.offset);
    let mut end = 0u64;
    for (i, t) in tensors.iter().enumerate() {
        if !t.offset.is_multiple_of(alignment) {
            return Err(Stop::Bad(format!(
                "tensor {} starts at {}, not a multiple of the alignment {alignment}",
                t.name, t.offset
            )));
        }
        if t.offset < end {
            return Err(Stop::Bad(format!(
                "tensor {} (at {}) overlaps {}, which ends at {end}",
                t.name,
                t.offset,
                tensors[i - 1].name
            )));
        }
        end = t.offset.saturating_add(t.bytes.unwrap_or(0));
        if let Some(len) = data_len.filter(|&len| end > len) {
            return Err(Stop::Bad(format!(
                "tensor {} ends at byte {end} of the data section, past its end ({len} bytes): the file is truncated or the offset wrong",
                t.name
            )));
        }
    }
    Ok(GgufHeader { version, metadata, tensors, alignment, data_start })
}

fn tensor_info(c: &mut Cursor) -> std::result::Result<TensorInfo, Stop> {
    let len = c.u64()?;
    if len > MAX_NAME {
        return Err(Stop::Bad(format!("a tensor name of {len} bytes (at most {MAX_NAME})")));
    }
    let name = String::from_utf8_lossy(c.take(len)?).into_owned();
    let n_dims = c.u32()? as usize;
    if !(1..=MAX_DIMS).contains(&n_dims) {
        return Err(Stop::Bad(format!("tensor {name} has {n_dims} dimensions (1 to {MAX_DIMS} are read)")));
    }
    let mut dims = Vec::with_capacity(n_dims);
    let mut elements = 1u64;
    for _ in 0..n_dims {
        let d = c.u64()?;
        elements = elements.saturating_mul(d);
        dims.push(d);
    }
    if dims.contains(&0) || elements > MAX_ELEMENTS {
        return Err(Stop::Bad(format!(
            "tensor {name} has dimensions {dims:?}: each must be 1 or more, {MAX_ELEMENTS} elements at most"
        )));
    }
    let id = c.u32()?;
    let ty = GgmlType::from_id(id).ok_or_else(|| format!("tensor {name}: type id {id} unknown to ggml"))?;
    let bytes = match ty.block() {
        Some((n, _)) if !dims[0].is_multiple_of(n as u64) => {
            return Err(Stop::Bad(format!(
                "tensor {name}: a row of {} {ty} weights is not whole blocks of {n}",
                dims[0]
            )));
        }
        Some(_) => ty.bytes(elements),
        None => None,
    };
    let offset = c.u64()?;
    Ok(TensorInfo { name, dims, ty, offset, bytes })
}
