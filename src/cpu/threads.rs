//! CPU threads: each CPU model owns a rayon pool ([`Threads`], made once at load; in wasm,
//! rayon's global pool of Web Workers where the package's threaded build started one), and the
//! forward pass runs inside it. The loops that split work — a GEMV's output rows, a GEMM's
//! output columns, a scan's channels, attention's (row, head) pairs — ask [`for_chunks`] /
//! [`map_chunks`], which run in parallel on the current pool and sequentially outside one.
//!
//! Every split is of outputs, never of a sum: each output is computed by the same code in the
//! same order whichever thread runs it and however the work is cut, so results are bitwise the
//! same at any thread count (`tests/cpu_threads.rs` checks it).

use std::cell::Cell;
use std::sync::Arc;

use rayon::prelude::*;

use crate::error::{Error, Result};

/// Most threads a model's pool may have.
pub const MAX_THREADS: usize = 256;

/// A model's worker threads.
#[derive(Clone)]
pub struct Threads {
    /// The pool; `None` runs everything on the calling thread (or, with `global`, on rayon's
    /// global pool).
    pool: Option<Arc<rayon::ThreadPool>>,
    /// Runs on rayon's global pool: in wasm, the Web Workers the page started
    /// (`initThreadPool`, the `wasm-threads` build) before loading the model.
    global: bool,
}

impl Threads {
    /// One thread: the caller's.
    pub fn single() -> Self {
        Threads { pool: None, global: false }
    }

    /// Rayon's global pool when it has more than one thread — in wasm, the Web Workers
    /// `initThreadPool` started (only the `wasm-threads` build can) — else one thread.
    pub fn global() -> Self {
        // Natively the global pool would be made on first use; in wasm without threads it is
        // the calling thread alone.
        let workers = cfg!(feature = "wasm-threads") && rayon::current_num_threads() > 1;
        Threads { pool: None, global: workers }
    }

    /// A pool of `wanted` threads (`None`: [`default_threads`]). Where threads cannot be
    /// started (wasm without shared memory) the default is one thread and an explicit count
    /// above one is [`Error::InvalidInput`].
    pub fn new(wanted: Option<usize>) -> Result<Self> {
        let n = match wanted {
            Some(0) => return Err(Error::InvalidInput("threads must be at least 1".into())),
            Some(n) if n > MAX_THREADS => {
                return Err(Error::InvalidInput(format!("threads must be at most {MAX_THREADS}, got {n}")));
            }
            Some(n) => n,
            None => default_threads(),
        };
        if n == 1 {
            return Ok(Self::single());
        }
        Self::pool(n, wanted.is_some(), false)
    }

    /// `n` threads (≥ 2) that split work into pieces as small as alignment allows, whatever
    /// their size: the thread-equality test runs small fixtures on it so that every split is
    /// exercised. Slower than [`Threads::new`] for real work.
    pub fn finest(n: usize) -> Result<Self> {
        Self::pool(n.clamp(2, MAX_THREADS), true, true)
    }

    fn pool(n: usize, asked: bool, finest: bool) -> Result<Self> {
        let built = rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("webmamba-cpu-{i}"))
            .start_handler(move |_| FINEST.set(finest))
            .build();
        match built {
            Ok(pool) => Ok(Threads { pool: Some(Arc::new(pool)), global: false }),
            Err(_) if !asked => Ok(Self::single()),
            Err(e) => Err(Error::InvalidInput(format!("{n} threads cannot be started here: {e}"))),
        }
    }

    /// How many threads run a forward pass.
    pub fn count(&self) -> usize {
        match &self.pool {
            Some(pool) => pool.current_num_threads(),
            None if self.global => rayon::current_num_threads(),
            None => 1,
        }
    }

    /// Runs `f` on the pool (its parallel loops split across it), or here with one thread.
    pub fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(pool) => pool.install(f),
            // `scope` runs its body on one of the pool's threads (the caller waits), so the
            // loops inside see a pool
            None if self.global => rayon::scope(|_| f()),
            None => f(),
        }
    }
}

impl std::fmt::Debug for Threads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Threads({})", self.count())
    }
}

/// The thread count a model gets when none is asked for: every core natively
/// (`std::thread::available_parallelism`), one in wasm.
pub fn default_threads() -> usize {
    if cfg!(target_arch = "wasm32") {
        return 1;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(MAX_THREADS)
}

thread_local! {
    /// Set on the threads of a [`Threads::finest`] pool.
    static FINEST: Cell<bool> = const { Cell::new(false) };
}

/// Whether this code runs on a pool of more than one thread.
fn parallel() -> bool {
    rayon::current_thread_index().is_some() && rayon::current_num_threads() > 1
}

/// Work a piece should have before it is worth handing to another thread, as a count of the
/// cheapest steps that split (a weight read, a state entry updated): 64 Ki natively; four
/// times that in wasm, where handing work to a sleeping Web Worker costs more — a 2-thread
/// decode of the 130M model in Chromium ran at 38–40 tok/s with 64 Ki, 40–43 with 256 Ki
/// (1 thread: 28–31; both builds alternated in one run, 2026-12-04).
pub const MIN_PIECE: usize = if cfg!(target_arch = "wasm32") { 1 << 18 } else { 1 << 16 };

/// The fewest elements a piece of work takes when each is `steps` of [`MIN_PIECE`]'s steps (a
/// GEMV row: its inputs; a scan channel: tokens × state entries): `chunk_len`'s `min`.
pub fn min_elements(steps: usize) -> usize {
    MIN_PIECE / steps.max(1)
}

/// How many elements of `n` one piece of work takes: about four pieces per thread, at least
/// `min` elements, a multiple of `align` (the whole of `n` outside a pool).
pub fn chunk_len(n: usize, min: usize, align: usize) -> usize {
    let align = align.max(1);
    if !parallel() {
        return n.max(1).next_multiple_of(align);
    }
    if FINEST.get() {
        return align;
    }
    let pieces = 4 * rayon::current_num_threads();
    n.div_ceil(pieces).max(min).max(1).next_multiple_of(align)
}

/// `f(i, piece)` for the `chunk`-element pieces of `data` (the last may be shorter), in
/// parallel on the current pool.
pub fn for_chunks<T: Send>(data: &mut [T], chunk: usize, f: impl Fn(usize, &mut [T]) + Sync + Send) {
    if parallel() {
        data.par_chunks_mut(chunk).enumerate().for_each(|(i, c)| f(i, c));
    } else {
        data.chunks_mut(chunk).enumerate().for_each(|(i, c)| f(i, c));
    }
}

/// [`for_chunks`] returning each piece's result, in order.
pub fn map_chunks<T: Send, R: Send>(
    data: &mut [T],
    chunk: usize,
    f: impl Fn(usize, &mut [T]) -> R + Sync + Send,
) -> Vec<R> {
    if parallel() {
        data.par_chunks_mut(chunk).enumerate().map(|(i, c)| f(i, c)).collect()
    } else {
        data.chunks_mut(chunk).enumerate().map(|(i, c)| f(i, c)).collect()
    }
}

/// `f(i)` for `i` in `0..n`, in parallel on the current pool, results in order.
pub fn map_range<R: Send>(n: usize, f: impl Fn(usize) -> R + Sync + Send) -> Vec<R> {
    if parallel() { (0..n).into_par_iter().map(f).collect() } else { (0..n).map(f).collect() }
}
