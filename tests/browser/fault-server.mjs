// The fault server of tests/browser/faults.mjs: model folders under /fault/<case>/<model>/<file>
// served with one fault each (see `fault`), a server for another origin with no CORS headers
// (`corsless`), and what every response did (`seen`). The "big" model is mamba-790m-shaped and
// made on the fly, nothing written to disk: the real config (d_model 1536, 48 layers,
// vocabulary 50280, d_state 16, expand 2, conv 4, dt_rank 96: `webmamba random --shape 790m`)
// and one bf16 model.safetensors of 1.6 GB whose header names every tensor with its real shape
// and whose data is zeros, served in slices.
import { existsSync, readFileSync, statSync } from 'node:fs';

const MB = 1e6;
const [V, D, L, N, K] = [50280, 1536, 48, 16, 4];
const DI = 2 * D;
const R = Math.ceil(D / 16);

/** HF Mamba's tensors for this shape: [name, shape]. */
function tensors() {
  const out = [['backbone.embeddings.weight', [V, D]]];
  for (let i = 0; i < L; i++) {
    const p = `backbone.layers.${i}`;
    out.push([`${p}.norm.weight`, [D]], [`${p}.mixer.in_proj.weight`, [2 * DI, D]],
      [`${p}.mixer.conv1d.weight`, [DI, 1, K]], [`${p}.mixer.conv1d.bias`, [DI]],
      [`${p}.mixer.x_proj.weight`, [R + 2 * N, DI]], [`${p}.mixer.dt_proj.weight`, [DI, R]],
      [`${p}.mixer.dt_proj.bias`, [DI]], [`${p}.mixer.A_log`, [DI, N]], [`${p}.mixer.D`, [DI]],
      [`${p}.mixer.out_proj.weight`, [D, DI]]);
  }
  out.push(['backbone.norm_f.weight', [D]]);
  return out;
}

/** The model's files: `file(name)` is a Buffer (config.json), a `{ length, slice(a, b) }`
 *  (model.safetensors) or null (no other file); `size` is the weights file's length. */
function bigModel() {
  const header = {};
  let at = 0;
  for (const [name, shape] of tensors()) {
    const bytes = shape.reduce((a, b) => a * b, 1) * 2;
    header[name] = { dtype: 'BF16', shape, data_offsets: [at, at + bytes] };
    at += bytes;
  }
  const text = JSON.stringify(header);
  const json = Buffer.from(text.padEnd(Math.ceil(text.length / 8) * 8));
  const prefix = Buffer.alloc(8 + json.length);
  prefix.writeBigUInt64LE(BigInt(json.length));
  json.copy(prefix, 8);
  const size = prefix.length + at;
  const zeros = Buffer.alloc(1 << 20);
  const weights = {
    length: size,
    /** Bytes [a, b) of the file: the header's, then zeros (at most 1 MiB past the header). */
    slice(a, b = size) {
      b = Math.min(b, size);
      if (b <= prefix.length) return prefix.subarray(a, b);
      if (a >= prefix.length && b - a <= zeros.length) return zeros.subarray(0, b - a);
      return Buffer.concat([prefix.subarray(Math.min(a, prefix.length)), Buffer.alloc(b - Math.max(a, prefix.length))]);
    },
  };
  const config = Buffer.from(JSON.stringify({ model_type: 'mamba', vocab_size: V, hidden_size: D,
    num_hidden_layers: L, state_size: N, expand: 2, conv_kernel: K, time_step_rank: R, eos_token_id: 0 }));
  return { size, file: (name) => ({ 'config.json': config, 'model.safetensors': weights })[name] ?? null };
}

/** Model folders the fault server serves, by the name in its URLs. */
const FOLDERS = { tiny: 'tests/fixtures/tiny-f32', shakespeare: 'www/models/shakespeare-mamba-3m',
  sharded: 'tests/fixtures/original-sharded', vl: 'tests/fixtures/qwen35-vl-bf16' };
const files = new Map(); // `${model}/${file}` -> Buffer (read once)
/** File `name` of model folder `model` (a key of FOLDERS), or null when it has none. */
export function file(model, name) {
  const key = `${model}/${name}`;
  if (!files.has(key)) {
    const path = `${FOLDERS[model]}/${name}`;
    files.set(key, existsSync(path) && statSync(path).isFile() ? readFileSync(path) : null);
  }
  return files.get(key);
}

/** Every response the fault server gave: { path, method, range, status, bytes, finished,
 *  closedByClient, closedAt }. */
export const seen = [];
/** The 790M-shaped model: `big.size`, `big.file(name)`. */
export const big = bigModel();

/** Writes `bytes(at, n)` from `start` to `end` (exclusive) with backpressure, counting into
 *  `entry.bytes`; stops when the client goes away. */
async function pump(res, entry, start, end, bytes) {
  let at = start;
  while (at < end && !res.destroyed) {
    const chunk = bytes(at, Math.min(1 << 20, end - at));
    at += chunk.length;
    entry.bytes += chunk.length;
    if (!res.write(chunk)) {
      await new Promise((ok) => {
        const done = () => { res.off('drain', done); res.off('close', done); ok(); };
        res.on('drain', done);
        res.on('close', done);
      });
    }
  }
}

/** The fault server's handler for /fault/<case>/<model>/<file>. */
export function fault(req, res, crossOrigin) {
  const [, , kind, model, name] = decodeURIComponent(new URL(req.url, 'http://x').pathname).split('/');
  const entry = { path: req.url, kind, name, method: req.method, range: req.headers.range ?? null, status: 0,
    bytes: 0, finished: false, closedByClient: false, closedAt: null, at: Date.now() };
  seen.push(entry);
  res.on('finish', () => { entry.finished = true; });
  res.on('close', () => {
    entry.closedAt = Date.now();
    entry.closedByClient = !entry.finished;
  });
  const answer = (status, headers, body = null) => {
    entry.status = status;
    res.writeHead(status, { 'cache-control': 'no-store', ...headers });
    if (body) entry.bytes += body.length;
    res.end(body);
  };
  if (kind === 'redirect') return answer(302, { location: req.url });
  if (kind === 'cors-redirect') return answer(302, { location: `${crossOrigin}/cors/${model}/${name}` });
  if (kind === 'never' && name === 'config.json') return; // accepted, never answered
  if (kind.startsWith('oversized') && name === 'config.json') {
    const size = 600 * MB;
    entry.status = 200;
    const zeros = Buffer.alloc(1 << 20, 0x20);
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store',
      ...(kind === 'oversized' ? { 'content-length': String(size) } : {}) });
    pump(res, entry, 0, size, (_, n) => zeros.subarray(0, n)).then(() => res.end());
    return;
  }
  const body = model === 'big' ? big.file(name) : file(model, name);
  if (!body) return answer(404, { 'content-type': 'text/plain' }, Buffer.from('not found'));
  const size = body.length;
  const headers = { 'content-type': name.endsWith('.json') ? 'application/json' : 'application/octet-stream',
    'cache-control': 'no-store', etag: `"${size.toString(16)}-${kind}"`, 'accept-ranges': kind === 'norange' ? 'none' : 'bytes' };
  const weights = name.endsWith('.safetensors');
  const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
  if (m && weights && kind !== 'norange') {
    const [start, end] = [Number(m[1]), Math.min(Number(m[2]), size - 1)];
    if (kind === 'range-offset') {
      return answer(206, { ...headers, 'content-range': `bytes 8-${end + 8}/${size}` }, body.slice(8, end + 9));
    }
    const total = kind === 'range-total' ? size * 2 : size;
    return answer(206, { ...headers, 'content-range': `bytes ${start}-${end}/${total}` }, body.slice(start, end + 1));
  }
  if (req.method === 'HEAD') return answer(200, { ...headers, 'content-length': String(size) });
  if (kind === 'long' && name === 'config.json') { // claims 1000 bytes more than it sends
    entry.status = 200;
    res.writeHead(200, { ...headers, 'content-length': String(size + 1000) });
    res.write(body);
    entry.bytes += size;
    setTimeout(() => res.socket?.destroy(), 100);
    return;
  }
  if (!weights || !['stall', 'truncate', 'short'].includes(kind)) {
    if (model !== 'big') return answer(200, { ...headers, 'content-length': String(size) }, body.slice());
    entry.status = 200;
    res.writeHead(200, { ...headers, 'content-length': String(size) });
    pump(res, entry, 0, size, (at, n) => body.slice(at, at + n)).then(() => res.end());
    return;
  }
  // Faults in the body of a weights file: half of it, or 1000 bytes less than it has.
  const sent = kind === 'short' ? size - 1000 : Math.floor(size / 2);
  entry.status = 200;
  res.writeHead(200, { ...headers, 'content-length': String(kind === 'short' ? sent : size) });
  res.write(body.slice(0, sent));
  entry.bytes += sent;
  if (kind === 'truncate') setTimeout(() => res.socket?.destroy(), 100); // the connection drops
  if (kind === 'short') res.end();
  // 'stall': the connection stays open and nothing more comes.
}

/** The server for another origin: model folders with no CORS headers at all. */
export function corsless(req, res) {
  const [, , model, name] = new URL(req.url, 'http://x').pathname.split('/');
  const body = file(model, name);
  seen.push({ path: req.url, kind: 'cors', name, method: req.method, status: body ? 200 : 404, bytes: body?.length ?? 0 });
  res.writeHead(body ? 200 : 404, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(body ?? 'not found');
}
