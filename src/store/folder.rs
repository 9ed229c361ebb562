//! The store's records in a folder (`--store DIR`), one file each. A record is written to a
//! temporary name and renamed into place (atomic on one file system), so another process never
//! reads half of one; a temporary left by a crash is never read and is removed once stale.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};
use crate::store::{Backend, Entry, LocalFuture, TEMP_SUFFIX};

/// A folder of records.
pub struct Folder {
    dir: PathBuf,
    /// Numbers this process's temporary files.
    next_temp: AtomicU64,
}

fn io(what: String, e: std::io::Error) -> Error {
    Error::Storage { what, reason: e.to_string() }
}

fn millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_millis() as u64
}

impl Folder {
    /// The folder `dir`, created if missing.
    pub fn open(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir)
            .map_err(|e| io(format!("creating the store folder {}", dir.display()), e))?;
        Ok(Self { dir: dir.to_path_buf(), next_temp: AtomicU64::new(0) })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn read_now(&self, name: &str) -> Result<Option<Vec<u8>>> {
        match std::fs::read(self.path(name)) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(format!("reading {}", self.path(name).display()), e)),
        }
    }

    fn write_now(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let n = self.next_temp.fetch_add(1, Ordering::Relaxed);
        let temp = self.path(&format!("{name}.{}-{n}{TEMP_SUFFIX}", std::process::id()));
        let result = std::fs::write(&temp, bytes).and_then(|()| std::fs::rename(&temp, self.path(name)));
        result.map_err(|e| {
            let _ = std::fs::remove_file(&temp);
            io(format!("writing {}", self.path(name).display()), e)
        })
    }

    fn remove_now(&self, name: &str) -> Result<()> {
        match std::fs::remove_file(self.path(name)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io(format!("removing {}", self.path(name).display()), e)),
        }
    }

    fn list_now(&self) -> Result<Vec<Entry>> {
        let what = || format!("listing the store folder {}", self.dir.display());
        let mut out = Vec::new();
        for item in std::fs::read_dir(&self.dir).map_err(|e| io(what(), e))? {
            let item = item.map_err(|e| io(what(), e))?;
            let Ok(meta) = item.metadata() else { continue }; // removed meanwhile
            let Some(name) = item.file_name().to_str().map(str::to_owned) else { continue };
            if meta.is_file() {
                let used_ms = meta.modified().map(millis).unwrap_or(0);
                out.push(Entry { name, bytes: meta.len(), used_ms });
            }
        }
        Ok(out)
    }

    fn touch_now(&self, name: &str) -> Result<()> {
        let file = std::fs::File::options().write(true).open(self.path(name));
        match file.and_then(|f| f.set_modified(SystemTime::now())) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io(format!("marking {} used", self.path(name).display()), e)),
        }
    }
}

impl Backend for Folder {
    fn read<'a>(&'a self, name: &'a str) -> LocalFuture<'a, Result<Option<Vec<u8>>>> {
        Box::pin(async move { self.read_now(name) })
    }
    fn write<'a>(&'a self, name: &'a str, bytes: &'a [u8]) -> LocalFuture<'a, Result<()>> {
        Box::pin(async move { self.write_now(name, bytes) })
    }
    fn remove<'a>(&'a self, name: &'a str) -> LocalFuture<'a, Result<()>> {
        Box::pin(async move { self.remove_now(name) })
    }
    fn list(&self) -> LocalFuture<'_, Result<Vec<Entry>>> {
        Box::pin(async move { self.list_now() })
    }
    fn touch<'a>(&'a self, name: &'a str) -> LocalFuture<'a, Result<()>> {
        Box::pin(async move { self.touch_now(name) })
    }
    fn now_ms(&self) -> u64 {
        millis(SystemTime::now())
    }
}
