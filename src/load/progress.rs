//! Loading progress: what a page shows in its progress bar and the CLI in its own. Events are
//! per (phase, file), monotone, and the last one of each has `loaded == total`. They are
//! thinned out (about one per percent, at least 1 MiB apart) so a 5 GB download does not call
//! into JavaScript a hundred thousand times.

use std::collections::HashMap;

/// What is being done.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Bytes read from the source: the network, the offline cache or a local file.
    Download,
    /// Bytes of the data section converted and stored (GPU buffers, or memory for the CPU).
    Upload,
    /// Kernels compiled (`loaded` of `total` pipelines).
    Compile,
}

impl Phase {
    /// `"download"`, `"upload"` or `"compile"` (the JavaScript API's names).
    pub fn name(self) -> &'static str {
        match self {
            Phase::Download => "download",
            Phase::Upload => "upload",
            Phase::Compile => "compile",
        }
    }
}

/// One progress event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    /// What is being done.
    pub phase: Phase,
    /// The file (`model-00001-of-00004.safetensors`, `tokenizer.json`; `kernels` for compile).
    pub file: String,
    /// Done so far (bytes, or pipelines).
    pub loaded: u64,
    /// Total (bytes, or pipelines).
    pub total: u64,
    /// Something went wrong that did not stop the load (e.g. the offline cache is full).
    pub(crate) warning: Option<String>,
}

/// Where progress events go.
type Callback = Box<dyn FnMut(&Progress)>;

/// Sends thinned-out progress events to a callback and keeps the warnings.
pub struct Reporter {
    callback: Option<Callback>,
    last: HashMap<(Phase, String), u64>,
    warnings: Vec<String>,
}

impl Reporter {
    /// Reports to `callback`.
    pub fn new(callback: impl FnMut(&Progress) + 'static) -> Self {
        Self { callback: Some(Box::new(callback)), last: HashMap::new(), warnings: Vec::new() }
    }

    /// Reports nothing (warnings are still kept).
    pub fn silent() -> Self {
        Self { callback: None, last: HashMap::new(), warnings: Vec::new() }
    }

    /// `loaded` of `total` done in `phase` for `file`; sent when it is the first, the last, or
    /// at least a percent (and 1 MiB for bytes) past the last one sent.
    pub(crate) fn report(&mut self, phase: Phase, file: &str, loaded: u64, total: u64) {
        let step = if phase == Phase::Compile { 1 } else { (total / 100).max(1 << 20) };
        let key = (phase, file.to_string());
        let send = match self.last.get(&key) {
            None => true,
            Some(&last) => loaded > last && (loaded == total || loaded - last >= step),
        };
        if send {
            self.last.insert(key, loaded);
            self.send(Progress { phase, file: file.to_string(), loaded, total, warning: None });
        }
    }

    /// A warning about `file` in `phase`: kept for the load's result and sent with the last
    /// progress values of that file.
    #[cfg(target_arch = "wasm32")]
    pub(crate) fn warn(&mut self, phase: Phase, file: &str, total: u64, message: String) {
        let loaded = self.last.get(&(phase, file.to_string())).copied().unwrap_or(0);
        self.warnings.push(message.clone());
        self.send(Progress { phase, file: file.to_string(), loaded, total, warning: Some(message) });
    }

    /// The `loaded` of the last event sent for (`phase`, `file`); 0 before any.
    #[cfg(target_arch = "wasm32")]
    pub(crate) fn loaded(&self, phase: Phase, file: &str) -> u64 {
        self.last.get(&(phase, file.to_string())).copied().unwrap_or(0)
    }

    /// The warnings so far.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    fn send(&mut self, p: Progress) {
        if let Some(callback) = &mut self.callback {
            callback(&p);
        }
    }
}
