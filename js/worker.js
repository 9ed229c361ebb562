// The module worker behind `Model.fromUrl(url, { worker: true })`: one model per worker, driven
// by messages from worker-client.js. It holds the wasm objects (the model, its sessions and
// streams) under ids the page chose, calls their methods as the page asks, and answers each
// call once: { call, ok: true, value } or { call, ok: false, error: { name, code, message } }.
// Between the call and its answer it may post events for that call: { call, event: 'token',
// text, id, thinking } (onToken) and { call, event: 'progress', progress } (onProgress). A message
// { abort: key } fires the AbortSignal the worker made for a call (`call N`: a load or a
// generate) or a stream (`stream N`).
// Nothing here decides anything about the model: every rule lives in the wasm module.
//
// Which wasm build runs is chosen by the first call: a load whose `threads` option is not 1,
// in a cross-origin-isolated page (SharedArrayBuffer), gets the threaded build (threads/: the
// same module built with wasm threads) and a pool of `threads` Web Workers (default: every
// core) for the CPU backend; anything else, or a threaded build that fails to start, gets the
// plain one (the wasm module then warns if more threads were asked for). Each build runs its
// relaxed-SIMD module where the engine validates relaxed SIMD (simd.js).

import { start as startModule } from './simd.js';

/** The wasm module's exports, once the first call has chosen and started a build. */
let wasm = null;
/** A warning to add to the model's info (the threaded build could not start). */
let fellBack = null;
const MAX_THREADS = 256;
// The worker that hashes verified downloads beside the load (hash-worker.js, a nested worker;
// the wasm module falls back to hashing on this thread where it cannot start).
const hashWorker = () => new Worker(new URL('./hash-worker.js', import.meta.url), { type: 'module', name: 'webmamba-hash' });

/** How many threads a load asks for: null where the plain build must run. */
function wantedThreads(data) {
  if (!self.crossOriginIsolated || !['fromUrl', 'fromFiles', 'load'].includes(data.op)) return null;
  const t = data.args?.[data.args.length - 1]?.threads;
  if (t === undefined) return Math.min(navigator.hardwareConcurrency || 1, MAX_THREADS);
  return Number.isInteger(t) && t >= 2 && t <= MAX_THREADS ? t : null; // else the module judges it
}

async function start(data) {
  const threads = wantedThreads(data);
  if (threads !== null && threads > 1) {
    try {
      const threaded = await import('./threads/webmamba.js');
      await startModule(threaded.default, new URL('./threads/webmamba_relaxed_bg.wasm', import.meta.url));
      await threaded.initThreadPool(threads);
      threaded.setHashWorker(hashWorker);
      return threaded;
    } catch (e) {
      fellBack = `threads: the threaded build did not start (${e?.message ?? e}); the CPU backend runs on one thread`;
    }
  }
  const plain = await import('./webmamba.js');
  await startModule(plain.default, new URL('./webmamba_relaxed_bg.wasm', import.meta.url));
  plain.setHashWorker(hashWorker);
  return plain;
}
let ready = null;
/** id -> the model (id 0), a Session or a stream (ids chosen by the page). */
const objects = new Map();
/** `call N` / `stream N` -> the AbortController standing in for the page's AbortSignal. */
const controllers = new Map();

/** A wasm class instance (ModelInfo, Outcome, Stats) as a plain object a message can carry. */
const plain = (v) => (v && typeof v === 'object' && typeof v.toJSON === 'function' ? v.toJSON() : v);

function target(id) {
  const o = objects.get(id);
  if (!o) throw Object.assign(new Error('this object was closed'), { name: 'WebMambaError', code: 'NoSession' });
  return o;
}

/** The page's options with the functions and signal it kept (`relay`) replaced by ours, which
 *  post back; anything else is passed on as it came, to be judged by the wasm module. */
function options(call, o, key) {
  if (o === null || typeof o !== 'object' || typeof o.relay !== 'object') return o;
  const { relay, ...out } = o;
  if (relay.progress) out.onProgress = (progress) => postMessage({ call, event: 'progress', progress });
  if (relay.token) out.onToken = (text, id, thinking) => postMessage({ call, event: 'token', text, id, thinking });
  if (relay.signal) {
    const controller = controllers.get(key) ?? new AbortController();
    controllers.set(key, controller);
    out.signal = controller.signal;
  }
  return out;
}

/** Runs one call; resolves to [value, transfer list]. */
async function run({ call, op, id, into, args = [] }) {
  switch (op) {
    case 'fromUrl': case 'fromFiles': case 'load': {
      const last = args.length - 1;
      const model = await wasm.Model[op](...args.slice(0, last), options(call, args[last], `call ${call}`));
      objects.set(0, model);
      const info = plain(model.info);
      if (fellBack) info.warnings = [...info.warnings, fellBack];
      return [info];
    }
    case 'clearCache': return [await wasm.Model.clearCache(...args)];
    case 'newSession': objects.set(into, target(0).newSession()); return [];
    case 'restoreSession': objects.set(into, await target(0).restoreSession(...args)); return [];
    case 'fork': objects.set(into, target(id).fork()); return [];
    case 'stream': objects.set(into, target(id).stream(options(call, args[0], `stream ${into}`))); return [];
    case 'generate': return [await target(id).generate(options(call, args[0], `call ${call}`), args[1])];
    case 'chat': return [plain(await target(id).chat(options(call, args[0], `call ${call}`), args[1]))];
    case 'chatInfo': {
      const m = target(0);
      return [{ chatTemplate: m.chatTemplate, endTokens: m.endTokens, generationDefaults: m.generationDefaults, toolCallFormat: m.toolCallFormat }];
    }
    case 'next': case 'return': {
      const r = await target(id)[op]();
      if (r.done) {
        objects.delete(id);
        controllers.delete(`stream ${id}`);
      }
      return [r];
    }
    case 'close':
      objects.get(id)?.close();
      objects.delete(id);
      return [];
    default: {
      const value = plain(await target(id)[op](...args));
      const buffer = ArrayBuffer.isView(value) ? value.buffer : null;
      return [value, buffer ? [buffer] : []];
    }
  }
}

self.onmessage = async ({ data }) => {
  if (data.abort !== undefined) {
    controllers.get(data.abort)?.abort();
    return;
  }
  // The call's controller is made as its message arrives, not when it runs (once the wasm
  // module is ready): an abort sent right after the call must find it.
  if (data.args?.some((a) => a?.relay?.signal)) {
    controllers.set(data.op === 'stream' ? `stream ${data.into}` : `call ${data.call}`, new AbortController());
  }
  try {
    ready ??= start(data);
    wasm = await ready;
    const [value, transfer = []] = await run(data);
    postMessage({ call: data.call, ok: true, value }, transfer);
  } catch (e) {
    const error = { name: e?.name ?? 'Error', code: e?.code, message: String(e?.message ?? e), detail: e?.detail };
    postMessage({ call: data.call, ok: false, error });
  } finally {
    controllers.delete(`call ${data.call}`);
    if (data.op === 'stream' && !objects.has(data.into)) controllers.delete(`stream ${data.into}`);
  }
};
