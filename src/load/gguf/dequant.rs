//! ggml's blocks decoded to f32, element for element as ggml's `dequantize_row_*` computes
//! them (`ggml-quants.c`: f16 scales widened, products in f32), for the CPU backend and for the
//! weight formats that are not the file's own. Checked against gguf-py's `dequantize` on
//! every type (`tests/gguf.rs`).

use half::f16;

use crate::load::gguf::types::GgmlType;

fn h(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// Decodes `bytes` — whole blocks of `ty` — into `out` (one f32 per element, appended).
/// Panics if `bytes` is not whole blocks or `ty` is not computed on: the header and layout
/// checked both.
pub fn dequantize(ty: GgmlType, bytes: &[u8], out: &mut Vec<f32>) {
    let (n, size) = ty.block().expect("a type webmamba computes on");
    assert_eq!(bytes.len() % size, 0, "whole {ty} blocks");
    out.reserve(bytes.len() / size * n);
    for b in bytes.chunks_exact(size) {
        match ty {
            GgmlType::F32 => out.push(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            GgmlType::F16 => out.push(h(b, 0)),
            GgmlType::Bf16 => out.push(f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16)),
            GgmlType::Q4_0 => q4_0(b, out),
            GgmlType::Q4_1 => q4_1(b, out),
            GgmlType::Q5_0 => q5(b, false, out),
            GgmlType::Q5_1 => q5(b, true, out),
            GgmlType::Q8_0 => {
                let d = h(b, 0);
                out.extend(b[2..34].iter().map(|&q| q as i8 as f32 * d));
            }
            GgmlType::Q4K => q4_k(b, out),
            GgmlType::Q5K => q5_k(b, out),
            GgmlType::Q6K => q6_k(b, out),
            GgmlType::Other(..) => unreachable!("block() refused it"),
        }
    }
}

fn q4_0(b: &[u8], out: &mut Vec<f32>) {
    let d = h(b, 0);
    let qs = &b[2..18];
    out.extend(qs.iter().map(|&q| ((q & 0xF) as i32 - 8) as f32 * d));
    out.extend(qs.iter().map(|&q| ((q >> 4) as i32 - 8) as f32 * d));
}

fn q4_1(b: &[u8], out: &mut Vec<f32>) {
    let (d, m) = (h(b, 0), h(b, 2));
    let qs = &b[4..20];
    out.extend(qs.iter().map(|&q| (q & 0xF) as f32 * d + m));
    out.extend(qs.iter().map(|&q| (q >> 4) as f32 * d + m));
}

/// Q5_0 (`with_min` false: d, qh, qs; w = d·(q − 16)) and Q5_1 (d, m, qh, qs; w = d·q + m).
fn q5(b: &[u8], with_min: bool, out: &mut Vec<f32>) {
    let d = h(b, 0);
    let (m, at) = if with_min { (h(b, 2), 4) } else { (0.0, 2) };
    let qh = u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    let qs = &b[at + 4..at + 20];
    let value = |q: u8, high: u32| {
        let q = (q as u32 | high) as i32;
        if with_min { q as f32 * d + m } else { (q - 16) as f32 * d }
    };
    out.extend(qs.iter().enumerate().map(|(j, &q)| value(q & 0xF, ((qh >> j) << 4) & 0x10)));
    out.extend(qs.iter().enumerate().map(|(j, &q)| value(q >> 4, (qh >> (j + 12)) & 0x10)));
}

/// The j-th 6-bit scale and min of a Q4_K/Q5_K block's 12 packed bytes (`get_scale_min_k4`).
fn scale_min(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}

fn q4_k(b: &[u8], out: &mut Vec<f32>) {
    let (d, dmin) = (h(b, 0), h(b, 2));
    let scales = &b[4..16];
    let qs = &b[16..144];
    for (g, q) in qs.chunks_exact(32).enumerate() {
        let (sc1, m1) = scale_min(2 * g, scales);
        let (sc2, m2) = scale_min(2 * g + 1, scales);
        let (d1, m1) = (d * sc1 as f32, dmin * m1 as f32);
        let (d2, m2) = (d * sc2 as f32, dmin * m2 as f32);
        out.extend(q.iter().map(|&q| d1 * (q & 0xF) as f32 - m1));
        out.extend(q.iter().map(|&q| d2 * (q >> 4) as f32 - m2));
    }
}

fn q5_k(b: &[u8], out: &mut Vec<f32>) {
    let (d, dmin) = (h(b, 0), h(b, 2));
    let scales = &b[4..16];
    let qh = &b[16..48];
    let ql = &b[48..176];
    for (g, q) in ql.chunks_exact(32).enumerate() {
        let (sc1, m1) = scale_min(2 * g, scales);
        let (sc2, m2) = scale_min(2 * g + 1, scales);
        let (d1, m1) = (d * sc1 as f32, dmin * m1 as f32);
        let (d2, m2) = (d * sc2 as f32, dmin * m2 as f32);
        let (u1, u2) = (1u8 << (2 * g), 2u8 << (2 * g));
        let high = |l: usize, u: u8| if qh[l] & u != 0 { 16.0 } else { 0.0 };
        out.extend(q.iter().enumerate().map(|(l, &q)| d1 * ((q & 0xF) as f32 + high(l, u1)) - m1));
        out.extend(q.iter().enumerate().map(|(l, &q)| d2 * ((q >> 4) as f32 + high(l, u2)) - m2));
    }
}

fn q6_k(b: &[u8], out: &mut Vec<f32>) {
    let d = h(b, 208);
    let start = out.len();
    out.resize(start + 256, 0.0);
    let y = &mut out[start..];
    for half in 0..2 {
        let ql = &b[64 * half..64 * half + 64];
        let qh = &b[128 + 32 * half..128 + 32 * half + 32];
        let sc = &b[192 + 8 * half..192 + 8 * half + 8];
        let y = &mut y[128 * half..128 * half + 128];
        for l in 0..32 {
            let is = l / 16;
            let q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i32 - 32;
            let q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
            let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
            let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
            let s = |k: usize| d * sc[is + k] as i8 as f32;
            y[l] = s(0) * q1 as f32;
            y[l + 32] = s(2) * q2 as f32;
            y[l + 64] = s(4) * q3 as f32;
            y[l + 96] = s(6) * q4 as f32;
        }
    }
}
