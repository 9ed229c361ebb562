//! [`Runtime::import_state`] on the CPU engine of the tiny fixture model. Input: a mode byte,
//! then the blob. Mode bit 0 clear: the blob is imported as is (its blake3 checksum must
//! match). Set: the blob is the body only and its checksum is appended first, so the structure
//! behind the checksum (magic, version, fingerprint, prefix hash, lengths, tokens, logits,
//! state) gets fuzzed too. Mode bit 1 set: the token prefix hash is recomputed first as well,
//! so fuzzed token ids reach the vocabulary check and the checkpoint cache.
//!
//! Each input runs in a fresh session that first imports a known state (five tokens). Checks:
//! no panic; a failed import leaves the session exactly as it was (same history, logits and
//! exported bytes); a successful one exports back to the very bytes imported; either way the
//! session still runs (appending a token succeeds).
//!
//! With `WEBMAMBA_FUZZ_SEEDS=<dir>` set, the first run writes seed inputs into `<dir>`.

#![no_main]

use std::sync::{Mutex, OnceLock};

use libfuzzer_sys::fuzz_target;
use pollster::block_on;
use webmamba::{CacheConfig, Checkpoint, Engine, Retention, Runtime};

const CONFIG: &[u8] = include_bytes!("../../tests/fixtures/tiny-f32/config.json");
const WEIGHTS: &[u8] = include_bytes!("../../tests/fixtures/tiny-f32/model.safetensors");

struct Fixture {
    runtime: Runtime,
    /// An exported session of five tokens: every fuzzed session starts from it.
    base: Vec<u8>,
}

fn fixture() -> &'static Mutex<Fixture> {
    static FIXTURE: OnceLock<Mutex<Fixture>> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let files = vec![("model.safetensors".to_string(), WEIGHTS.to_vec())];
        let checkpoint = Checkpoint::from_bytes(CONFIG, files, None, None).unwrap();
        let engine = Engine::cpu(checkpoint.weights().unwrap());
        // Small blocks and budget: imports also exercise the cache's insertion and eviction.
        let cache = CacheConfig { block_size: 4, retention: Retention::Dense, budget_bytes: 64 << 10 };
        let mut runtime = Runtime::new(engine, cache).unwrap();
        let id = runtime.new_session().unwrap();
        let empty = block_on(runtime.export_state(id)).unwrap();
        block_on(runtime.append(id, &[1, 2, 3, 4, 5])).unwrap();
        let base = block_on(runtime.export_state(id)).unwrap();
        block_on(runtime.append(id, &[299, 0, 7])).unwrap();
        let longer = block_on(runtime.export_state(id)).unwrap();
        runtime.close_session(id).unwrap();
        if let Ok(dir) = std::env::var("WEBMAMBA_FUZZ_SEEDS") {
            let body = |b: &[u8]| b[..b.len() - 32].to_vec();
            let seeds = [
                ("raw-empty", [&[0][..], &empty].concat()),
                ("raw-five", [&[0][..], &base].concat()),
                ("raw-eight", [&[0][..], &longer].concat()),
                ("fix-empty", [&[1][..], &body(&empty)].concat()),
                ("fix-five", [&[1][..], &body(&base)].concat()),
                ("fix-eight", [&[1][..], &body(&longer)].concat()),
                ("hash-empty", [&[3][..], &body(&empty)].concat()),
                ("hash-five", [&[3][..], &body(&base)].concat()),
                ("hash-eight", [&[3][..], &body(&longer)].concat()),
            ];
            std::fs::create_dir_all(&dir).unwrap();
            for (name, bytes) in seeds {
                std::fs::write(std::path::Path::new(&dir).join(name), bytes).unwrap();
            }
        }
        Mutex::new(Fixture { runtime, base })
    })
}

/// Rewrites the token prefix hash (bytes 44..76 of the body) to match the tokens that follow
/// it, as `export_state` computes it (`src/session/export.rs`), so fuzzed tokens get past it.
fn fix_prefix_hash(body: &mut [u8]) {
    let Some(n) = body.get(76..84).map(|b| u64::from_le_bytes(b.try_into().unwrap())) else { return };
    let end = n.checked_mul(4).and_then(|b| b.checked_add(84)).filter(|&e| e <= body.len() as u64);
    let Some(end) = end else { return };
    let mut h = blake3::Hasher::new();
    h.update(b"webmamba/tokens/v1");
    h.update(&body[84..end as usize]);
    body[44..76].copy_from_slice(h.finalize().as_bytes());
}

fuzz_target!(|data: &[u8]| {
    let mut guard = fixture().lock().unwrap_or_else(|e| e.into_inner());
    let Some((&mode, rest)) = data.split_first() else { return };
    let mut body = rest.to_vec();
    if mode & 2 == 2 {
        fix_prefix_hash(&mut body);
    }
    let blob = if mode & 1 == 1 { [&body[..], blake3::hash(&body).as_bytes()].concat() } else { body };
    let Fixture { runtime, base } = &mut *guard;
    let id = runtime.new_session().unwrap();
    block_on(runtime.import_state(id, base)).unwrap();
    let history = runtime.history(id).unwrap().to_vec();
    let logits = runtime.logits(id).unwrap().map(<[f32]>::to_vec);
    match block_on(runtime.import_state(id, &blob)) {
        Err(_) => {
            assert_eq!(runtime.history(id).unwrap(), history, "a failed import changed the history");
            let same = runtime.logits(id).unwrap().map(<[f32]>::to_vec);
            assert_eq!(
                same.map(|l| l.iter().map(|x| x.to_bits()).collect::<Vec<_>>()),
                logits.map(|l| l.iter().map(|x| x.to_bits()).collect::<Vec<_>>()),
                "a failed import changed the logits"
            );
            let again = block_on(runtime.export_state(id)).unwrap();
            assert!(again == *base, "a failed import changed the exported state");
        }
        Ok(()) => {
            let again = block_on(runtime.export_state(id)).unwrap();
            assert!(again == blob, "an imported state does not export back to the same bytes");
        }
    }
    block_on(runtime.append(id, &[3])).expect("the session still runs after an import");
    runtime.close_session(id).unwrap();
});
