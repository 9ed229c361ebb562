// The package's entry: webmamba's JavaScript API with no set-up step. `Model`'s loaders start
// the wasm module on first use (no `await init()`), and with `{ worker: true }` load the model
// in a dedicated module worker instead (worker-client.js). Everything else — the model, its
// sessions, options, errors — is the wasm module's own (webmamba.js, made by wasm-bindgen from
// src/wasm/): this file only routes.
import initWasm, { Model as WasmModel, setHashWorker } from './webmamba.js';
import { WorkerModel, WorkerSession } from './worker-client.js';
import { addChatCompletions } from './chat.js';
import { start } from './simd.js';

// `model.chat.completions.create(...)` on both kinds of model.
addChatCompletions(WasmModel);
addChatCompletions(WorkerModel);

let started = null;

// The worker that hashes verified downloads beside the load (hash-worker.js; the wasm module
// falls back to hashing on the page's thread where it cannot start).
const hashWorker = () => new Worker(new URL('./hash-worker.js', import.meta.url), { type: 'module', name: 'webmamba-hash' });

/**
 * Starts the wasm module (once; later calls return the same promise). Optional: the loaders
 * call it. Pass `wasm` (a URL, Response, bytes or WebAssembly.Module) to fetch the module from
 * elsewhere than next to this file. Without it, an engine with relaxed SIMD gets the relaxed
 * module (webmamba_relaxed_bg.wasm: fused multiply-adds in the CPU backend; `info.simd`), and
 * the plain one where that module cannot be had.
 */
export function init(wasm) {
  if (started === null) {
    started = wasm !== undefined ? initWasm({ module_or_path: wasm })
      : start(initWasm, new URL('./webmamba_relaxed_bg.wasm', import.meta.url));
    started = started.then((exports) => {
      setHashWorker(hashWorker);
      return exports;
    });
    started.catch(() => { started = null; }); // a failed start may be tried again
  }
  return started;
}

/** Loads `op` in the page or, with `options.worker`, in a worker. */
async function open(op, args, options) {
  if (options !== null && typeof options === 'object' && options.worker) {
    // A relative URL means the page's folder, as in-page; the worker would resolve it against
    // its own script (this package's folder).
    if (op === 'fromUrl' && typeof args[0] === 'string' && globalThis.document?.baseURI) {
      try {
        args = [new URL(args[0], document.baseURI).href];
      } catch {
        // left as it is: the wasm module reports the bad URL as in-page
      }
    }
    return WorkerModel.open(op, args, options);
  }
  await init();
  return WasmModel[op](...args, options);
}

const href = (url) => (url instanceof URL ? url.href : url);

/** A loaded model: `Model.fromUrl(url, options)`, `Model.fromFiles(files)`, `Model.load(bytes)`. */
export class Model {
  constructor() {
    throw new TypeError('webmamba: a Model comes from Model.fromUrl, Model.fromFiles or Model.load');
  }

  /** True for models from any loader, in the page or in a worker. */
  static [Symbol.hasInstance](value) {
    return value instanceof WasmModel || value instanceof WorkerModel;
  }

  static fromUrl(baseUrl, options) { return open('fromUrl', [href(baseUrl)], options); }
  static fromFiles(files, options) { return open('fromFiles', [files], options); }
  static load(config, weights, tokenizer, options) { return open('load', [config, weights, tokenizer], options); }

  static async clearCache(baseUrl) {
    await init();
    return WasmModel.clearCache(href(baseUrl));
  }
}

export { Session } from './webmamba.js';
export { WorkerModel, WorkerSession };
