// The hashing worker (a module worker; hash-client.js is the page's side): the SHA-2 hashes
// of the files a load verifies, computed by this package's own wasm module (the plain build:
// the `sha2` crate, as in the page) on a thread of their own, so that on a machine with a
// second core hashing a download costs the loading thread only a copy of its bytes.
//
// Messages in: { op: 'start', id, algs } · { op: 'data', id, bytes } · { op: 'finish', id } ·
// { op: 'drop', id }. Out: { ready: true } once started (or { failed } if the module cannot
// start), { id, hashed: n } after each batch, { id, digests: [Uint8Array…] } or
// { id, failed } at a finish.
import init, { HashStream } from './webmamba.js';

const streams = new Map();
const started = init({ module_or_path: new URL('./webmamba_bg.wasm', import.meta.url) });
started.then(() => postMessage({ ready: true }), (e) => postMessage({ failed: String(e?.message ?? e) }));

onmessage = async ({ data }) => {
  try {
    await started;
  } catch {
    return; // reported once, above
  }
  const { op, id } = data;
  try {
    if (op === 'start') {
      streams.set(id, new HashStream(data.algs));
    } else if (op === 'data') {
      streams.get(id)?.update(data.bytes);
      postMessage({ id, hashed: data.bytes.length });
    } else if (op === 'finish') {
      const stream = streams.get(id);
      streams.delete(id);
      postMessage({ id, digests: stream.finish() });
    } else if (op === 'drop') {
      streams.get(id)?.free();
      streams.delete(id);
    }
  } catch (e) {
    streams.get(id)?.free();
    streams.delete(id);
    postMessage({ id, failed: String(e?.message ?? e) });
  }
};
