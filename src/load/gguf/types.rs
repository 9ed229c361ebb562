//! ggml's tensor types as a GGUF file names them: the id in a tensor info, the block a row is
//! cut into (elements per block, bytes per block) and the name llama.cpp prints. Ids and block
//! sizes are ggml's (`ggml.h`, `ggml.c`'s `type_traits`; gguf-py's `GGML_QUANT_SIZES`).
//!
//! The types webmamba computes on ([`GgmlType::is_supported`]) are the ones a Q4_K_M, Q5_K_M,
//! Q6_K or Q8_0 file holds, with the per-tensor fallbacks `llama-quantize` writes where a row
//! does not divide a K-quant's 256 (Q5_0, Q5_1, Q8_0); every other known type is refused by
//! name, an unknown id by its number.

use std::fmt;

/// A ggml tensor type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GgmlType {
    /// 32-bit float.
    F32,
    /// IEEE half.
    F16,
    /// bfloat16.
    Bf16,
    /// 32 weights: f16 scale d, 16 bytes of 4-bit q; w = d·(q − 8).
    Q4_0,
    /// 32 weights: f16 d and m, 16 bytes of 4-bit q; w = d·q + m.
    Q4_1,
    /// 32 weights: f16 d, 32 high bits, 16 bytes of low nibbles; w = d·(q − 16).
    Q5_0,
    /// 32 weights: f16 d and m, 32 high bits, 16 bytes of low nibbles; w = d·q + m.
    Q5_1,
    /// 32 weights: f16 d, 32 signed bytes; w = d·q.
    Q8_0,
    /// 256 weights: f16 d and dmin, 12 bytes of 6-bit sub-scales and mins, 128 bytes of 4-bit q.
    Q4K,
    /// 256 weights: as Q4_K with 32 bytes of fifth bits.
    Q5K,
    /// 256 weights: 128 bytes of low nibbles, 64 of high 2 bits, 16 signed sub-scales, f16 d.
    Q6K,
    /// A type ggml knows that webmamba does not compute on (its id and name).
    Other(u32, &'static str),
}

/// ggml's names of the types webmamba does not compute on, by id (`None`: an id ggml removed).
const OTHER_NAMES: [Option<&str>; 40] = [
    None,
    None,
    None,
    None,
    None,
    None,
    None,
    None,
    None,
    Some("Q8_1"),
    Some("Q2_K"),
    Some("Q3_K"),
    None,
    None,
    None,
    Some("Q8_K"),
    Some("IQ2_XXS"),
    Some("IQ2_XS"),
    Some("IQ3_XXS"),
    Some("IQ1_S"),
    Some("IQ4_NL"),
    Some("IQ3_S"),
    Some("IQ2_S"),
    Some("IQ4_XS"),
    Some("I8"),
    Some("I16"),
    Some("I32"),
    Some("I64"),
    Some("F64"),
    Some("IQ1_M"),
    None,
    None,
    None,
    None,
    Some("TQ1_0"),
    Some("TQ2_0"),
    None,
    None,
    None,
    Some("MXFP4"),
];

impl GgmlType {
    /// The type of id `id`, `None` when ggml has no such type.
    pub fn from_id(id: u32) -> Option<Self> {
        Some(match id {
            0 => Self::F32,
            1 => Self::F16,
            2 => Self::Q4_0,
            3 => Self::Q4_1,
            6 => Self::Q5_0,
            7 => Self::Q5_1,
            8 => Self::Q8_0,
            12 => Self::Q4K,
            13 => Self::Q5K,
            14 => Self::Q6K,
            30 => Self::Bf16,
            _ => Self::Other(id, OTHER_NAMES.get(id as usize).copied().flatten()?),
        })
    }

    /// ggml's id.
    pub fn id(self) -> u32 {
        match self {
            Self::F32 => 0,
            Self::F16 => 1,
            Self::Q4_0 => 2,
            Self::Q4_1 => 3,
            Self::Q5_0 => 6,
            Self::Q5_1 => 7,
            Self::Q8_0 => 8,
            Self::Q4K => 12,
            Self::Q5K => 13,
            Self::Q6K => 14,
            Self::Bf16 => 30,
            Self::Other(id, _) => id,
        }
    }

    /// Whether webmamba computes on it.
    pub fn is_supported(self) -> bool {
        !matches!(self, Self::Other(..))
    }

    /// (elements, bytes) of one block; `None` for a type webmamba does not compute on (its
    /// size is not needed: such a tensor is refused, or skipped when unused).
    pub fn block(self) -> Option<(usize, usize)> {
        Some(match self {
            Self::F32 => (1, 4),
            Self::F16 | Self::Bf16 => (1, 2),
            Self::Q4_0 => (32, 18),
            Self::Q4_1 => (32, 20),
            Self::Q5_0 => (32, 22),
            Self::Q5_1 => (32, 24),
            Self::Q8_0 => (32, 34),
            Self::Q4K => (256, 144),
            Self::Q5K => (256, 176),
            Self::Q6K => (256, 210),
            Self::Other(..) => return None,
        })
    }

    /// Bytes of `elements` weights (a whole number of blocks), `None` when they do not fill
    /// whole blocks or the type's size is not known.
    pub fn bytes(self, elements: u64) -> Option<u64> {
        let (n, b) = self.block()?;
        elements.is_multiple_of(n as u64).then(|| elements / n as u64 * b as u64)
    }

    /// ggml's name (`Q4_K`, `BF16`, …).
    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "F32",
            Self::F16 => "F16",
            Self::Bf16 => "BF16",
            Self::Q4_0 => "Q4_0",
            Self::Q4_1 => "Q4_1",
            Self::Q5_0 => "Q5_0",
            Self::Q5_1 => "Q5_1",
            Self::Q8_0 => "Q8_0",
            Self::Q4K => "Q4_K",
            Self::Q5K => "Q5_K",
            Self::Q6K => "Q6_K",
            Self::Other(_, name) => name,
        }
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_sizes_are_ggmls() {
        for id in 0..64 {
            if let Some(t) = GgmlType::from_id(id) {
                assert_eq!(t.id(), id);
            }
        }
        assert_eq!(GgmlType::from_id(4), None, "Q4_2 was removed from ggml");
        assert_eq!(GgmlType::from_id(15).map(|t| t.name()), Some("Q8_K"));
        assert_eq!(GgmlType::from_id(99), None);
        // gguf-py 0.19's GGML_QUANT_SIZES.
        assert_eq!(GgmlType::Q6K.bytes(512), Some(420));
        assert_eq!(GgmlType::Q8_0.bytes(64), Some(68));
        assert_eq!(GgmlType::Q4K.bytes(128), None);
    }
}
