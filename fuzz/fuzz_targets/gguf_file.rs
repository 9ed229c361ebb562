//! A whole GGUF file: its header read from every prefix length the reader asks for
//! ([`gguf::parse`], as a network loader grows its prefix), then the full load of the model it
//! describes ([`Checkpoint::from_gguf_bytes`] and [`Checkpoint::weights`], which decodes every
//! tensor's blocks as it streams). Seeds: llama.cpp's own files (tests/fixtures/gguf).
//! Checks: no panic; a header that parses has its tensors in order, inside the file, apart.

#![no_main]

use libfuzzer_sys::fuzz_target;
use webmamba::Checkpoint;
use webmamba::load::gguf::{self, Limits, Parsed};

fuzz_target!(|data: &[u8]| {
    let size = data.len() as u64;
    let mut want = 64u64.min(size);
    let header = loop {
        match gguf::parse("m.gguf", &data[..want as usize], Some(size), Limits::default()) {
            Ok(Parsed::Done(h)) => break Some(h),
            Ok(Parsed::NeedMore(n)) => {
                assert!(n > want && n <= size, "asks for more than it had, within the file");
                want = n;
            }
            Err(_) => break None,
        }
    };
    if let Some(h) = header {
        assert!(h.data_start <= size && h.data_start % h.alignment == 0);
        let mut end = 0;
        for t in &h.tensors {
            assert!(t.offset >= end, "tensors apart, in order");
            end = t.offset + t.bytes.unwrap_or(0);
            assert!(h.data_start + end <= size);
        }
    }
    if let Ok(checkpoint) = Checkpoint::from_gguf_bytes("m.gguf", data.to_vec()) {
        let _ = checkpoint.weights();
    }
});
