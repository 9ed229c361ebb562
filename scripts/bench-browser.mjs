#!/usr/bin/env node
// The benchmark suite in the browser (`npm run bench:browser`): the built npm package
// (www/pkg, from `npm run build:demo`) in headless Chromium (or --engine firefox|webkit: the
// tests' engines, tests/browser/engines.mjs), on WebGPU (SwiftShader here) in
// each weight format and on the wasm CPU fallback, through the public API only; then, in the
// same run, the native CPU suite (`webmamba bench --suite --json --backends cpu`) on the same
// model, for the wasm/native ratios. Medians of --runs with min and max; a table, or --json.
//   node scripts/bench-browser.mjs [--model DIR | --shape 130m] [--runs 3] [--formats f32,f16,int8] [--json]
//                                  [--pkg www/pkg] (another build of the package, to compare) [--no-native]
//                                  [--threads 1,2] (the wasm CPU in worker mode in a cross-origin-isolated
//                                  page on each count, the native CPU on the same counts: wasm-cpu-<n>t)
//                                  [--simd128] (each wasm CPU row again on the plain module, not the
//                                  relaxed-SIMD one Chromium starts: wasm-cpu[-<n>t]-simd128; Chromium only)
//                                  [--engine chromium|firefox|webkit] (firefox/webkit through WebDriver;
//                                  webkit needs a display: xvfb-run, and has no wasm threads)
// Figures as in docs/BENCHMARKS.md, measured with the JS API:
//   prefill_tok_s   appendTokens(n ids) on a new session (ids never seen by the cache);
//   decode_tok_s    generate({ maxTokens: 128 }) after a 128-token prompt;
//   scan_speedup_512  generate of 512 tokens (one forward pass each) ÷ appendTokens of 512;
//   resume_speedup_2048  a 16-token follow-up after 2,048 tokens: re-read ÷ resumed (checked
//                   to read exactly 16 tokens);
//   capture_overhead_512 is not measurable through the API (the cache always captures): null.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';
import { serve } from './serve.mjs';
import { ARGS } from '../tests/browser/harness.mjs';
import { ENGINES, launch } from '../tests/browser/engines.mjs';

const { values: opt } = parseArgs({
  options: {
    model: { type: 'string' }, shape: { type: 'string' }, runs: { type: 'string', default: '3' },
    formats: { type: 'string', default: 'f32,f16,int8' }, json: { type: 'boolean', default: false },
    pkg: { type: 'string', default: 'www/pkg' }, 'no-native': { type: 'boolean', default: false },
    threads: { type: 'string' }, simd128: { type: 'boolean', default: false },
    engine: { type: 'string', default: 'chromium' },
  },
});
if (!ENGINES.includes(opt.engine)) throw new Error(`--engine: one of ${ENGINES.join(', ')}`);
if (opt.simd128 && opt.engine !== 'chromium') throw new Error('--simd128 compares the modules Chromium starts: Chromium only');
const runs = Number(opt.runs);
const threads = opt.threads?.split(',').map(Number) ?? null;
if (!existsSync(`${opt.pkg}/index.js`)) throw new Error('run `npm run build:demo` first');
const cli = 'target/release/webmamba';
if (!existsSync(cli)) execFileSync('cargo', ['build', '--release', '--features', 'cli'], { stdio: 'inherit' });
let dir = opt.model ?? 'www/models/shakespeare-mamba-3m';
if (opt.shape) {
  dir = `target/bench/random-${opt.shape}`;
  if (!existsSync(`${dir}/config.json`)) {
    execFileSync(cli, ['random', '--shape', opt.shape, '--dtype', 'bf16', '--out', dir], { stdio: 'inherit' });
  }
}

/** In the page: the suite on one backend / weight format. */
async function inPage(page, backend, weights, runs, threads = null) {
  return page.evaluate(async ({ backend, weights, runs, threads }) => {
    const { Model } = window.webmamba;
    const options = { backend, weights, cache: false, budgetBytes: Infinity };
    const model = await Model.fromUrl('/model/', threads ? { ...options, worker: true, threads } : options);
    const vocab = model.info.vocab;
    let salt = 0;
    const ids = (n) => { salt += 1; return Uint32Array.from({ length: n }, (_, i) => (i * 7919 + salt * 104729 + 1) % vocab); };
    const time = async (f) => { const t0 = performance.now(); const r = await f(); return [(performance.now() - t0) / 1000, r]; };
    const fresh = () => model.newSession();
    await fresh().appendTokens(ids(8)); // warm-up
    const info = typeof model.info.toJSON === 'function' ? model.info.toJSON() : model.info;
    if (threads && info.threads !== threads) throw new Error(`asked for ${threads} threads, got ${info.threads}: ${info.warnings}`);
    const r = { prefill: { 128: [], 512: [], 2048: [] }, decode: [], scan: [], resume: [], info };
    for (let run = 0; run < runs; run++) {
      for (const n of [128, 512, 2048]) {
        const s = fresh();
        r.prefill[n].push(n / (await time(() => s.appendTokens(ids(n))))[0]);
        s.close();
      }
      const d = fresh();
      await d.appendTokens(ids(128));
      r.decode.push(128 / (await time(() => d.generate({ maxTokens: 128, stopAtEos: false })))[0]);
      d.close();
      const a = fresh();
      const [whole] = await time(() => a.appendTokens(ids(512)));
      const b = fresh();
      await b.appendTokens(ids(1));
      const [oneByOne] = await time(() => b.generate({ maxTokens: 512, stopAtEos: false }));
      r.scan.push(oneByOne / whole);
      a.close(); b.close();
      const history = ids(2048);
      const h = fresh();
      await h.appendTokens(history);
      const resumed = Uint32Array.from([...history, ...ids(16)]);
      const s1 = fresh();
      const [tResume, o1] = await time(() => s1.appendTokens(resumed));
      const full = resumed.slice();
      full[0] = (full[0] + 1) % vocab;
      const s2 = fresh();
      const [tFull, o2] = await time(() => s2.appendTokens(full));
      if (o1.prefilled !== 16 || o2.prefilled !== full.length) throw new Error(`resume read ${o1.prefilled}, re-read ${o2.prefilled}`);
      r.resume.push(tFull / tResume);
      for (const s of [h, s1, s2]) s.close();
    }
    await model.free();
    return r;
  }, { backend, weights, runs, threads });
}

const stat = (xs) => {
  const v = [...xs].sort((a, b) => a - b);
  const n = v.length;
  return { median: n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, min: v[0], max: v[n - 1] };
};

// --simd128: a copy of the package without its relaxed-SIMD modules, served by a second server
// (the package then starts its plain modules, as in an engine without relaxed SIMD)
const plainPkg = opt.simd128 ? mkdtempSync(join(tmpdir(), 'webmamba-plain-pkg-')) : null;
if (plainPkg) cpSync(opt.pkg, plainPkg, { recursive: true, filter: (f) => !f.endsWith('_relaxed_bg.wasm') });
const servers = [opt.pkg, plainPkg].filter(Boolean)
  .map((pkg) => serve('tests/browser', 0, { mounts: { '/pkg/': pkg, '/model/': dir }, isolated: threads !== null }));
const bases = (await Promise.all(servers)).map((s) => `http://127.0.0.1:${s.address().port}`);
// Chromium through Playwright as it always was; Firefox and WebKit as the tests drive them
// (one window: --simd128's second page is Chromium's only)
const browser = opt.engine === 'chromium'
  ? await chromium.launch({ executablePath: '/usr/bin/chromium', args: ARGS })
  : await launch(opt.engine);
const version = opt.engine === 'chromium' ? browser.version() : browser.version;
const rows = {};
let adapter = '';
let formats = opt.formats.split(',').filter(Boolean);
try {
  const pages = [];
  for (const base of bases) {
    if (opt.engine !== 'chromium') {
      const { page, webgpu } = await browser.open(base);
      if (webgpu !== true && formats.length) {
        console.error(`bench:browser: no WebGPU rows in ${opt.engine}: ${webgpu}`);
        formats = [];
      }
      pages.push(page);
      continue;
    }
    const page = await browser.newPage();
    await page.goto(`${base}/loading.html`);
    await page.evaluate(() => window.ready);
    pages.push(page);
  }
  const cpus = threads ? threads.map((t) => ['cpu', 'auto', t]) : [['cpu', 'auto', null]];
  const variants = [...formats.map((w) => ['gpu', w, null, 0]),
    ...cpus.map((v) => [...v, 0]), ...(plainPkg ? cpus.map((v) => [...v, 1]) : [])];
  for (const [backend, weights, t, p] of variants) {
    const label = backend === 'gpu' ? `wasm-gpu-${weights}` : `wasm-cpu${t ? `-${t}t` : ''}${p ? '-simd128' : ''}`;
    console.error(`bench:browser: ${label}…`);
    const r = await inPage(pages[p], backend, weights, runs, t);
    if (backend === 'gpu') adapter = r.info.adapter;
    if (backend === 'cpu' && p && r.info.simd !== 'simd128') throw new Error(`${label} ran the ${r.info.simd} module`);
    rows[label] = {
      simd: r.info.simd,
      prefill_tok_s: Object.fromEntries(Object.entries(r.prefill).map(([n, xs]) => [n, stat(xs)])),
      decode_tok_s: stat(r.decode), scan_speedup_512: stat(r.scan), resume_speedup_2048: stat(r.resume),
      capture_overhead_512: null,
      memory_bytes: { weights: r.info.weightBytes, activations: r.info.activationBytes, state_and_slots: r.info.stateSlotBytes },
    };
  }
} finally {
  await browser.close();
  for (const s of await Promise.all(servers)) s.close();
  if (plainPkg) rmSync(plainPkg, { recursive: true, force: true });
}

let native = { model: null, backends: {} };
if (!opt['no-native']) {
  console.error('bench:browser: native cpu (same model, same run)…');
  const counts = threads ? ['--threads', threads.join(',')] : [];
  native = JSON.parse(execFileSync(cli, ['bench', '--suite', '--json', '--backends', 'cpu', ...counts, '--runs', String(runs), '--model', dir],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], env: { ...process.env, XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR ?? '/tmp' } }));
  for (const t of threads ?? [null]) rows[`native-cpu${t ? `-${t}t` : ''}`] = native.backends[t ? `cpu-${t}t` : 'cpu'];
}
const med = (label, key, n) => (n ? rows[label]?.[key][n] : rows[label]?.[key])?.median;
const ratios = {};
for (const t of threads ?? [null]) {
  const [w, n, sfx] = [`wasm-cpu${t ? `-${t}t` : ''}`, `native-cpu${t ? `-${t}t` : ''}`, t ? `_${t}t` : ''];
  ratios[`wasm_cpu_vs_native_prefill_512${sfx}`] = med(w, 'prefill_tok_s', '512') / med(n, 'prefill_tok_s', '512');
  ratios[`wasm_cpu_vs_native_decode${sfx}`] = med(w, 'decode_tok_s') / med(n, 'decode_tok_s');
  if (rows[`${w}-simd128`]) {
    ratios[`wasm_relaxed_vs_simd128_prefill_512${sfx}`] = med(w, 'prefill_tok_s', '512') / med(`${w}-simd128`, 'prefill_tok_s', '512');
    ratios[`wasm_relaxed_vs_simd128_decode${sfx}`] = med(w, 'decode_tok_s') / med(`${w}-simd128`, 'decode_tok_s');
  }
  if (t && t !== threads[0]) {
    for (const side of ['wasm', 'native']) {
      const [a, b] = [`${side}-cpu-${t}t`, `${side}-cpu-${threads[0]}t`];
      ratios[`${side}_${t}t_vs_${threads[0]}t_prefill_512`] = med(a, 'prefill_tok_s', '512') / med(b, 'prefill_tok_s', '512');
      ratios[`${side}_${t}t_vs_${threads[0]}t_decode`] = med(a, 'decode_tok_s') / med(b, 'decode_tok_s');
    }
  }
}
const report = { model: native.model, model_dir: dir, engine: opt.engine, browser: version, adapter, runs, ...Object.fromEntries(
  ['prefill_tok_s', 'decode_tok_s', 'scan_speedup_512', 'resume_speedup_2048', 'capture_overhead_512']
    .map((k) => [k, Object.fromEntries(Object.entries(rows).map(([l, r]) => [l, k === 'prefill_tok_s' ? r[k] : r[k]?.median ?? null]))])),
  ratios, backends: rows };
if (opt.json) {
  console.log(JSON.stringify(report, null, 2));
} else {
  const cell = (s, d = 1) => (s ? `${s.median.toFixed(d)} (${s.min.toFixed(d)}–${s.max.toFixed(d)})` : '—');
  console.log(`model ${JSON.stringify(native.model)} (${dir}); ${opt.engine} ${version}; WebGPU adapter: ${adapter}; median (min–max) of ${runs} runs\n`);
  console.log('| backend | module | prefill 128 tok/s | prefill 512 | prefill 2048 | decode tok/s | scan_speedup_512 | resume_speedup_2048 |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const [l, r] of Object.entries(rows)) {
    console.log(`| ${l} | ${r.simd ?? 'native'} | ${cell(r.prefill_tok_s['128'])} | ${cell(r.prefill_tok_s['512'])} | ${cell(r.prefill_tok_s['2048'])} | ${cell(r.decode_tok_s)} | ${cell(r.scan_speedup_512)} | ${cell(r.resume_speedup_2048)} |`);
  }
  console.log('');
  for (const [k, v] of Object.entries(ratios)) if (Number.isFinite(v)) console.log(`${k}: ${v.toFixed(2)}x`);
}
