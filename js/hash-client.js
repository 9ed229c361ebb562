// The page's side of the hashing worker (hash-worker.js): a load's integrity checks hand the
// bytes of each weight file to another thread, which hashes them while this one converts and
// uploads. Imported by src/wasm/hash_worker.rs through wasm-bindgen (it lands in snippets/);
// the worker itself comes from the factory index.js / worker.js register (`setHashWorker`), so
// that its URL is written `new URL('./hash-worker.js', import.meta.url)`, as bundlers expect.
//
// Bytes are copied once, out of wasm memory into a 1 MiB batch that is transferred to the
// worker; at most LAG bytes may wait there unhashed (`push` then returns a promise to await),
// so memory stays bounded when the worker is slower than the download. Whatever waits on the
// worker (a push held back, a finish) waits at most `stallMs` with no word from it: then the
// worker counts as failed, and so does the file.

const BATCH = 1 << 20;
const LAG = 64 << 20;
const STALL_MS = 30_000; // when the load gives none

export class HashClient {
  /** `factory()` makes the worker; throws (CSP, no nested workers) are `ready()` → false.
   *  `stallMs` (0: 30 s): the longest wait with no message from the worker. */
  constructor(factory, stallMs) {
    this.stallMs = stallMs > 0 ? stallMs : STALL_MS;
    this.heard = 0; // Date.now() of the worker's last message, or of the start of a wait
    this.watchdog = null; // an interval timer while something waits
    this.jobs = new Map();
    this.nextId = 1;
    this.queued = 0; // bytes posted and not yet hashed
    this.drained = null; // { resolve, reject } while push waits for the worker
    this.failure = null;
    this.started = new Promise((resolve) => { this.onReady = resolve; });
    try {
      this.worker = factory();
      this.worker.onmessage = ({ data }) => this.message(data);
      this.worker.onerror = (e) => {
        e.preventDefault?.();
        this.fail(e.message || 'the hashing worker could not run');
      };
      this.worker.onmessageerror = () => this.fail('a message from the hashing worker could not be read');
    } catch (e) {
      this.worker = null;
      this.fail(String(e?.message ?? e));
    }
  }

  /** Resolves to true once the worker has started its wasm module, false when it failed or
   *  `ms` passed first. */
  ready(ms) {
    let timer;
    const late = new Promise((resolve) => { timer = setTimeout(() => resolve(false), ms); });
    return Promise.race([this.started, late]).finally(() => clearTimeout(timer));
  }

  /** A new stream hashed with `algs` (SRI names); its id. */
  start(algs) {
    const id = this.nextId++;
    this.jobs.set(id, { batch: new Uint8Array(BATCH), fill: 0, finish: null });
    this.post({ op: 'start', id, algs });
    return id;
  }

  /** The next bytes of stream `id` (a view of wasm memory, copied before this returns):
   *  undefined, or a promise to await before the next push while the worker is behind. */
  push(id, bytes) {
    if (this.failure !== null) throw new Error(this.failure);
    const job = this.jobs.get(id);
    if (job.failed !== undefined) throw new Error(job.failed);
    for (let at = 0; at < bytes.length;) {
      const n = Math.min(bytes.length - at, BATCH - job.fill);
      job.batch.set(bytes.subarray(at, at + n), job.fill);
      job.fill += n;
      at += n;
      if (job.fill === BATCH) this.flush(id, job);
    }
    if (this.queued <= LAG) return undefined;
    return new Promise((resolve, reject) => {
      this.drained = { resolve, reject };
      this.watch();
    });
  }

  /** Ends stream `id`: resolves to its digests, in the order of its algorithms. */
  finish(id) {
    if (this.failure !== null) return Promise.reject(new Error(this.failure));
    const job = this.jobs.get(id);
    if (job.failed !== undefined) return Promise.reject(new Error(job.failed));
    if (job.fill > 0) this.flush(id, job);
    return new Promise((resolve, reject) => {
      job.finish = { resolve, reject };
      this.watch();
      this.post({ op: 'finish', id });
    });
  }

  /** Gives stream `id` up (its file failed). */
  drop(id) {
    if (this.jobs.delete(id)) this.post({ op: 'drop', id });
  }

  /** Ends the worker; whatever waits on it fails. */
  close() {
    this.fail('the load ended');
    this.worker?.terminate();
    this.worker = null;
  }

  /** Something now waits on the worker: it fails if the worker says nothing for `stallMs`. */
  watch() {
    this.heard = Date.now();
    if (this.watchdog !== null) return;
    this.watchdog = setInterval(() => {
      const waiting = this.drained !== null || [...this.jobs.values()].some((j) => j.finish !== null);
      if (!waiting || this.failure !== null) {
        clearInterval(this.watchdog);
        this.watchdog = null;
      } else if (Date.now() - this.heard > this.stallMs) {
        this.fail(`it sent nothing for ${this.stallMs} ms`);
      }
    }, Math.min(1000, this.stallMs));
  }

  flush(id, job) {
    const bytes = job.fill === BATCH ? job.batch : job.batch.slice(0, job.fill);
    this.queued += bytes.length;
    this.post({ op: 'data', id, bytes }, [bytes.buffer]);
    job.batch = new Uint8Array(BATCH);
    job.fill = 0;
  }

  post(message, transfer) {
    if (this.failure !== null || this.worker === null) return;
    try {
      this.worker.postMessage(message, transfer ?? []);
    } catch (e) {
      this.fail(`the hashing worker could not be sent its bytes (${e?.message ?? e})`);
    }
  }

  message(data) {
    this.heard = Date.now();
    if (data.ready) {
      this.onReady(true);
    } else if (data.failed !== undefined && data.id === undefined) {
      this.fail(data.failed);
    } else if (data.hashed !== undefined) {
      this.queued -= data.hashed;
      if (this.drained !== null && this.queued <= LAG / 2) {
        this.drained.resolve();
        this.drained = null;
      }
    } else {
      const job = this.jobs.get(data.id);
      if (job === undefined) return; // dropped
      if (data.failed !== undefined && job.finish === null) {
        job.failed = `the hashing worker failed: ${data.failed}`; // told at the next push
        return;
      }
      this.jobs.delete(data.id);
      if (data.failed !== undefined) job.finish.reject(new Error(`the hashing worker failed: ${data.failed}`));
      else job.finish.resolve(data.digests);
    }
  }

  fail(why) {
    if (this.failure !== null) return;
    this.failure = `the hashing worker failed: ${why}`;
    this.onReady(false);
    if (this.watchdog !== null) clearInterval(this.watchdog);
    this.watchdog = null;
    const error = new Error(this.failure);
    this.drained?.reject(error);
    this.drained = null;
    for (const job of this.jobs.values()) job.finish?.reject(error);
    this.jobs.clear();
  }
}
