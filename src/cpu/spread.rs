//! The split loops' work sharing (`threads::for_chunks` and `map_chunks` run on it; the GEMM's
//! `map_range` keeps rayon's halves): the calling thread and one rayon job per other thread of
//! the pool take piece indices from one counter, and the caller waits for the jobs' last pieces
//! awake, never on a futex.

use std::sync::atomic::{AtomicUsize, Ordering};

/// `f(i)` for every `i` in `0..n` on the current pool: the calling thread and one helper job
/// per other thread take the next index from one counter until none is left, and the caller
/// then waits *awake* for the helpers' last pieces. Rayon's own wait at the end of a loop
/// (`join`) goes to sleep on a futex after a few rounds of `yield_now` — at once in wasm, where
/// `yield_now` does nothing — and each sleeper then had to be woken for the next loop: in a
/// 2-thread decode in Chromium (V8's `--prof`, 130M bf16) a seventh of the threads' time was
/// such sleeps and wakes. Each output is still computed whole by one piece: the results do not
/// depend on which thread took it. (Pieces go out in index order, neighbours to different
/// threads at once: the prefill GEMM's column blocks ran slower that way in wasm, so
/// `threads::map_range` keeps rayon's halves.)
pub(crate) fn spread(n: usize, f: &(dyn Fn(usize) + Sync)) {
    let helpers = (rayon::current_num_threads() - 1).min(n.saturating_sub(1));
    let next = AtomicUsize::new(0);
    let work = || {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                break;
            }
            f(i);
        }
    };
    /// Counts a helper out when its job ends, panicking or not.
    struct Exit<'a>(&'a AtomicUsize);
    impl Drop for Exit<'_> {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Release);
        }
    }
    let exited = AtomicUsize::new(0);
    rayon::in_place_scope(|scope| {
        for _ in 0..helpers {
            scope.spawn(|_| {
                let _exit = Exit(&exited);
                work();
            });
        }
        work();
        // A helper job no other thread has taken yet is still in this thread's own queue:
        // run it here (it finds no piece left and ends), else spin.
        let mut idle = 0u32;
        while exited.load(Ordering::Acquire) < helpers {
            if rayon::yield_local() == Some(rayon::Yield::Executed) {
                continue;
            }
            back_off(&mut idle);
        }
    });
}

/// One round of a thread waiting awake with nothing to do (`spread`'s caller, `awake`'s
/// helpers): a spin hint, and after 64 such rounds in a row a yield to the OS as well, so that
/// an oversubscribed machine's other threads get the core (in wasm `yield_now` does nothing).
#[inline]
pub(crate) fn back_off(idle: &mut u32) {
    *idle = idle.saturating_add(1);
    std::hint::spin_loop();
    if *idle > 64 {
        std::thread::yield_now();
    }
}

/// `data` cut into `chunk`-element pieces that threads take by index.
pub(crate) struct Pieces<T> {
    ptr: *mut T,
    len: usize,
    chunk: usize,
}

// SAFETY: the pieces are disjoint, and each is handed to one thread (see `get`).
unsafe impl<T: Send> Sync for Pieces<T> {}

impl<T> Pieces<T> {
    pub(crate) fn new(data: &mut [T], chunk: usize) -> Self {
        Pieces { ptr: data.as_mut_ptr(), len: data.len(), chunk: chunk.max(1) }
    }

    pub(crate) fn count(&self) -> usize {
        self.len.div_ceil(self.chunk)
    }

    /// Piece `i` (< `count()`).
    ///
    /// # Safety
    /// Each `i` may be asked for once while the slice `new` was given stays borrowed.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn get(&self, i: usize) -> &mut [T] {
        let start = i * self.chunk;
        assert!(start < self.len, "piece {i} of {}", self.count());
        let len = self.chunk.min(self.len - start);
        // SAFETY: inside the slice (checked above), disjoint from every other piece
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), len) }
    }
}
