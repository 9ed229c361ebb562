#!/usr/bin/env node
// Turns wasm-pack's output folder into the npm package `webmamba`: adds the thin JS layer from
// js/ (index.js, the entry: loaders that start the wasm module themselves and the worker mode;
// its self-contained types; the module worker; the npm README) and writes package.json's entry
// points, exports and file list. Run after scripts/build-wasm DIR (wasm-pack's --target web
// output, made without wasm-pack):
//   node scripts/package.mjs pkg
// Each file is written beside its place and renamed there: `npm start` serves www/pkg while it
// runs this again (after the background builds), and a page must never read a half-written file.
import { copyFileSync, existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';

const dir = process.argv[2];
if (!dir || !existsSync(join(dir, 'webmamba.js'))) {
  console.error('usage: node scripts/package.mjs DIR (a scripts/build-wasm output folder)');
  process.exit(2);
}

/** `write(tmp)` makes the file at `tmp`, which then replaces `path` in one rename. */
function replace(path, write) {
  const tmp = join(dir, `.${basename(path)}.new`);
  write(tmp);
  renameSync(tmp, path);
}

const LAYER = ['index.js', 'index.d.ts', 'worker.js', 'worker-client.js', 'hash-worker.js', 'chat.js', 'simd.js', 'README.md'];
for (const f of LAYER) replace(join(dir, f), (tmp) => copyFileSync(join('js', f), tmp));

const cargo = readFileSync('Cargo.toml', 'utf8');
const field = (name) => new RegExp(`^${name} = "([^"]*)"`, 'm').exec(cargo)?.[1];
const wasmFiles = ['webmamba.js', 'webmamba.d.ts', 'webmamba_bg.wasm', 'webmamba_bg.wasm.d.ts'];
const pkg = {
  name: 'webmamba',
  version: field('version'),
  description: field('description'),
  license: field('license'),
  repository: { type: 'git', url: field('repository') },
  keywords: ['mamba', 'webgpu', 'wasm', 'llm', 'state-space-model'],
  type: 'module',
  main: './index.js',
  module: './index.js',
  types: './index.d.ts',
  exports: {
    '.': { types: './index.d.ts', default: './index.js' },
    './worker.js': './worker.js',
    './hash-worker.js': './hash-worker.js',
    './webmamba_bg.wasm': './webmamba_bg.wasm',
    './webmamba_relaxed_bg.wasm': './webmamba_relaxed_bg.wasm',
    './package.json': './package.json',
  },
  // threads/: the same module built for wasm threads (scripts/build-threads), which worker.js
  // loads in a cross-origin-isolated page; webmamba_relaxed_bg.wasm (here and in threads/):
  // each built with relaxed SIMD (scripts/build-relaxed), loaded where the engine has it
  files: [...LAYER.filter((f) => f !== 'README.md'), ...wasmFiles,
    ...(existsSync(join(dir, 'webmamba_relaxed_bg.wasm')) ? ['webmamba_relaxed_bg.wasm'] : []),
    ...(existsSync(join(dir, 'snippets')) ? ['snippets/'] : []),
    ...(existsSync(join(dir, 'threads', 'webmamba.js')) ? ['threads/'] : [])],
  // The snippets are wasm-bindgen's inline JS (imported by webmamba.js for their exports only);
  // index.js gives both model classes their `chat` property (chat.js).
  sideEffects: ['./snippets/*', './index.js'],
};
replace(join(dir, 'package.json'), (tmp) => writeFileSync(tmp, `${JSON.stringify(pkg, null, 2)}\n`));
console.log(`${dir}: package ${pkg.name}@${pkg.version}, entry ${pkg.main}`);
