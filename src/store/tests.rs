//! The store's rules over an in-memory backend with a clock the tests move: names, hits, every
//! kind of miss deleting its record, the budget (least recently used first), stale temporaries,
//! failed writes as warnings, and clear.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use super::*;
use crate::error::Error;

#[derive(Default)]
struct Files {
    files: RefCell<BTreeMap<String, (Vec<u8>, u64)>>,
    now: Cell<u64>,
    refuse_writes: Cell<bool>,
}

struct Memory(Rc<Files>);

impl Backend for Memory {
    fn read<'a>(&'a self, name: &'a str) -> LocalFuture<'a, Result<Option<Vec<u8>>>> {
        Box::pin(async move { Ok(self.0.files.borrow().get(name).map(|(b, _)| b.clone())) })
    }
    fn write<'a>(&'a self, name: &'a str, bytes: &'a [u8]) -> LocalFuture<'a, Result<()>> {
        Box::pin(async move {
            if self.0.refuse_writes.get() {
                return Err(Error::Storage {
                    what: format!("writing {name}"),
                    reason: "QuotaExceededError".into(),
                });
            }
            self.0.files.borrow_mut().insert(name.to_owned(), (bytes.to_vec(), self.0.now.get()));
            Ok(())
        })
    }
    fn remove<'a>(&'a self, name: &'a str) -> LocalFuture<'a, Result<()>> {
        Box::pin(async move {
            self.0.files.borrow_mut().remove(name);
            Ok(())
        })
    }
    fn list(&self) -> LocalFuture<'_, Result<Vec<Entry>>> {
        Box::pin(async move {
            let files = self.0.files.borrow();
            Ok(files
                .iter()
                .map(|(n, (b, t))| Entry { name: n.clone(), bytes: b.len() as u64, used_ms: *t })
                .collect())
        })
    }
    fn touch<'a>(&'a self, name: &'a str) -> LocalFuture<'a, Result<()>> {
        Box::pin(async move {
            if let Some(f) = self.0.files.borrow_mut().get_mut(name) {
                f.1 = self.0.now.get();
            }
            Ok(())
        })
    }
    fn now_ms(&self) -> u64 {
        self.0.now.get()
    }
}

const FP: Key = [1; 32];

fn store(budget_bytes: u64) -> (Store, Rc<Files>) {
    let files = Rc::new(Files::default());
    let config = StoreConfig { budget_bytes, sparse_every: 1 };
    (Store::new(Box::new(Memory(files.clone())), FP, config), files)
}

fn checkpoint(key: u8, values: usize) -> Record {
    Record {
        kind: Kind::Checkpoint,
        fingerprint: FP,
        key: [key; 32],
        position: 16 * key as u64,
        logits: vec![],
        values: vec![0.5; values],
    }
}

fn run<T>(f: impl std::future::Future<Output = T>) -> T {
    pollster::block_on(f)
}

#[test]
fn a_record_is_found_under_its_key_and_kind_only() {
    let (s, _) = store(1 << 20);
    run(s.put(&checkpoint(3, 10)));
    assert_eq!(run(s.get(Kind::Checkpoint, &[3; 32])), Some(checkpoint(3, 10)));
    assert_eq!(run(s.get(Kind::Page, &[3; 32])), None, "a page of that key");
    assert_eq!(run(s.get(Kind::Checkpoint, &[4; 32])), None);
    assert_eq!(s.stats(), StoreStats { hits: 1, misses: 0, writes: 1, evictions: 0 });
    assert!(s.take_warnings().is_empty());
}

#[test]
fn damaged_cut_and_foreign_records_are_misses_that_are_deleted() {
    let (s, files) = store(1 << 20);
    let name = Store::name(Kind::Checkpoint, &FP, &[3; 32]);
    let good = checkpoint(3, 10).to_bytes();
    let mut damaged = good.clone();
    damaged[100] ^= 1;
    let foreign = Record { fingerprint: [2; 32], ..checkpoint(3, 10) }.to_bytes();
    for (what, bytes) in
        [("damaged", damaged), ("cut", good[..good.len() / 2].to_vec()), ("foreign", foreign)]
    {
        files.files.borrow_mut().insert(name.clone(), (bytes, 0));
        assert_eq!(run(s.get(Kind::Checkpoint, &[3; 32])), None, "{what}");
        assert!(!files.files.borrow().contains_key(&name), "{what}: the record is deleted");
        let warnings = s.take_warnings();
        assert!(warnings.len() == 1 && warnings[0].contains("removed"), "{what}: {warnings:?}");
    }
    assert_eq!(s.stats().misses, 3);
}

#[test]
fn the_budget_removes_least_recently_used_records_first() {
    let size = checkpoint(0, 100).to_bytes().len() as u64;
    let (s, files) = store(3 * size);
    for key in 0..3 {
        files.now.set(key as u64);
        run(s.put(&checkpoint(key, 100)));
    }
    files.now.set(10);
    assert!(run(s.get(Kind::Checkpoint, &[0; 32])).is_some(), "record 0 used: now the most recent");
    files.now.set(11);
    run(s.put(&checkpoint(3, 100)));
    assert!(run(s.get(Kind::Checkpoint, &[1; 32])).is_none(), "the least recently used went");
    for key in [0, 2, 3] {
        assert!(run(s.get(Kind::Checkpoint, &[key; 32])).is_some(), "record {key} kept");
    }
    assert_eq!(run(s.bytes()), 3 * size);
    assert_eq!(s.stats().evictions, 1);
}

#[test]
fn stale_temporaries_go_and_other_files_stay() {
    let (s, files) = store(1 << 20);
    let temp = format!("{}.77-0{TEMP_SUFFIX}", Store::name(Kind::Page, &FP, &[5; 32]));
    files.files.borrow_mut().insert(temp.clone(), (vec![0; 50], 0));
    files.files.borrow_mut().insert("notes.txt".into(), (vec![0; 50], 0));
    files.now.set(1000);
    assert_eq!(run(s.bytes()), 50, "a fresh temporary counts, other files do not");
    assert_eq!(run(s.get(Kind::Page, &[5; 32])), None, "a temporary is never read");
    files.now.set(STALE_TEMP_MS + 1);
    assert_eq!(run(s.bytes()), 0);
    assert!(!files.files.borrow().contains_key(&temp));
    run(s.put(&checkpoint(1, 10)));
    run(s.clear()).unwrap();
    assert_eq!(files.files.borrow().keys().collect::<Vec<_>>(), ["notes.txt"], "clear leaves other files");
}

#[test]
fn a_refused_write_or_an_oversized_record_is_a_warning() {
    let (s, files) = store(1000);
    files.refuse_writes.set(true);
    run(s.put(&checkpoint(1, 10)));
    let w = s.take_warnings();
    assert!(w.len() == 1 && w[0].contains("QuotaExceededError") && w[0].contains("in memory"), "{w:?}");
    files.refuse_writes.set(false);
    run(s.put(&checkpoint(2, 1000)));
    let w = s.take_warnings();
    assert!(w.len() == 1 && w[0].contains("exceeds the store's budget"), "{w:?}");
    assert_eq!(s.stats().writes, 0);
}

#[test]
fn names_depend_on_the_fingerprint_the_key_and_the_kind() {
    let names = [
        Store::name(Kind::Checkpoint, &FP, &[3; 32]),
        Store::name(Kind::Checkpoint, &[2; 32], &[3; 32]),
        Store::name(Kind::Checkpoint, &FP, &[4; 32]),
        Store::name(Kind::Page, &FP, &[3; 32]),
    ];
    for (i, a) in names.iter().enumerate() {
        assert!(ours(a), "{a}");
        for b in &names[i + 1..] {
            assert_ne!(a, b);
        }
    }
    assert_ne!(Store::fingerprint(&FP, "cpu"), Store::fingerprint(&FP, "gpu f16 weights f32 kv"));
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn a_folder_keeps_records_across_stores() {
    let dir = std::env::temp_dir().join(format!("webmamba-store-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let open = || Store::new(Box::new(folder::Folder::open(&dir).unwrap()), FP, StoreConfig::default());
    run(open().put(&checkpoint(3, 10)));
    std::fs::write(dir.join("keep.txt"), b"not ours").unwrap();
    let second = open();
    assert_eq!(
        run(second.get(Kind::Checkpoint, &[3; 32])),
        Some(checkpoint(3, 10)),
        "another store finds it"
    );
    let leftovers: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers.len(), 2, "no temporary left behind: {leftovers:?}");
    run(second.clear()).unwrap();
    assert_eq!(run(open().get(Kind::Checkpoint, &[3; 32])), None);
    assert!(dir.join("keep.txt").exists(), "clear removes records only");
    std::fs::remove_dir_all(&dir).unwrap();
}
