//! [`Matrix`]: a weight matrix on the CPU, kept in the dtype its file stores (f32, f16 or bf16)
//! and converted to f32 one row at a time as it is used. A bf16 checkpoint therefore takes its
//! file's size in memory, not twice that: the CPU backend fits models twice as large, which
//! matters in wasm32's 4 GiB.

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

/// The elements of a [`Matrix`], row-major, in their stored dtype.
#[derive(Clone, Debug, PartialEq)]
pub enum MatrixData {
    /// 32-bit floats.
    F32(Vec<f32>),
    /// IEEE half floats.
    F16(Vec<f16>),
    /// bfloat16.
    BF16(Vec<bf16>),
}

/// A (rows, cols) row-major matrix in its file's dtype.
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix {
    /// Rows (outputs of a linear layer, vocabulary entries of an embedding).
    pub(crate) rows: usize,
    /// Columns (inputs of a linear layer, D for an embedding).
    pub(crate) cols: usize,
    /// The elements. (rows, cols)
    pub(crate) data: MatrixData,
}

impl Matrix {
    /// Wraps f32 data of `rows` rows (`data.len()` must be a multiple of `rows`).
    pub fn from_f32(rows: usize, data: Vec<f32>) -> Self {
        let cols = data.len().checked_div(rows).unwrap_or(0);
        Self { rows, cols, data: MatrixData::F32(data) }
    }

    /// Splits it into `n` matrices of rows/n rows each, in order (stacked experts' slices).
    pub(crate) fn split_rows(self, n: usize) -> Vec<Matrix> {
        let rows = self.rows.checked_div(n).unwrap_or(0);
        let per = rows * self.cols;
        let cols = self.cols;
        let wrap = |data| Matrix { rows, cols, data };
        match self.data {
            MatrixData::F32(v) => {
                v.chunks_exact(per.max(1)).map(|c| wrap(MatrixData::F32(c.to_vec()))).collect()
            }
            MatrixData::F16(v) => {
                v.chunks_exact(per.max(1)).map(|c| wrap(MatrixData::F16(c.to_vec()))).collect()
            }
            MatrixData::BF16(v) => {
                v.chunks_exact(per.max(1)).map(|c| wrap(MatrixData::BF16(c.to_vec()))).collect()
            }
        }
    }

    /// Elements in all.
    pub fn len(&self) -> usize {
        self.rows * self.cols
    }

    /// Whether the matrix has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes its elements take in memory.
    pub fn bytes(&self) -> usize {
        match &self.data {
            MatrixData::F32(v) => v.len() * 4,
            MatrixData::F16(v) => v.len() * 2,
            MatrixData::BF16(v) => v.len() * 2,
        }
    }

    /// The stored dtype's name: "f32", "f16" or "bf16".
    pub fn dtype_name(&self) -> &'static str {
        match &self.data {
            MatrixData::F32(_) => "f32",
            MatrixData::F16(_) => "f16",
            MatrixData::BF16(_) => "bf16",
        }
    }

    /// Row `r` as f32: borrowed when stored as f32, else converted into `scratch` (cols).
    pub(crate) fn row<'a>(&'a self, r: usize, scratch: &'a mut [f32]) -> &'a [f32] {
        let range = r * self.cols..(r + 1) * self.cols;
        match &self.data {
            MatrixData::F32(v) => &v[range],
            MatrixData::F16(v) => {
                v[range].convert_to_f32_slice(scratch);
                scratch
            }
            MatrixData::BF16(v) => {
                for (out, w) in scratch.iter_mut().zip(&v[range]) {
                    *out = bf16_to_f32(*w);
                }
                scratch
            }
        }
    }

    /// Every element as f32. (rows, cols)
    pub fn to_f32(&self) -> Vec<f32> {
        match &self.data {
            MatrixData::F32(v) => v.clone(),
            MatrixData::F16(v) => v.to_f32_vec(),
            MatrixData::BF16(v) => v.to_f32_vec(),
        }
    }
}

/// bf16 → f32: exact, by a shift (bf16 is f32's upper half). Unlike `half`'s conversion this
/// does not quiet signalling NaNs, so it has no branch and vectorises.
#[inline]
pub(crate) fn bf16_to_f32(v: bf16) -> f32 {
    f32::from_bits((v.to_bits() as u32) << 16)
}

/// f16 → f32, exact, without branches (so it vectorises, in wasm too, where `half` converts one
/// value at a time in software): the exponent and mantissa moved into f32's fields and scaled
/// by 2¹¹², which also turns f16's subnormals into the right normal f32s; ±Inf and NaN (whose
/// exponent is all ones) are mapped by a select.
#[inline]
pub(crate) fn f16_to_f32(v: f16) -> f32 {
    let h = v.to_bits() as u32;
    let sign = (h & 0x8000) << 16;
    let magnitude = h & 0x7fff;
    // 2^112 = 2^(127 − 15): f16's exponent bias moved to f32's
    let scaled = (f32::from_bits(magnitude << 13) * f32::from_bits(0x7780_0000)).to_bits();
    let special = 0x7f80_0000 | ((magnitude & 0x3ff) << 13);
    f32::from_bits(sign | if magnitude >= 0x7c00 { special } else { scaled })
}
