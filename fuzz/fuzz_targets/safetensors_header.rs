//! A whole `model.safetensors` file: its 8-byte header length and JSON tensor table
//! ([`FileHeader`]), then the full load of the tiny fixture model from it
//! ([`Checkpoint::from_bytes`] and [`Checkpoint::weights`], which streams every tensor).
//! Checks: no panic, and a header that parses describes exactly the file it came from.

#![no_main]

use libfuzzer_sys::fuzz_target;
use webmamba::Checkpoint;
use webmamba::model::FileHeader;

/// The tiny fixture's config: the layout check bounds every size the loader allocates.
const CONFIG: &[u8] = include_bytes!("../../tests/fixtures/tiny-f32/config.json");
const NAME: &str = "model.safetensors";

fuzz_target!(|data: &[u8]| {
    let size = data.len() as u64;
    if let Ok(len) = FileHeader::header_len(NAME, &data[..data.len().min(8)], Some(size)) {
        let json = &data[8..8 + len as usize];
        if let Ok(header) = FileHeader::parse(NAME, json, Some(size)) {
            assert_eq!(header.data_start, 8 + len);
            assert_eq!(header.size, size);
            let mut at = 0;
            for t in &header.tensors {
                assert_eq!(t.start, at, "tensors tile the data section");
                assert!(t.end >= t.start && header.data_start + t.end <= size);
                at = t.end;
            }
        }
    }
    // Unknown size (as when streaming over the network): must not panic either.
    let _ = FileHeader::header_len(NAME, &data[..data.len().min(8)], None);
    if let Ok(checkpoint) = Checkpoint::from_bytes(CONFIG, vec![(NAME.into(), data.to_vec())], None, None) {
        let _ = checkpoint.weights();
    }
});
