//! Writing a 2-D f32 array as a NumPy `.npy` file (format version 1.0: magic, header length,
//! a Python-dict header padded to a multiple of 64 bytes, then little-endian data).

use std::io::Write;

/// Writes `data` with shape `(rows, cols)` to `out` as `<f4`, C order.
pub fn write_f32_2d(mut out: impl Write, data: &[f32], rows: usize, cols: usize) -> std::io::Result<()> {
    assert_eq!(data.len(), rows * cols, "npy: data does not have the declared shape");
    let dict = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    // magic (6) + version (2) + header length (2) + dict + padding + '\n' ≡ 0 (mod 64)
    let unpadded = 10 + dict.len() + 1;
    let header = format!("{dict}{}\n", " ".repeat(unpadded.next_multiple_of(64) - unpadded));
    out.write_all(b"\x93NUMPY\x01\x00")?;
    out.write_all(&(header.len() as u16).to_le_bytes())?;
    out.write_all(header.as_bytes())?;
    for v in data {
        out.write_all(&v.to_le_bytes())?;
    }
    out.flush()
}
