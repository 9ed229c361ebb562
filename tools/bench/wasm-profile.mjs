// Where a wasm CPU decode's time goes, per Web Worker: V8's sampling profiler (`--prof`) in
// headless Chromium on a copy of the package whose threaded relaxed-SIMD module keeps its
// function names, then `node --prof-process` on each isolate's log. Run from the repository
// root after `npm run build:demo`:
//   node tools/bench/wasm-profile.mjs [--threads 2] [--tokens 128] [--model target/bench/random-130m]
// (`webmamba random --shape 130m --dtype bf16 --out target/bench/random-130m` makes the model.)
// Prints the decode rate and, for each isolate that ran wasm, its top entries; the logs and the
// full reports stay in the folder it names. Rebuilds the threaded relaxed module (~1–3 min).
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';
import { serve } from '../../scripts/serve.mjs';
import { ARGS } from '../../tests/browser/harness.mjs';

const { values: opt } = parseArgs({ options: {
  threads: { type: 'string', default: '2' }, tokens: { type: 'string', default: '128' },
  model: { type: 'string', default: 'target/bench/random-130m' },
} });
const out = mkdtempSync(join(tmpdir(), 'webmamba-wasm-profile-'));
const pkg = join(out, 'pkg');
cpSync('www/pkg', pkg, { recursive: true });
// the threaded relaxed module as scripts/build-relaxed makes it, but with its names kept
const flags = execFileSync('bash', ['-c', '. scripts/wasm-threads-flags; echo "$WASM_THREADS_RUSTFLAGS"']).toString().trim();
execFileSync('cargo', ['build', '--release', '--lib', '--target', 'wasm32-unknown-unknown', '--features', 'wasm-threads',
  '-Z', 'build-std=panic_abort,std'], { stdio: 'inherit', env: { ...process.env, CARGO_TARGET_DIR: 'target/threads-relaxed',
  RUSTC_BOOTSTRAP: '1', RUSTFLAGS: `-C target-feature=+simd128,+relaxed-simd ${flags}` } });
execFileSync('wasm-bindgen', ['--keep-debug', '--target', 'web', '--out-dir', join(out, 'bindgen'),
  'target/threads-relaxed/wasm32-unknown-unknown/release/webmamba.wasm'], { stdio: 'inherit' });
// its glue replaces the package's (the plain threaded module, not started where relaxed SIMD
// validates, would no longer match it)
cpSync(join(out, 'bindgen/webmamba.js'), join(pkg, 'threads/webmamba.js'));
execFileSync('node_modules/.bin/wasm-opt', ['-O3', '-g', '--enable-bulk-memory', '--enable-nontrapping-float-to-int',
  '--enable-threads', '--enable-simd', '--enable-relaxed-simd', '--enable-sign-ext', '--enable-mutable-globals',
  join(out, 'bindgen/webmamba_bg.wasm'), '-o', join(pkg, 'threads/webmamba_relaxed_bg.wasm')], { stdio: 'inherit' });

const server = await serve('tests/browser', 0, { mounts: { '/pkg/': pkg, '/model/': opt.model }, isolated: true });
const logs = join(out, 'logs');
execFileSync('mkdir', ['-p', logs]);
// the renderer writes one isolate-*-v8.log per isolate (page, model worker, pool workers) into its cwd
const cwd = process.cwd();
process.chdir(logs);
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: [...ARGS, '--js-flags=--prof'] });
process.chdir(cwd);
const page = await browser.newPage();
await page.goto(`http://127.0.0.1:${server.address().port}/loading.html`);
await page.evaluate(() => window.ready);
const rate = await page.evaluate(async ({ threads, tokens }) => {
  const { Model } = window.webmamba;
  const model = await Model.fromUrl('/model/', { backend: 'cpu', cache: false, worker: true, threads });
  const s = model.newSession();
  await s.appendTokens(Uint32Array.from({ length: 16 }, (_, i) => i + 100));
  const t0 = performance.now();
  await s.generate({ maxTokens: tokens, stopAtEos: false });
  const r = tokens / ((performance.now() - t0) / 1000);
  await model.free();
  return r;
}, { threads: Number(opt.threads), tokens: Number(opt.tokens) });
await browser.close();
server.close();
console.log(`decode ${rate.toFixed(1)} tok/s on ${opt.threads} thread(s), ${opt.tokens} tokens (profiled: slower than unprofiled)`);
for (const f of readdirSync(logs).filter((f) => f.endsWith('-v8.log'))) {
  const report = execFileSync('node', ['--prof-process', join(logs, f)], { stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 1 << 28 }).toString();
  writeFileSync(join(logs, `${f}.txt`), report);
  if (!/JS: \*?webmamba/.test(report)) continue;
  // the flat profile's wasm functions and the futex waits (`syscall`: asleep), most ticks first
  const head = report.split(' [Summary]:')[0].split('\n').filter((l) => /^\s+\d+\s+[\d.]+%.*(JS: |syscall)/.test(l))
    .sort((x, y) => parseInt(y) - parseInt(x)).slice(0, 12);
  console.log(`\n${f}:\n${head.map((l) => l.slice(0, 160)).join('\n')}`);
}
console.log(`\nlogs and full reports (bottom-up callers too): ${resolve(logs)}`);
