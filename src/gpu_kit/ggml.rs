//! A GGUF file's quantized matrices on the GPU as the file stores them: ggml's blocks, their
//! bytes in u32 words, computed on by the weight-reading kernels (`W_FORMAT` 4–11, the shared
//! `ggml4` of `shaders/*.wgsl`) — no re-quantization, the GPU bytes those of the file.
//!
//! A block whose size is a multiple of 4 stays whole where it can (Q4_K, Q5_K); otherwise its
//! f16 scale d (and Q4_1/Q5_1's minimum m) moves after the part's quants, as the int8 and q4
//! formats keep their scales (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1: d at the block's start; Q6_K: at
//! its end). The same bytes, laid out so every word is aligned.

use crate::load::gguf::GgmlType;

/// (quant bytes, scale bytes) of one block on the GPU; `None` for a type not kept as blocks.
pub(crate) fn layout(ty: GgmlType) -> Option<(usize, usize)> {
    Some(match ty {
        GgmlType::Q8_0 => (32, 2),
        GgmlType::Q4_0 => (16, 2),
        GgmlType::Q4_1 => (16, 4),
        GgmlType::Q5_0 => (20, 2),
        GgmlType::Q5_1 => (20, 4),
        GgmlType::Q4K => (144, 0),
        GgmlType::Q5K => (176, 0),
        GgmlType::Q6K => (208, 2),
        _ => return None,
    })
}

/// The shaders' `W_FORMAT` of a type kept as blocks.
pub(crate) fn shader_value(ty: GgmlType) -> f64 {
    match ty {
        GgmlType::Q8_0 => 4.0,
        GgmlType::Q4_0 => 5.0,
        GgmlType::Q4_1 => 6.0,
        GgmlType::Q5_0 => 7.0,
        GgmlType::Q5_1 => 8.0,
        GgmlType::Q4K => 9.0,
        GgmlType::Q5K => 10.0,
        GgmlType::Q6K => 11.0,
        _ => unreachable!("{ty} is not kept as blocks"),
    }
}

/// Blocks of `n` weights (a whole number of blocks).
fn blocks(ty: GgmlType, n: usize) -> usize {
    n / ty.block().expect("a block type").0
}

/// GPU bytes of `n` weights of `ty` (the scales rounded up to a whole word).
pub(crate) fn bytes(ty: GgmlType, n: usize) -> u64 {
    let (quants, scales) = layout(ty).expect("a block type");
    let b = blocks(ty, n);
    (b * quants + (b * scales).div_ceil(4) * 4) as u64
}

/// Where the scales of `n` weights start, in words.
pub(crate) fn scales_at(ty: GgmlType, n: usize) -> u32 {
    (blocks(ty, n) * layout(ty).expect("a block type").0 / 4) as u32
}

/// Whole blocks of `ty` as the file has them, laid out for the GPU: (quants, scales).
pub(crate) fn relayout(ty: GgmlType, raw: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let (quants, scales) = layout(ty).expect("a block type");
    let size = ty.block().expect("a block type").1;
    let n = raw.len() / size;
    let (mut values, mut moved) = (Vec::with_capacity(n * quants), Vec::with_capacity(n * scales));
    for b in raw.chunks_exact(size) {
        // Where the quants are in the file's block, and where the moved scale fields are.
        let (q, s) = match ty {
            GgmlType::Q6K => (0..208, 208..210),
            _ if scales == 0 => (0..size, 0..0),
            _ => (scales..size, 0..scales),
        };
        values.extend_from_slice(&b[q]);
        moved.extend_from_slice(&b[s]);
    }
    (values, moved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gpu_holds_the_files_bytes() {
        for ty in [
            GgmlType::Q8_0,
            GgmlType::Q4_0,
            GgmlType::Q4_1,
            GgmlType::Q5_0,
            GgmlType::Q5_1,
            GgmlType::Q4K,
            GgmlType::Q5K,
            GgmlType::Q6K,
        ] {
            let (n, size) = ty.block().unwrap();
            let (q, s) = layout(ty).unwrap();
            assert_eq!(q + s, size, "{ty}: every byte kept, none added");
            assert_eq!(q % 4, 0, "{ty}: quants in whole words");
            assert_eq!(bytes(ty, 2 * n), 2 * size as u64, "{ty}");
            let raw: Vec<u8> = (0..2 * size).map(|i| i as u8).collect();
            let (mut all, scales) = relayout(ty, &raw);
            all.extend(&scales);
            all.sort();
            let mut want = raw.clone();
            want.sort();
            assert_eq!(all, want, "{ty}: a permutation of the file's bytes");
        }
    }
}
