#!/usr/bin/env node
// A tiny static file server for the demo (no dependencies). Serves a folder on 127.0.0.1 with
// the right MIME types (WebAssembly must be `application/wasm` for streaming compilation).
//   node scripts/serve.mjs www [port]        (port: $PORT or 8080)
import { createServer } from 'node:http';
import { readFile, stat } from 'node:fs/promises';
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

/** Starts serving `dir`; resolves to the http.Server once it listens (port 0 = any free port). */
export function serve(dir, port = 8080) {
  const root = resolve(dir);
  const server = createServer(async (req, res) => {
    try {
      const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
      let file = normalize(join(root, path));
      if (!file.startsWith(root)) throw Object.assign(new Error('outside root'), { code: 'ENOENT' });
      if ((await stat(file)).isDirectory()) file = join(file, 'index.html');
      const body = await readFile(file);
      res.writeHead(200, {
        'content-type': MIME[extname(file)] ?? 'application/octet-stream',
        'cache-control': 'no-store',
      });
      res.end(body);
    } catch (e) {
      res.writeHead(e.code === 'ENOENT' ? 404 : 500, { 'content-type': 'text/plain' });
      res.end(e.code === 'ENOENT' ? 'not found' : String(e));
    }
  });
  return new Promise((ok, fail) => {
    server.once('error', fail);
    server.listen(port, '127.0.0.1', () => ok(server));
  });
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const dir = process.argv[2] ?? 'www';
  const port = Number(process.argv[3] ?? process.env.PORT ?? 8080);
  const server = await serve(dir, port);
  console.log(`webmamba demo: http://127.0.0.1:${server.address().port}/  (serving ${dir}/, Ctrl-C to stop)`);
}
