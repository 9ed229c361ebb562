//! CPU threads: each CPU model owns a rayon pool ([`Threads`], made once at load; in wasm,
//! rayon's global pool of Web Workers where the package's threaded build started one), and the
//! forward pass runs inside it. The loops that split work — a GEMV's output rows, a GEMM's
//! output columns, a scan's channels, attention's (row, head) pairs — ask [`for_chunks`] /
//! [`map_chunks`] / [`map_range`], which run in parallel on the current pool and sequentially
//! outside one.
//!
//! Every split is of outputs, never of a sum: each output is computed by the same code in the
//! same order whichever thread runs it and however the work is cut, so results are bitwise the
//! same at any thread count (`tests/cpu_threads.rs` checks it).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;

use crate::cpu::spread::{Pieces, back_off, spread};
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
    pub(crate) fn single() -> Self {
        Threads { pool: None, global: false }
    }

    /// Rayon's global pool when it has more than one thread — in wasm, the Web Workers
    /// `initThreadPool` started (only the `wasm-threads` build can) — else one thread.
    #[cfg(target_arch = "wasm32")]
    pub(crate) fn global() -> Self {
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
    pub(crate) fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(pool) => pool.install(|| awake(f)),
            // `scope` runs its body on one of the pool's threads (the caller waits), so the
            // loops inside see a pool
            None if self.global => rayon::scope(|_| awake(f)),
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
pub(crate) fn default_threads() -> usize {
    if cfg!(target_arch = "wasm32") {
        return 1;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(MAX_THREADS)
}

/// Runs `f` on this pool thread while the pool's other threads stay awake until it returns,
/// each taking the pieces of work `f`'s loops split off as soon as they appear
/// (`rayon::yield_now`) instead of going to sleep between loops and being woken for each: a
/// decode step splits ~150 loops of tens to hundreds of microseconds, and waking a sleeping
/// thread — a Web Worker above all — cost a large part of the second thread's gain. The
/// scheme of OpenMP's and ggml's pools: threads busy-wait for the length of a forward pass
/// (natively yielding to the OS after a few idle rounds, so that an oversubscribed machine
/// loses little; back to rayon's sleep after ~a millisecond with nothing to do).
fn awake<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    /// Rounds a helper looks for work in vain before it goes back to rayon's sleep: natively
    /// ~0.2–1 ms (each round after the 64th yields to the OS), far longer than a decode step's
    /// gaps between loops. In wasm, where `yield_now` does nothing, a round is a fraction of a
    /// microsecond: 1024 of them let a Web Worker fall asleep inside a decode step and wait to
    /// be woken again (130M bf16, 2 threads, Chromium: 38.5 tok/s at 1024 rounds, 42.6 at
    /// 2^14, 43.0 at 2^17).
    const MAX_IDLE_ROUNDS: u32 = if cfg!(target_arch = "wasm32") { 1 << 14 } else { 1024 };
    if rayon::current_num_threads() < 2 {
        return f();
    }
    /// Ends the helpers' loop when dropped: when `f` returns, and when it panics (the scope
    /// waits for its jobs before the panic goes on).
    struct Done<'a>(&'a AtomicBool);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Release);
        }
    }
    let done = AtomicBool::new(false);
    let me = rayon::current_thread_index();
    rayon::in_place_scope(|scope| {
        scope.spawn_broadcast(|_, ctx| {
            // this thread's own copy ends at once: it runs `f` (and would wait on itself)
            if Some(ctx.index()) == me {
                return;
            }
            // Bounded: a thread may start this loop while it waits inside a `join` it was
            // running, and the pass may be waiting for that join — so after a while with
            // nothing to do it returns (the soak test deadlocked without the bound).
            let mut idle = 0u32;
            while !done.load(Ordering::Acquire) && idle < MAX_IDLE_ROUNDS {
                if rayon::yield_now() == Some(rayon::Yield::Executed) {
                    idle = 0;
                } else {
                    back_off(&mut idle);
                }
            }
        });
        let _done = Done(&done);
        f()
    })
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
/// cheapest steps that split (a weight read, a state entry updated): 16 Ki, so that a decode
/// step's scan, Δ's softplus and narrow GEMVs (x_proj, dt_proj) split too — cheap since the
/// pool's threads wait for work awake ([`Threads::run`]); it was 64 Ki natively and 256 Ki in
/// wasm while they slept between loops. 130M bf16, 2 threads, decode (2026-12-04, builds
/// alternated): natively 43 → 50–51 tok/s from staying awake (16 Ki or 64 Ki alike), in
/// Chromium 36.7–36.9 → 40.3–40.5 from 16 Ki instead of 256 Ki (awake both).
pub(crate) const MIN_PIECE: usize = 1 << 14;

/// The fewest elements a piece of work takes when each is `steps` of [`MIN_PIECE`]'s steps (a
/// GEMV row: its inputs; a scan channel: tokens × state entries): `chunk_len`'s `min`.
pub(crate) fn min_elements(steps: usize) -> usize {
    MIN_PIECE / steps.max(1)
}

/// How many elements of `n` one piece of work takes, a multiple of `align` (the whole of `n`
/// outside a pool): about four pieces per thread; where `n` has fewer than that of `min`
/// elements, as many pieces as it has but a multiple of the thread count, of equal size — a
/// decode step's 1536 channels with 1024 at least are two pieces of 768 for two threads, not
/// 1024 and 512 (the second thread idle for a third of the loop).
pub(crate) fn chunk_len(n: usize, min: usize, align: usize) -> usize {
    let align = align.max(1);
    if !parallel() {
        return n.max(1).next_multiple_of(align);
    }
    if FINEST.get() {
        return align;
    }
    let threads = rayon::current_num_threads();
    let pieces = match n.div_ceil(min.max(1)) {
        0 | 1 => 1,
        p => p.next_multiple_of(threads).min(4 * threads),
    };
    n.div_ceil(pieces).max(1).next_multiple_of(align)
}

/// `f(i, piece)` for the `chunk`-element pieces of `data` (the last may be shorter), in
/// parallel on the current pool.
pub(crate) fn for_chunks<T: Send>(data: &mut [T], chunk: usize, f: impl Fn(usize, &mut [T]) + Sync + Send) {
    if !parallel() {
        data.chunks_mut(chunk).enumerate().for_each(|(i, c)| f(i, c));
        return;
    }
    let pieces = Pieces::new(data, chunk);
    // SAFETY: `spread` hands out each index once, and `data` stays borrowed until it returns
    spread(pieces.count(), &|i| f(i, unsafe { pieces.get(i) }));
}

/// [`for_chunks`] returning each piece's result, in order.
pub(crate) fn map_chunks<T: Send, R: Send>(
    data: &mut [T],
    chunk: usize,
    f: impl Fn(usize, &mut [T]) -> R + Sync + Send,
) -> Vec<R> {
    if !parallel() {
        return data.chunks_mut(chunk).enumerate().map(|(i, c)| f(i, c)).collect();
    }
    let pieces = Pieces::new(data, chunk);
    let slots: Vec<Mutex<Option<R>>> = (0..pieces.count()).map(|_| Mutex::new(None)).collect();
    // SAFETY: as in `for_chunks`
    spread(pieces.count(), &|i| {
        let r = f(i, unsafe { pieces.get(i) });
        *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
    });
    slots
        .into_iter()
        .map(|s| s.into_inner().unwrap_or_else(|e| e.into_inner()).expect("every piece ran"))
        .collect()
}

/// `f(i)` for `i` in `0..n`, in parallel on the current pool, results in order: the prefill
/// GEMM's pieces (≥ 1 Mi multiply-adds each). These stay on rayon's own splitting, whose
/// end-of-loop sleep costs nothing at that size: taken one by one from [`spread`]'s counter —
/// neighbouring column blocks of y on the two threads at once, where rayon's halves keep them
/// on one — the wasm GEMM ran slower (130M bf16, 2 threads, Chromium, prefill 128: 141–198
/// tok/s against 199–233 this way).
pub(crate) fn map_range<R: Send>(n: usize, f: impl Fn(usize) -> R + Sync + Send) -> Vec<R> {
    if parallel() { (0..n).into_par_iter().map(f).collect() } else { (0..n).map(f).collect() }
}

#[cfg(test)]
mod tests {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn every_piece_of_every_loop_runs_once_and_the_helpers_take_some() {
        let threads = Threads::new(Some(4)).unwrap();
        let runs: Vec<AtomicUsize> = (0..64).map(|_| AtomicUsize::new(0)).collect();
        let ran_on = threads.run(|| {
            for pieces in 1..=64 {
                let squares = map_range(pieces, |i| {
                    runs[i].fetch_add(1, Ordering::Relaxed);
                    i * i
                });
                assert_eq!(squares, (0..pieces).map(|i| i * i).collect::<Vec<_>>());
            }
            // which threads ran the pieces of a loop with work for all of them
            let mut ran_on = vec![usize::MAX; 512];
            for_chunks(&mut ran_on, 1, |_, slot| {
                std::thread::sleep(std::time::Duration::from_micros(200));
                slot[0] = rayon::current_thread_index().unwrap();
            });
            ran_on
        });
        for (i, r) in runs.iter().enumerate() {
            assert_eq!(r.load(Ordering::Relaxed), 64 - i, "piece {i}");
        }
        let mut threads_used = ran_on.clone();
        threads_used.sort_unstable();
        threads_used.dedup();
        assert!(threads_used.len() > 1, "the loop ran on one thread: {threads_used:?}");
    }

    #[test]
    fn a_loop_inside_a_piece_completes() {
        let threads = Threads::new(Some(3)).unwrap();
        let sums = threads.run(|| map_range(8, |i| map_range(16, |j| i * 16 + j).into_iter().sum::<usize>()));
        assert_eq!(sums.iter().sum::<usize>(), (0..128).sum::<usize>());
    }

    #[test]
    fn a_panic_in_a_piece_reaches_the_caller_and_the_pool_still_works() {
        let threads = Threads::new(Some(2)).unwrap();
        let caught = catch_unwind(AssertUnwindSafe(|| {
            threads.run(|| {
                map_range(16, |i| {
                    if i == 11 {
                        panic!("piece 11");
                    }
                    i
                })
            })
        }));
        let message = caught.expect_err("the panic comes back");
        assert_eq!(message.downcast_ref::<&str>(), Some(&"piece 11"));
        let again = threads.run(|| map_range(16, |i| i + 1));
        assert_eq!(again, (1..=16).collect::<Vec<_>>());
    }
}
