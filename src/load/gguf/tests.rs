//! The header reader on hand-built files: every cut point, and the malformed headers the
//! reader must refuse by name. (Files llama.cpp wrote are read in `tests/gguf.rs`.)

use super::*;

/// Bytes of a GGUF v3 file: metadata written as (key, type id, value bytes), then tensors as
/// (name, dims, type id, offset), then `data`, aligned to 32.
struct Build {
    kv: Vec<(String, u32, Vec<u8>)>,
    tensors: Vec<(String, Vec<u64>, u32, u64)>,
    data: Vec<u8>,
    version: u32,
}

fn s(v: &str) -> Vec<u8> {
    let mut b = (v.len() as u64).to_le_bytes().to_vec();
    b.extend(v.as_bytes());
    b
}

impl Build {
    fn new() -> Self {
        let mut b = Self { kv: vec![], tensors: vec![], data: vec![0; 1024 + 34], version: 3 };
        b.kv.push(("general.architecture".into(), 8, s("mamba")));
        b.kv.push(("mamba.block_count".into(), 4, 2u32.to_le_bytes().to_vec()));
        let mut arr = 8u32.to_le_bytes().to_vec();
        arr.extend(3u64.to_le_bytes());
        for t in ["a", "bc", "<s>"] {
            arr.extend(s(t));
        }
        b.kv.push(("tokenizer.ggml.tokens".into(), 9, arr));
        b.tensors.push(("token_embd.weight".into(), vec![4, 64], 0, 0));
        b.tensors.push(("blk.0.ssm_in.weight".into(), vec![32], 8, 1024));
        b
    }

    fn bytes(&self) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend(self.version.to_le_bytes());
        out.extend((self.tensors.len() as u64).to_le_bytes());
        out.extend((self.kv.len() as u64).to_le_bytes());
        for (k, ty, v) in &self.kv {
            out.extend(s(k));
            out.extend(ty.to_le_bytes());
            out.extend(v);
        }
        for (name, dims, ty, offset) in &self.tensors {
            out.extend(s(name));
            out.extend((dims.len() as u32).to_le_bytes());
            for d in dims {
                out.extend(d.to_le_bytes());
            }
            out.extend(ty.to_le_bytes());
            out.extend(offset.to_le_bytes());
        }
        out.resize(out.len().div_ceil(32) * 32, 0);
        out.extend(&self.data);
        out
    }
}

fn read(bytes: &[u8]) -> crate::error::Result<Parsed> {
    parse("m.gguf", bytes, Some(bytes.len() as u64), Limits::default())
}

fn refused(bytes: &[u8], says: &str) {
    match read(bytes) {
        Err(crate::error::Error::Gguf { reason, .. }) => {
            assert!(reason.contains(says), "{reason:?} should say {says:?}")
        }
        other => panic!("expected a Gguf error saying {says:?}, got {other:?}"),
    }
}

#[test]
fn a_header_reads_whole_and_asks_for_more_at_every_cut() {
    let b = Build::new();
    let bytes = b.bytes();
    let Parsed::Done(h) = read(&bytes).unwrap() else { panic!("whole file") };
    assert_eq!(h.version, 3);
    assert_eq!(h.metadata.str("general.architecture").unwrap(), "mamba");
    assert_eq!(h.metadata.uint("mamba.block_count", 100).unwrap(), 2);
    let tokens = h.metadata.opt_array("tokenizer.ggml.tokens").unwrap().unwrap();
    assert_eq!(tokens[2], Value::Str("<s>".into()));
    assert_eq!(h.tensors.len(), 2);
    assert_eq!((h.tensors[0].dims.clone(), h.tensors[0].bytes), (vec![4, 64], Some(1024)));
    assert_eq!((h.tensors[1].ty, h.tensors[1].bytes), (GgmlType::Q8_0, Some(34)));
    assert_eq!(h.data_start % 32, 0);
    assert_eq!(h.data_start + 1024 + 34, bytes.len() as u64);
    for cut in 0..h.data_start as usize {
        match parse("m.gguf", &bytes[..cut], None, Limits::default()).unwrap() {
            Parsed::NeedMore(n) => assert!(n > cut as u64 && n <= h.data_start, "cut {cut}: {n}"),
            Parsed::Done(_) => assert!(cut as u64 >= h.data_start - 31, "done at cut {cut}"),
        }
    }
}

#[test]
fn malformed_headers_are_refused_by_name() {
    let mut bad = Build::new().bytes();
    bad[0] = b'X';
    refused(&bad, "not a GGUF file");
    let mut b = Build::new();
    b.version = 1;
    refused(&b.bytes(), "version 1");
    let mut b = Build::new();
    b.tensors[1].3 = 2048;
    refused(&b.bytes(), "past its end");
    let mut b = Build::new();
    b.tensors[1].3 = 992;
    refused(&b.bytes(), "overlaps");
    let mut b = Build::new();
    b.tensors[1].3 = 1030;
    refused(&b.bytes(), "alignment");
    let mut b = Build::new();
    b.tensors[0].1 = vec![1 << 21, 1 << 21];
    refused(&b.bytes(), "elements at most");
    let mut b = Build::new();
    b.tensors[0].1 = vec![4, 4, 4, 1, 4];
    refused(&b.bytes(), "5 dimensions");
    let mut b = Build::new();
    b.tensors[0].2 = 77;
    refused(&b.bytes(), "type id 77 unknown");
    let mut b = Build::new();
    b.tensors[1].1 = vec![16];
    refused(&b.bytes(), "not whole blocks");
    let mut b = Build::new();
    b.tensors[1].0 = "token_embd.weight".into();
    refused(&b.bytes(), "appears twice");
    let mut b = Build::new();
    b.kv.push(("general.name".into(), 8, (1u64 << 40).to_le_bytes().to_vec()));
    refused(&b.bytes(), "more than the header may hold");
    let mut b = Build::new();
    let mut arr = 4u32.to_le_bytes().to_vec();
    arr.extend((1u64 << 40).to_le_bytes());
    b.kv.push(("x.counts".into(), 9, arr));
    refused(&b.bytes(), "array of 1099511627776 values");
    let mut b = Build::new();
    b.kv.push(("general.alignment".into(), 4, 48u32.to_le_bytes().to_vec()));
    refused(&b.bytes(), "power of two");
    let mut b = Build::new();
    b.kv.push(("x.y".into(), 13, vec![]));
    refused(&b.bytes(), "value type 13 unknown");
    let mut b = Build::new();
    b.kv.push(b.kv[0].clone());
    refused(&b.bytes(), "appears twice");
    // Arrays of arrays of arrays.
    let mut b = Build::new();
    let mut arr = 9u32.to_le_bytes().to_vec();
    arr.extend(1u64.to_le_bytes());
    arr.extend(9u32.to_le_bytes());
    arr.extend(1u64.to_le_bytes());
    arr.extend(9u32.to_le_bytes());
    arr.extend(0u64.to_le_bytes());
    b.kv.push(("x.deep".into(), 9, arr));
    refused(&b.bytes(), "nested");
    // A header cut short is truncated when the size is known.
    let bytes = Build::new().bytes();
    let cut = &bytes[..40];
    assert!(matches!(
        parse("m.gguf", cut, Some(40), Limits::default()),
        Err(crate::error::Error::Gguf { reason, .. }) if reason.contains("truncated")
    ));
}

#[test]
fn limits_bound_the_header() {
    let bytes = Build::new().bytes();
    let tight = Limits { header_bytes: 100, ..Limits::default() };
    assert!(matches!(
        parse("m.gguf", &bytes, None, tight),
        Err(crate::error::Error::Gguf { reason, .. }) if reason.contains("more than the 100 allowed")
    ));
    let few = Limits { array_values: 2, ..Limits::default() };
    assert!(parse("m.gguf", &bytes, None, few).is_err());
}

#[test]
fn a_vocabulary_only_file_ends_with_its_metadata() {
    let mut b = Build::new();
    b.tensors.clear();
    b.data.clear();
    let mut bytes = b.bytes();
    // llama.cpp writes no alignment padding after the metadata of a file without tensors.
    while bytes.last() == Some(&0) {
        bytes.pop();
    }
    let Parsed::Done(h) = read(&bytes).unwrap() else { panic!("whole file") };
    assert!(h.tensors.is_empty() && h.data_start == bytes.len() as u64);
}
