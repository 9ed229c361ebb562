//! A GGUF file opened for loading: its header read from a growing prefix, the model mapped back
//! to HF's config and names ([`super::arch`]), and the tensors given to [`Layout`] as a
//! [`FileHeader`] whose data section is the file's (offsets as the file has them, padding
//! between tensors skipped by the stream).

use safetensors::Dtype;

use crate::error::{Error, Result};
use crate::load::files::Files;
use crate::load::gguf::arch::{self, Mapped};
use crate::load::gguf::header::{GgufHeader, Limits, Parsed, parse};
use crate::load::gguf::types::GgmlType;
use crate::model::{FileHeader, TensorEntry};

/// Bytes of the first read of a header (most are smaller: no tokenizer; a 250k-token vocabulary
/// with its merges is ~10 MB, read in a few doublings).
const FIRST_READ: u64 = 1 << 20;

/// Reads file `name`'s GGUF header from `files` (`size` bytes), asking for more as needed.
pub(crate) fn read_header(files: &Files, name: &str, size: u64) -> Result<GgufHeader> {
    let limits = Limits::default();
    let mut want = FIRST_READ.min(size);
    loop {
        let mut prefix = vec![0; want as usize];
        files.read_at(name, 0, &mut prefix)?;
        match parse(name, &prefix, Some(size), limits)? {
            Parsed::Done(h) => return Ok(h),
            Parsed::NeedMore(n) => want = n.max(want * 2).min(size).min(limits.header_bytes),
        }
    }
}

/// The header's tensors as a [`FileHeader`] under their HF names (unused ones under their own),
/// and the config JSON: what [`crate::model::Layout::new`] checks against.
pub(crate) fn as_file_header(name: &str, size: u64, header: &GgufHeader) -> Result<(FileHeader, Vec<u8>)> {
    let Mapped { config_json, names } = arch::map(header)?;
    let data_len = size - header.data_start;
    let mut tensors = Vec::with_capacity(header.tensors.len());
    for (i, (t, renamed)) in header.tensors.iter().zip(names).enumerate() {
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
            Some(r) if !t.ty.is_supported() => {
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
    let file =
        FileHeader { name: name.to_string(), data_start: header.data_start, size, tensors, gguf: true };
    Ok((file, config_json))
}
