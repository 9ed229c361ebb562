#!/usr/bin/env node
// A small static file server for the demo and the browser tests (no dependencies). Serves a
// folder on 127.0.0.1 with the right MIME types (WebAssembly must be `application/wasm` for
// streaming compilation), streams files (a 1.6 GB shard is never read whole), answers HEAD and
// single HTTP Range requests (206 + Content-Range) with an ETag, as the Hugging Face Hub and
// static hosts do, and counts the body bytes it sends per path (tests check that a cached
// model is not downloaded again). With `isolated` (the command line's default; or a function
// of the path) answers carry COOP/COEP, so pages are cross-origin isolated: SharedArrayBuffer, and the package's
// CPU backend on wasm threads in worker mode.
//   node scripts/serve.mjs www [port]        (port: $PORT or 8080)
import { createServer } from 'node:http';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { extname, join, normalize, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const MIME = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
  '.txt': 'text/plain; charset=utf-8',
  '.md': 'text/plain; charset=utf-8',
  '.safetensors': 'application/octet-stream',
};

/** The file under `root` for URL path `path`, or null when it would leave `root`. */
function resolveIn(root, path) {
  const file = normalize(join(root, path));
  return file === root || file.startsWith(root + '/') ? file : null;
}

/** `bytes=a-b` / `bytes=a-` / `bytes=-n` of a file of `size` bytes → [start, end] or null. */
function parseRange(header, size) {
  const m = /^bytes=(\d*)-(\d*)$/.exec(header ?? '');
  if (!m || (m[1] === '' && m[2] === '')) return null;
  const [start, end] = m[1] === '' ? [Math.max(0, size - Number(m[2])), size - 1]
    : [Number(m[1]), m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1)];
  return start <= end && start < size ? [start, end] : 'unsatisfiable';
}

/**
 * Starts serving `dir` (and `mounts`: URL prefix → folder, e.g. { '/pkg/': 'www/pkg' });
 * resolves to the http.Server once it listens (port 0 = any free port). `redirect(path)` may
 * return another path to answer with a 302 there (as the Hugging Face Hub redirects
 * `…/resolve/main/<file>` to its CDN). `server.sent` maps each URL path to the body bytes sent
 * for it; `server.log` lists every request. Missing files under the URL prefix `htmlFallback`
 * are answered 200 with an HTML page, as single-page-app servers (Vite's dev server) do. Paths
 * under the URL prefix `ignoreRange` are answered whole (200) whatever their Range header, as
 * some servers do.
 */
/** Cross-origin isolation: the page's own answers, and its workers'. */
const ISOLATION = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };

export function serve(dir, port = 8080, { mounts = {}, redirect = () => null, htmlFallback = null, ignoreRange = null, isolated = false } = {}) {
  const roots = [...Object.entries(mounts).map(([p, d]) => [p, resolve(d)]), ['/', resolve(dir)]];
  const sent = new Map();
  const log = [];
  const server = createServer(async (req, res) => {
    const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    const entry = { method: req.method, path, range: req.headers.range ?? null, status: 0, bytes: 0 };
    log.push(entry);
    const to = redirect(path);
    if (to) {
      entry.status = 302;
      res.writeHead(302, { location: to, 'cache-control': 'no-store' });
      res.end();
      return;
    }
    try {
      const [prefix, root] = roots.find(([p]) => path.startsWith(p));
      let file = resolveIn(root, path.slice(prefix.length - 1));
      if (!file) throw Object.assign(new Error('outside root'), { code: 'ENOENT' });
      let info = await stat(file);
      if (info.isDirectory()) {
        file = join(file, 'index.html');
        info = await stat(file);
      }
      const headers = {
        'content-type': MIME[extname(file)] ?? 'application/octet-stream',
        'cache-control': 'no-store',
        'accept-ranges': 'bytes',
        etag: `"${info.size.toString(16)}-${Math.floor(info.mtimeMs).toString(16)}"`,
        ...((typeof isolated === 'function' ? isolated(path) : isolated) ? ISOLATION : {}),
      };
      let [start, end] = [0, info.size - 1];
      const asked = ignoreRange && path.startsWith(ignoreRange) ? undefined : req.headers.range;
      const range = parseRange(asked, info.size);
      if (range === 'unsatisfiable') {
        entry.status = 416;
        res.writeHead(416, { 'content-range': `bytes */${info.size}` });
        res.end();
        return;
      }
      if (range) {
        [start, end] = range;
        headers['content-range'] = `bytes ${start}-${end}/${info.size}`;
      }
      headers['content-length'] = String(Math.max(0, end - start + 1));
      entry.status = range ? 206 : 200;
      res.writeHead(entry.status, headers);
      if (req.method === 'HEAD' || info.size === 0) {
        res.end();
        return;
      }
      const body = createReadStream(file, { start, end });
      body.on('data', (chunk) => {
        entry.bytes += chunk.length;
        sent.set(path, (sent.get(path) ?? 0) + chunk.length);
      });
      body.on('error', () => res.destroy());
      res.on('close', () => body.destroy());
      body.pipe(res);
    } catch (e) {
      if ((e.code === 'ENOENT' || e.code === 'ENOTDIR') && htmlFallback && path.startsWith(htmlFallback)) {
        entry.status = 200; // as a single-page app's server answers a missing file: its page
        res.writeHead(200, { 'content-type': MIME['.html'] });
        res.end('<!doctype html><title>app</title><div id="app"></div>');
        return;
      }
      entry.status = e.code === 'ENOENT' || e.code === 'ENOTDIR' ? 404 : 500;
      res.writeHead(entry.status, { 'content-type': 'text/plain' });
      res.end(entry.status === 404 ? 'not found' : String(e));
    }
  });
  server.sent = sent;
  server.log = log;
  return new Promise((ok, fail) => {
    server.once('error', fail);
    server.listen(port, '127.0.0.1', () => ok(server));
  });
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const dir = process.argv[2] ?? 'www';
  const port = Number(process.argv[3] ?? process.env.PORT ?? 8080);
  const server = await serve(dir, port, { isolated: true });
  console.log(`webmamba demo: http://127.0.0.1:${server.address().port}/  (serving ${dir}/, Ctrl-C to stop)`);
}
