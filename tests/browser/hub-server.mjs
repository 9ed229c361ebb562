// A server laid out like the Hugging Face Hub, for the integrity checks of faults.mjs (in
// faults-integrity.mjs). On the page's origin (`hub`):
//   /hubsim/<case>/resolve/main/<file>       → 302 to the CDN (another origin), with
//                                              X-Linked-Etag: "<sha256>" for the weights (LFS)
//   /api/models/hubsim/<case>/tree/main       → the tree listing: { type, oid, size, path,
//                                              lfs: { oid: <sha256>, size, pointerSize } }
// and on a second port (`cdn`): /cdn/<case>/<file>, with CORS, Range, and ETag "<sha256>" for
// the weights ("<git blob SHA-1>" for the JSON files, as the Hub's small files have). Every
// digest is computed here by node's crypto from the fixture's true bytes; the served bytes may
// differ by one flipped bit. The model is tests/fixtures/tiny-f32 (qwen35-vl-bf16 for `vl`). Cases:
//   ok            the files as they are, every digest published
//   toggle        as ok, but model.safetensors is served flipped while `hubState.flip` is set
//   flip          model.safetensors flipped (its last byte's lowest bit), every digest published
//   flip-notree   flipped; no tree listing (404): only the CDN's ETag tells
//   flip-noexpose flipped; the CDN does not expose its ETag: only the listing tells
//   flip-nodigest flipped; neither (the negative control: nothing can tell)
//   vl            a Qwen3.5 checkpoint with a vision tower, every digest published: its
//                 model.safetensors is read in parts (the tower skipped), its digest unchecked
import { createHash } from 'node:crypto';
import { file } from './fault-server.mjs';

/** Every response of the CDN: { kind, name, method, range, status, bytes }. */
export const cdnSeen = [];
/** Every request for a tree listing, by case. */
export const listingsAsked = [];
/** `flip`: serve the `toggle` case's model.safetensors flipped. */
export const hubState = { flip: false };

/** The model folder of case `kind` (a key of fault-server.mjs' FOLDERS). */
const model = (kind) => (kind === 'vl' ? 'vl' : 'tiny');
export const sha256 = (bytes) => createHash('sha256').update(bytes).digest();
const gitSha1 = (bytes) => createHash('sha1').update(`blob ${bytes.length}\0`).update(bytes).digest('hex');
const lfs = (name) => name.endsWith('.safetensors');

/** The bytes served for `name` in case `kind` (null when the folder has no such file). */
function served(kind, name) {
  const body = file(model(kind), name);
  const flipped = name === 'model.safetensors' && (kind.startsWith('flip') || (kind === 'toggle' && hubState.flip));
  if (!body || !flipped) return body;
  const copy = Buffer.from(body);
  copy[copy.length - 1] ^= 1;
  return copy;
}

/** The page origin's side: resolve URLs (a 302 to the CDN) and tree listings. Returns false
 *  for paths that are not its own. */
export function hub(req, res, cdnBase) {
  const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
  const listing = /^\/api\/models\/hubsim\/([^/]+)\/tree\/main$/.exec(path);
  if (listing) {
    const kind = listing[1];
    listingsAsked.push(kind);
    if (kind.includes('notree') || kind.includes('nodigest')) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end('{"error":"Entry not found"}');
      return true;
    }
    const entries = ['config.json', 'tokenizer.json', 'model.safetensors'].map((name) => {
      const body = file(model(kind), name);
      const entry = { type: 'file', oid: gitSha1(body), size: body.length, path: name };
      if (lfs(name)) {
        entry.lfs = { oid: sha256(body).toString('hex'), size: body.length, pointerSize: 134 };
      }
      return entry;
    });
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
    res.end(JSON.stringify(entries));
    return true;
  }
  const resolve = /^\/hubsim\/([^/]+)\/resolve\/main\/([^/]+)$/.exec(path);
  if (!resolve) return false;
  const [, kind, name] = resolve;
  const body = file(model(kind), name);
  if (!body) {
    res.writeHead(404, { 'content-type': 'text/plain', 'x-error-code': 'EntryNotFound' });
    res.end('Entry not found');
    return true;
  }
  const headers = { location: `${cdnBase}/cdn/${kind}/${name}`, 'cache-control': 'no-store', 'x-repo-commit': '0'.repeat(40) };
  if (lfs(name)) headers['x-linked-etag'] = `"${sha256(body).toString('hex')}"`;
  res.writeHead(302, headers);
  res.end();
  return true;
}

/** The CDN (another origin): the files, with CORS, Range and ETags. */
export function cdn(req, res) {
  const [, , kind, name] = decodeURIComponent(new URL(req.url, 'http://x').pathname).split('/');
  const cors = { 'access-control-allow-origin': '*' };
  if (!kind.includes('noexpose') && !kind.includes('nodigest')) {
    cors['access-control-expose-headers'] = 'etag, x-linked-etag, content-length, content-range, accept-ranges';
  }
  if (req.method === 'OPTIONS') {
    res.writeHead(204, { ...cors, 'access-control-allow-headers': 'range', 'access-control-allow-methods': 'GET, HEAD' });
    res.end();
    return;
  }
  const entry = { kind, name, method: req.method, range: req.headers.range ?? null, status: 0, bytes: 0 };
  cdnSeen.push(entry);
  const body = served(kind, name);
  if (!body) {
    entry.status = 404;
    res.writeHead(404, { ...cors, 'content-type': 'text/plain' });
    res.end('not found');
    return;
  }
  const truth = file(model(kind), name);
  const headers = { ...cors, 'cache-control': 'no-store', 'accept-ranges': 'bytes',
    'content-type': name.endsWith('.json') ? 'application/json' : 'application/octet-stream',
    etag: `"${lfs(name) ? sha256(truth).toString('hex') : gitSha1(truth)}"` };
  const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
  const [start, end] = m ? [Number(m[1]), Math.min(Number(m[2]), body.length - 1)] : [0, body.length - 1];
  if (m) headers['content-range'] = `bytes ${start}-${end}/${body.length}`;
  headers['content-length'] = String(end - start + 1);
  entry.status = m ? 206 : 200;
  res.writeHead(entry.status, headers);
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  entry.bytes = end - start + 1;
  res.end(body.subarray(start, end + 1));
}
