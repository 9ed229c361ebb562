//! [`WeightFormat`]: how weight matrices are stored on the GPU, and the conversion of a piece of
//! rows from the checkpoint's dtype into it. Every format is read through `array<u32>` in the
//! shaders, so none needs the optional `shader-f16` feature (absent on SwiftShader and many
//! devices):
//! - `f32`: one float per u32 (`bitcast<f32>`);
//! - `f16`: two halves per u32, element 2i in the low half (each shader's `halves`:
//!   `unpack2x16float`, with subnormals rebuilt by hand since a GPU may flush them —
//!   `tests/gpu_halves.rs`) — the byte layout of an f16 array, so an f16 checkpoint uploads
//!   as is;
//! - `int8`: four signed bytes per u32, element 4i in the low byte (`unpack4x8snorm` gives
//!   q/127), then one f32 scale per group of 32 weights along a row (the group's largest |w|,
//!   so w ≈ q/127 · scale): GGUF's Q8_0 with an f32 scale. A part's scales follow its quants.
//! - `q4`: eight 4-bit values per u32, element 8i in the low nibble, then one u32 per group of
//!   64 weights (row-major) holding an f16 step d (low half) and minimum m (high half),
//!   w ≈ q · d + m: GGUF's Q4_1 with groups of 64 (m = the group's minimum, d = (max − m) / 15,
//!   both rounded to f16 before the quants are computed), 4.5 bits per weight — chosen over
//!   Q4_0 with groups of 32 (also 4.5 bits) by measured perplexity (`tools/q4_variants.py`:
//!   +0.46% against +1.54% on the default model). Needs rows a multiple of 64 long, or of 32
//!   in pairs of rows (then a group spans two rows; [`WeightFormat::for_shape`]).
//!
//! Activations, the state and every accumulation stay f32.

use half::{bf16, f16};
use safetensors::Dtype;

use crate::error::{Error, Result};
use crate::gpu_kit::ggml;
use crate::load::gguf::GgmlType;
use crate::model::{Config, Role, tensor_sizes};

/// Weights per int8 scale (along a row).
pub(crate) const INT8_GROUP: usize = 32;

/// Weights per q4 scale and minimum (row-major).
pub(crate) const Q4_GROUP: usize = 64;

/// How weight matrices are stored on the GPU (small tensors — norms, biases, A, D, the conv
/// kernel — are always f32).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WeightFormat {
    /// 4 bytes per weight.
    F32,
    /// 2 bytes per weight: exact for f16 and bf16 checkpoints in f16's normal range.
    #[default]
    F16,
    /// 1 byte per weight + an f32 scale per 32 (1.125 bytes).
    Int8,
    /// 4 bits per weight + an f16 scale and minimum per 64 (0.5625 bytes).
    Q4,
    /// A GGUF file's ggml blocks as stored (`gpu_kit/ggml.rs`): never asked for, given to the
    /// matrices whose tensors the file holds in that type.
    Ggml(GgmlType),
}

impl WeightFormat {
    /// All formats, in the order of their shader value.
    pub const ALL: [WeightFormat; 4] =
        [WeightFormat::F32, WeightFormat::F16, WeightFormat::Int8, WeightFormat::Q4];

    /// `"f32"`, `"f16"`, `"int8"` or `"q4"`.
    pub fn name(self) -> &'static str {
        match self {
            WeightFormat::F32 => "f32",
            WeightFormat::F16 => "f16",
            WeightFormat::Int8 => "int8",
            WeightFormat::Q4 => "q4",
            WeightFormat::Ggml(ty) => ty.name(),
        }
    }

    /// Parses `"f32"`, `"f16"`, `"int8"`, `"q4"`, or `"auto"` (= f16).
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "f32" => Ok(WeightFormat::F32),
            "f16" | "auto" => Ok(WeightFormat::F16),
            "int8" => Ok(WeightFormat::Int8),
            "q4" => Ok(WeightFormat::Q4),
            other => {
                Err(Error::InvalidInput(format!("weights must be auto, f32, f16, int8 or q4, not {other:?}")))
            }
        }
    }

    /// The format a (rows, cols) matrix gets when this one is asked for: the shaders read f16
    /// four at a time (cols % 4 == 0), int8 in whole groups of 32 along a row (cols % 32 == 0),
    /// q4 in groups of 64 that pieces of rows never cut (cols % 64 == 0, or cols % 32 == 0 with
    /// an even number of rows: pieces stream in even row counts). A matrix that does not divide falls back to int8 (from q4),
    /// then f16, then f32. Real Mamba sizes divide, but for dt_proj's dt_rank columns when not
    /// a multiple of 32 (48 in the 130M shape: small matrices).
    pub fn for_shape(self, rows: usize, cols: usize) -> Self {
        if let WeightFormat::Ggml(_) = self {
            return self; // the file's rows: whole blocks
        }
        let q4 =
            cols.is_multiple_of(Q4_GROUP) || (cols.is_multiple_of(Q4_GROUP / 2) && rows.is_multiple_of(2));
        match self {
            WeightFormat::Q4 if q4 => WeightFormat::Q4,
            WeightFormat::Q4 | WeightFormat::Int8 if cols.is_multiple_of(INT8_GROUP) => WeightFormat::Int8,
            WeightFormat::Q4 | WeightFormat::Int8 | WeightFormat::F16 if cols.is_multiple_of(4) => {
                WeightFormat::F16
            }
            _ => WeightFormat::F32,
        }
    }

    /// Bytes of `rows` rows of `cols` weights (int8, q4: the quants, then the scales).
    pub(crate) fn bytes(self, rows: usize, cols: usize) -> u64 {
        let n = (rows * cols) as u64;
        match self {
            WeightFormat::F32 => 4 * n,
            WeightFormat::F16 => 2 * n,
            WeightFormat::Int8 => n + 4 * n / INT8_GROUP as u64,
            WeightFormat::Q4 => n / 2 + 4 * n / Q4_GROUP as u64,
            WeightFormat::Ggml(ty) => ggml::bytes(ty, rows * cols),
        }
    }

    /// GPU bytes of a tensor playing `role`, `rows` × `cols`, when weights are asked for in
    /// this format: a matrix in [`Self::for_shape`], a small tensor in f32.
    pub(crate) fn bytes_of(self, role: Role, rows: usize, cols: usize) -> u64 {
        let format = if role.is_matrix() { self.for_shape(rows, cols) } else { WeightFormat::F32 };
        format.bytes(rows, cols)
    }

    /// GPU weight bytes of a model of shape `config` with weights asked for in this format
    /// (what [`crate::GpuMemory::weights`] reports once loaded), from the config alone.
    pub fn model_bytes(self, config: &Config) -> Result<u64> {
        Ok(tensor_sizes(config)?.into_iter().map(|(role, rows, cols)| self.bytes_of(role, rows, cols)).sum())
    }

    /// Where the scales of `rows` rows of `cols` weights start in their buffer, in u32 (int8,
    /// q4: after the rows · cols quants; the other formats have none: 0).
    pub(crate) fn scales_at(self, rows: usize, cols: usize) -> u32 {
        match self {
            WeightFormat::Int8 => (rows * cols / 4) as u32,
            WeightFormat::Q4 => (rows * cols / 8) as u32,
            WeightFormat::Ggml(ty) => ggml::scales_at(ty, rows * cols),
            WeightFormat::F32 | WeightFormat::F16 => 0,
        }
    }

    /// The value of the shaders' `W_FORMAT` override.
    pub(crate) fn shader_value(self) -> f64 {
        match self {
            WeightFormat::F32 => 0.0,
            WeightFormat::F16 => 1.0,
            WeightFormat::Int8 => 2.0,
            WeightFormat::Q4 => 3.0,
            WeightFormat::Ggml(ty) => ggml::shader_value(ty),
        }
    }
}

/// Values f16 storage could not hold exactly (f16 keeps bf16's 8 significant bits only between
/// 6.1e-5 and 65504).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConversionStats {
    /// Nonzero values below f16's normal range (stored as f16 subnormals or zero: rounded).
    pub(crate) f16_subnormal: u64,
    /// Values above 65504 in magnitude (clamped to ±65504).
    pub(crate) f16_overflow: u64,
}

/// A piece of rows in a storage format: the elements, and (int8) their scales.
pub(crate) struct Encoded {
    pub(crate) values: Vec<u8>,
    pub(crate) scales: Vec<u8>,
}

/// Values of `bytes` (little-endian `dtype`: F32, F16 or BF16) as f32.
pub(crate) fn to_f32(dtype: Dtype, bytes: &[u8]) -> Vec<f32> {
    match dtype {
        Dtype::F16 => bytes.chunks_exact(2).map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
        Dtype::BF16 => bytes.chunks_exact(2).map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
        _ => bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
    }
}

/// Converts whole rows of `cols` weights from `dtype` bytes to `format`.
pub(crate) fn encode(
    format: WeightFormat,
    dtype: Dtype,
    bytes: &[u8],
    cols: usize,
    stats: &mut ConversionStats,
) -> Encoded {
    let values = match (format, dtype) {
        (WeightFormat::F16, Dtype::F16) => bytes.to_vec(),
        (WeightFormat::F32, Dtype::F32) => bytes.to_vec(),
        (WeightFormat::F32, _) => bytemuck::cast_slice(&to_f32(dtype, bytes)).to_vec(),
        (WeightFormat::F16, _) => {
            to_f32(dtype, bytes).into_iter().flat_map(|v| to_f16(v, stats).to_le_bytes()).collect()
        }
        (WeightFormat::Int8, _) => return quantize(&to_f32(dtype, bytes), cols),
        (WeightFormat::Q4, _) => return quantize_q4(&to_f32(dtype, bytes), cols),
        // The file's blocks, handed on undecoded (`Sink::raw_blocks`).
        (WeightFormat::Ggml(ty), _) => {
            let (values, scales) = ggml::relayout(ty, bytes);
            return Encoded { values, scales };
        }
    };
    Encoded { values, scales: Vec::new() }
}

/// `v` as f16, counting what f16 cannot hold exactly; overflow clamps to ±65504.
fn to_f16(v: f32, stats: &mut ConversionStats) -> f16 {
    let a = v.abs();
    if a > f16::MAX.to_f32() && a.is_finite() {
        stats.f16_overflow += 1;
        return f16::from_f32(v.clamp(f16::MIN.to_f32(), f16::MAX.to_f32()));
    }
    if a != 0.0 && a < f16::MIN_POSITIVE.to_f32() {
        stats.f16_subnormal += 1;
    }
    f16::from_f32(v)
}

/// Symmetric int8 per group of 32 along each row: scale = max |w|, q = round(127 · w / scale).
fn quantize(values: &[f32], cols: usize) -> Encoded {
    debug_assert!(cols.is_multiple_of(INT8_GROUP));
    let mut quants = Vec::with_capacity(values.len());
    let mut scales = Vec::with_capacity(values.len() / INT8_GROUP * 4);
    for group in values.chunks_exact(INT8_GROUP) {
        let scale = group.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let inv = if scale > 0.0 { 127.0 / scale } else { 0.0 };
        quants.extend(group.iter().map(|v| (v * inv).round().clamp(-127.0, 127.0) as i8 as u8));
        scales.extend(scale.to_le_bytes());
    }
    Encoded { values: quants, scales }
}

/// Q4_1 per group of 64 weights (row-major; a group spans two rows when a row holds an odd
/// number of 32s): m = the group's minimum and d = (max − m) / 15, both rounded to f16 before
/// the quants are computed, q = clamp(round((w − m) / d), 0, 15), eight q per u32 (element 8i
/// in the low nibble); one u32 per group: d in the low half, m in the high half.
fn quantize_q4(values: &[f32], cols: usize) -> Encoded {
    debug_assert!(cols.is_multiple_of(Q4_GROUP / 2) && values.len().is_multiple_of(Q4_GROUP));
    let mut quants = vec![0u8; values.len() / 2];
    let mut scales = Vec::with_capacity(values.len() / Q4_GROUP * 4);
    for (g, group) in values.chunks_exact(Q4_GROUP).enumerate() {
        let (lo, hi) =
            group.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), &v| (l.min(v), h.max(v)));
        let m = f16::from_f32(lo);
        let d = f16::from_f32((hi - m.to_f32()) / 15.0);
        let inv = if d.to_f32() > 0.0 { 1.0 / d.to_f32() } else { 0.0 };
        for (j, &v) in group.iter().enumerate() {
            let q = ((v - m.to_f32()) * inv).round().clamp(0.0, 15.0) as u8;
            let at = g * Q4_GROUP + j;
            quants[at / 2] |= q << (4 * (at % 2));
        }
        scales.extend(d.to_le_bytes());
        scales.extend(m.to_le_bytes());
    }
    Encoded { values: quants, scales }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What q4 storage holds for `values` (whole groups of 64): the f32 weights the shaders decode.
    fn q4_round_trip(values: &[f32]) -> Vec<f32> {
        let e = quantize_q4(values, values.len());
        let half = |k: usize| f16::from_le_bytes([e.scales[2 * k], e.scales[2 * k + 1]]).to_f32();
        (0..values.len())
            .map(|i| {
                f32::from((e.values[i / 2] >> (4 * (i % 2))) & 15) * half(2 * (i / 64))
                    + half(2 * (i / 64) + 1)
            })
            .collect()
    }

    #[test]
    fn q4_packs_eight_per_word_and_rounds_to_the_nearest_step() {
        let values: Vec<f32> = (0..192).map(|i| ((i * 37 % 61) as f32 - 20.0) / 7.0).collect();
        let e = quantize_q4(&values, 96);
        assert_eq!((e.values.len(), e.scales.len()), (96, 12), "4 bits a weight, d and m per 64");
        assert_eq!(WeightFormat::Q4.bytes(2, 96) as usize, e.values.len() + e.scales.len());
        let back = q4_round_trip(&values);
        for (g, (group, got)) in values.chunks(64).zip(back.chunks(64)).enumerate() {
            let (lo, hi) =
                group.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), &v| (l.min(v), h.max(v)));
            let d = (hi - lo) / 15.0;
            // Sixteen steps of d from the minimum to the maximum (up to f16's rounding of m and
            // d): every weight within half a step of its value.
            for (v, b) in group.iter().zip(got) {
                assert!((v - b).abs() <= 0.5 * d * 1.01, "group {g}: {v} → {b}");
            }
        }
        // Element 8i + t sits at bits 4t of word i: the first word's nibbles are q0 … q7; the
        // group's u32 holds d (low half), then m.
        let word = u32::from_le_bytes([e.values[0], e.values[1], e.values[2], e.values[3]]);
        let d = f16::from_le_bytes([e.scales[0], e.scales[1]]).to_f32();
        let m = f16::from_le_bytes([e.scales[2], e.scales[3]]).to_f32();
        assert_eq!(m, f16::from_f32(-20.0 / 7.0).to_f32(), "m is the minimum");
        for (t, &b) in back.iter().take(8).enumerate() {
            let q = (word >> (4 * t)) & 15;
            assert_eq!(q as f32 * d + m, b, "nibble {t}");
        }
        assert_eq!(WeightFormat::Q4.for_shape(3, 64), WeightFormat::Q4);
        // 5 groups a row (mamba-2.8b's dt_proj): q4 when the rows pair up, else int8.
        assert_eq!(WeightFormat::Q4.for_shape(5120, 160), WeightFormat::Q4);
        assert_eq!(WeightFormat::Q4.bytes(5120, 160) % 4, 0);
        assert_eq!(WeightFormat::Q4.for_shape(3, 96), WeightFormat::Int8);
        assert_eq!(WeightFormat::Q4.for_shape(4, 20), WeightFormat::F16);
        assert_eq!(WeightFormat::Q4.scales_at(3, 64), 24);
    }

    #[test]
    fn formats_fall_back_when_columns_do_not_divide() {
        assert_eq!(WeightFormat::Int8.for_shape(2, 64), WeightFormat::Int8);
        assert_eq!(WeightFormat::Int8.for_shape(2, 48), WeightFormat::F16);
        assert_eq!(WeightFormat::Int8.for_shape(2, 5), WeightFormat::F32);
        assert_eq!(WeightFormat::F16.for_shape(2, 6), WeightFormat::F32);
        assert_eq!(WeightFormat::F32.for_shape(2, 64), WeightFormat::F32);
        assert_eq!(WeightFormat::Int8.bytes(2, 64), 128 + 16);
    }

    #[test]
    fn bf16_to_f16_is_exact_in_the_normal_range_and_counts_the_rest() {
        let values = [1.0f32, -3.140625, 1e-3, 65280.0, 1e-6, 1e6, 0.0];
        let bytes: Vec<u8> = values.iter().flat_map(|&v| bf16::from_f32(v).to_le_bytes()).collect();
        let mut stats = ConversionStats::default();
        let out = encode(WeightFormat::F16, Dtype::BF16, &bytes, values.len(), &mut stats);
        let back = to_f32(Dtype::F16, &out.values);
        let exact = to_f32(Dtype::BF16, &bytes);
        for i in [0, 1, 2, 3, 6] {
            assert_eq!(back[i], exact[i], "value {i}");
        }
        assert_eq!(back[5], 65504.0, "overflow clamps");
        assert_eq!(stats, ConversionStats { f16_subnormal: 1, f16_overflow: 1 });
    }

    #[test]
    fn int8_groups_round_to_within_half_a_step() {
        let values: Vec<f32> = (0..64).map(|i| ((i * 37 % 64) as f32 - 31.5) / 10.0).collect();
        let bytes: Vec<u8> = bytemuck::cast_slice(&values).to_vec();
        let e = encode(WeightFormat::Int8, Dtype::F32, &bytes, 64, &mut ConversionStats::default());
        assert_eq!((e.values.len(), e.scales.len()), (64, 8));
        for (g, group) in values.chunks(32).enumerate() {
            let scale = f32::from_le_bytes(e.scales[4 * g..4 * g + 4].try_into().unwrap());
            assert_eq!(scale, group.iter().fold(0.0f32, |m, v| m.max(v.abs())));
            for (j, &v) in group.iter().enumerate() {
                let q = e.values[32 * g + j] as i8 as f32;
                assert!((q / 127.0 * scale - v).abs() <= scale / 254.0 + 1e-6, "{v} -> {q}");
            }
        }
    }
}
