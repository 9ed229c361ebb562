#!/usr/bin/env node
// Loading real checkpoints in headless Chromium through the npm package (www/pkg, built by
// `npm run build:demo`), served by scripts/serve.mjs (Range, HEAD, ETag; it counts the bytes
// it sends):
//   1. fixtures, single-file (medium-bf16) and sharded (original-sharded), through
//      Model.fromUrl (also in the Hub's form, `…/resolve/main/`, answered with redirects as the
//      Hub does), Model.fromFiles and the bytes entry Model.load, on WebGPU (SwiftShader)
//      and on the CPU: the same logits whatever the path, within 1e-4 of HF transformers'
//      (reference.safetensors), and HF's greedy tokens;
//   2. progress events: monotone per (phase, file), each file's last one has loaded == total;
//   3. the offline cache: after a page reload a second fromUrl gets 0 weight bytes from the
//      server; Model.clearCache empties it; cache: false stores nothing;
//   4. typed errors: a folder that is not there, bad options, a model too large for the CPU
//      backend in wasm32 (a 2.8B-shaped checkpoint of sparse zeros: OutOfMemory before any
//      weight byte is downloaded);
//   5. with WEBMAMBA_BIG=1 (or --big): a random bf16 checkpoint at mamba-790m's shape in 4
//      shards (1.6 GB, written at test time by `webmamba random`, not committed), loaded with
//      weights "f16": wasm memory stays <= 256 MiB, progress reaches the total, a prefill and a
//      decode step run, and after a reload the second load gets 0 weight bytes.
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { serve } from '../../scripts/serve.mjs';
import { ARGS, checker, openTestPage, reload } from './harness.mjs';

const BIG = process.env.WEBMAMBA_BIG === '1' || process.argv.includes('--big');
const MIB = 2 ** 20;
const { check, counts } = checker('loading');

/** HF's outputs for a fixture: ids, logits (L, V), prompt_ids, greedy_ids. */
function reference(name) {
  const bytes = readFileSync(`tests/fixtures/${name}/reference.safetensors`);
  const len = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + len).toString());
  const data = (key) => {
    const { dtype, data_offsets: [a, b] } = header[key];
    const slice = bytes.subarray(8 + len + a, 8 + len + b);
    const copy = new Uint8Array(slice).buffer;
    return dtype === 'F32' ? Array.from(new Float32Array(copy)) : Array.from(new Int32Array(copy));
  };
  return { ids: data('ids'), logits: data('logits'), promptIds: data('prompt_ids'), greedyIds: data('greedy_ids') };
}

/** Runs in the page: loads a model by `how`, feeds `ids`, returns its last logits and greedy ids. */
async function probe(page, how, url, options, ids, promptIds, greedy) {
  return page.evaluate(async ({ how, url, options, ids, promptIds, greedy }) => {
    const { Model } = window.webmamba;
    const events = [];
    const o = { ...options, onProgress: (e) => events.push(e) };
    let model;
    if (how === 'url') model = await Model.fromUrl(url, o);
    else if (how === 'files') model = await Model.fromFiles(document.getElementById('files').files, o);
    else {
      const get = async (f) => new Uint8Array(await (await fetch(url + f)).arrayBuffer());
      model = await Model.load(await get('config.json'), await get('model.safetensors'), await get('tokenizer.json'), o);
    }
    const s = model.newSession();
    await s.appendTokens(new Uint32Array(ids));
    const logits = Array.from(s.logits());
    const g = model.newSession();
    await g.appendTokens(new Uint32Array(promptIds));
    await g.generate({ maxTokens: greedy, stopAtEos: false });
    const out = Array.from(g.tokens()).slice(promptIds.length);
    const info = model.info;
    return { logits, greedy: out, events, backend: info.backend, weightFormat: info.weightFormat,
      weightBytes: info.weightBytes, warnings: info.warnings, memory: window.wasmMemory() };
  }, { how, url, options, ids, promptIds, greedy });
}

/** Progress events are monotone per (phase, file) and each file's last event reaches its total;
 *  kernels compile on the GPU only. */
function checkProgress(events, label, gpu = true) {
  const last = new Map();
  let monotone = true;
  for (const e of events) {
    const key = `${e.phase} ${e.file}`;
    if (last.has(key) && e.loaded < last.get(key).loaded) monotone = false;
    last.set(key, e);
  }
  const unfinished = [...last.values()].filter((e) => e.loaded !== e.total);
  const phases = new Set(events.map((e) => e.phase));
  const wanted = gpu ? ['download', 'upload', 'compile'] : ['download', 'upload'];
  check(monotone && unfinished.length === 0 && wanted.every((p) => phases.has(p)),
    `${label}: ${events.length} progress events, monotone, every file reaches its total (${[...phases].join('/')})`);
}

const maxDiff = (a, b) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);
const weightBytesSent = (server, prefix) => [...server.sent].filter(([p]) => p.startsWith(prefix) && p.endsWith('.safetensors'))
  .reduce((n, [, b]) => n + b, 0);

async function fixtures(page, server, base) {
  for (const [name, files] of [
    ['medium-bf16', ['config.json', 'tokenizer.json', 'model.safetensors']],
    ['original-sharded', ['config.json', 'tokenizer.json', 'model.safetensors.index.json',
      'model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors']],
  ]) {
    const r = reference(name);
    const vocab = r.logits.length / r.ids.length;
    const hfLast = r.logits.slice(-vocab);
    const url = `${base}/fixtures/${name}/`;
    const weights = name.includes('bf16') ? 'f16' : 'f32'; // the format that holds the file exactly
    await page.setInputFiles('#files', files.map((f) => `tests/fixtures/${name}/${f}`));
    const runs = {};
    const hubUrl = `${base}/hub/${name}/resolve/main/`;
    for (const [how, backend] of [['url', 'gpu'], ['hub', 'gpu'], ['files', 'gpu'], ['url', 'cpu'], ['files', 'cpu'], ['bytes', 'gpu']]) {
      if (how === 'bytes' && files.length > 3) continue; // the bytes entry takes one weights file
      const [kind, from] = how === 'hub' ? ['url', hubUrl] : [how, url];
      const got = await probe(page, kind, from, { backend, weights, cache: false }, r.ids, r.promptIds, r.greedyIds.length);
      runs[`${how}/${backend}`] = got;
      const d = maxDiff(got.logits, hfLast);
      check(got.backend === backend && d <= 1e-4, `${name} ${how}/${backend} (${got.weightFormat}): last logits vs HF max |diff| ${d.toExponential(2)}`);
      check(JSON.stringify(got.greedy) === JSON.stringify(r.greedyIds),
        `${name} ${how}/${backend}: HF's ${r.greedyIds.length} greedy tokens (${JSON.stringify(got.greedy)} vs ${JSON.stringify(r.greedyIds)})`);
      checkProgress(got.events, `${name} ${how}/${backend}`, backend === 'gpu');
    }
    for (const backend of ['gpu', 'cpu']) {
      const same = Object.entries(runs).filter(([k]) => k.endsWith(backend)).map(([, v]) => v.logits);
      check(same.every((l) => maxDiff(l, same[0]) === 0), `${name} ${backend}: ${same.length} load paths give identical logits`);
    }
  }
}

async function loadUrl(page, url, options) {
  return page.evaluate(async ({ url, options }) => {
    const events = [];
    try {
      const model = await window.webmamba.Model.fromUrl(url, { ...options, onProgress: (e) => events.push(e) });
      const s = model.newSession();
      const t0 = performance.now();
      await s.appendTokens(new Uint32Array([1, 2, 3, 4, 5, 6, 7, 8]));
      const prefillMs = performance.now() - t0;
      const t1 = performance.now();
      await s.generate({ maxTokens: 1, stopAtEos: false });
      const ids = Array.from(s.tokens()).slice(8);
      const decodeMs = performance.now() - t1;
      const logits = Array.from(s.logits());
      const info = model.info;
      return { ok: true, events, ids, finite: logits.every(Number.isFinite), memory: window.wasmMemory(), prefillMs, decodeMs,
        adapter: model.info.adapter,
        info: { backend: info.backend, weightFormat: info.weightFormat, weightBytes: info.weightBytes,
          activationBytes: info.activationBytes, warnings: info.warnings, f16Subnormal: info.f16Subnormal, f16Overflow: info.f16Overflow } };
    } catch (e) {
      return { ok: false, name: e.name, code: e.code, message: String(e.message ?? e), events, memory: window.wasmMemory() };
    }
  }, { url, options });
}

async function cache(page, server, base) {
  const url = `${base}/fixtures/medium-bf16/`;
  await page.evaluate((u) => window.webmamba.Model.clearCache(u), url);
  const prefix = '/fixtures/medium-bf16/';
  const before = weightBytesSent(server, prefix);
  const first = await loadUrl(page, url, {});
  const firstBytes = weightBytesSent(server, prefix) - before;
  await reload(page);
  const mid = weightBytesSent(server, prefix);
  const second = await loadUrl(page, url, {});
  const secondBytes = weightBytesSent(server, prefix) - mid;
  check(first.ok && second.ok && JSON.stringify(first.ids) === JSON.stringify(second.ids),
    `cache: both loads work and agree (${first.message ?? ''}${second.message ?? ''})`);
  check(firstBytes > 0 && secondBytes === 0, `cache: first load got ${firstBytes} weight bytes, the second (after a reload) ${secondBytes}`);
  // The same through the Hub's URL form (redirects): cached under the URL asked for.
  const hubUrl = `${base}/hub/medium-bf16/resolve/main/`;
  const hubFirst = await loadUrl(page, hubUrl, {});
  await reload(page);
  const beforeHub = weightBytesSent(server, prefix);
  const hubSecond = await loadUrl(page, hubUrl, {});
  check(hubFirst.ok && hubSecond.ok && weightBytesSent(server, prefix) === beforeHub,
    `cache: through .../resolve/main/ redirects too, a reload downloads no weight bytes`);
  await page.evaluate((u) => window.webmamba.Model.clearCache(u), hubUrl);
  // A cache that refuses every write (a full quota, simulated): warnings, and the load works.
  await page.evaluate((u) => window.webmamba.Model.clearCache(u), url);
  const refused = await page.evaluate(async (u) => {
    const put = Cache.prototype.put;
    Cache.prototype.put = () => Promise.reject(new DOMException('quota exceeded (simulated)', 'QuotaExceededError'));
    const events = [];
    try {
      const m = await window.webmamba.Model.fromUrl(u, { onProgress: (e) => events.push(e) });
      return { ok: true, warnings: m.info.warnings, inProgress: events.filter((e) => e.warning).length };
    } catch (e) {
      return { ok: false, message: String(e.message ?? e) };
    } finally {
      Cache.prototype.put = put;
    }
  }, url);
  check(refused.ok && refused.warnings.length === 3 && refused.inProgress === 3 && /quota exceeded/.test(refused.warnings[0]),
    `a refused cache write is a warning and the load succeeds: ${JSON.stringify(refused)}`);
  const cleared = await page.evaluate((u) => window.webmamba.Model.clearCache(u), url);
  check(cleared === 0, `nothing was cached by the refused writes (${cleared} entries)`);
  const fourth = await loadUrl(page, url, {});
  const cachedAgain = await page.evaluate((u) => window.webmamba.Model.clearCache(u), url);
  check(fourth.ok && cachedAgain === 3, `clearCache removed the ${cachedAgain} cached files`);
  const mid2 = weightBytesSent(server, prefix);
  const third = await loadUrl(page, url, { cache: false });
  const again = await page.evaluate((u) => window.webmamba.Model.clearCache(u), url);
  check(third.ok && weightBytesSent(server, prefix) - mid2 > 0 && again === 0,
    `after clearCache the weights are downloaded again; cache: false stored nothing (${again} entries)`);
}

/** A tiny HF Mamba folder whose state_size (1025) the GPU kernels cannot run (N_MAX is 64):
 *  written here, f32 weights of small random values. */
function writeWideStateModel(dir) {
  const [v, d, n, di, k] = [16, 8, 1025, 16, 4];
  const tensors = [
    ['backbone.embeddings.weight', [v, d]], ['backbone.layers.0.norm.weight', [d], 1],
    ['backbone.layers.0.mixer.in_proj.weight', [2 * di, d]], ['backbone.layers.0.mixer.conv1d.weight', [di, 1, k]],
    ['backbone.layers.0.mixer.conv1d.bias', [di]], ['backbone.layers.0.mixer.x_proj.weight', [1 + 2 * n, di]],
    ['backbone.layers.0.mixer.dt_proj.weight', [di, 1]], ['backbone.layers.0.mixer.dt_proj.bias', [di]],
    ['backbone.layers.0.mixer.A_log', [di, n]], ['backbone.layers.0.mixer.D', [di], 1],
    ['backbone.layers.0.mixer.out_proj.weight', [d, di]], ['backbone.norm_f.weight', [d], 1],
  ];
  let seed = 1;
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31 - 0.5) * 0.2;
  const header = {};
  const parts = [];
  let at = 0;
  for (const [name, shape, constant] of tensors) {
    const values = new Float32Array(shape.reduce((a, b) => a * b, 1)).map(() => constant ?? random());
    header[name] = { dtype: 'F32', shape, data_offsets: [at, at + values.byteLength] };
    at += values.byteLength;
    parts.push(Buffer.from(values.buffer));
  }
  const json = Buffer.from(JSON.stringify(header).padEnd(Math.ceil(JSON.stringify(header).length / 8) * 8));
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(json.length));
  mkdirSync(dir, { recursive: true });
  writeFileSync(`${dir}/model.safetensors`, Buffer.concat([length, json, ...parts]));
  writeFileSync(`${dir}/config.json`, JSON.stringify({ model_type: 'mamba', vocab_size: v, hidden_size: d,
    num_hidden_layers: 1, state_size: n, expand: 2, conv_kernel: k, time_step_rank: 1 }));
  copyFileSync('tests/fixtures/tiny-f32/tokenizer.json', `${dir}/tokenizer.json`);
}

async function errors(page, base, bigCpu) {
  // A model the GPU cannot run: "gpu" is a typed error, "auto" runs it on the CPU and says why.
  writeWideStateModel('target/browser-test/state-1025');
  const wide = `${base}/big/state-1025/`;
  const strict = await loadUrl(page, wide, { backend: 'gpu', cache: false });
  check(!strict.ok && strict.code === 'UnsupportedModel', `state_size 1025 on backend "gpu": ${strict.code}: ${strict.message}`);
  const auto = await loadUrl(page, wide, { cache: false });
  check(auto.ok && auto.finite && auto.info.backend === 'cpu' && /cannot run this model/.test(auto.adapter),
    `state_size 1025 on backend "auto" falls back to the CPU: ${auto.adapter ?? auto.message}`);
  const missing = await loadUrl(page, `${base}/fixtures/no-such-model/`, {});
  check(!missing.ok && missing.name === 'WebMambaError' && missing.code === 'Io', `a missing folder is a typed error: ${missing.code}: ${missing.message}`);
  // A server that answers missing files with an HTML page and 200 (Vite's dev server, SPA hosts).
  const spa = await loadUrl(page, `${base}/spa/tiny-f32/`, { cache: false });
  const spaSharded = await loadUrl(page, `${base}/spa/original-sharded/`, { cache: false });
  check(spa.ok && spa.finite && spaSharded.ok && spaSharded.finite,
    `a server answering missing files with its HTML page: single-file and sharded folders load (${spa.message ?? 'ok'}, ${spaSharded.message ?? 'ok'})`);
  const spaMissing = await loadUrl(page, `${base}/spa/no-such-model/`, {});
  check(!spaMissing.ok && spaMissing.code === 'Io', `and a missing folder there is ${spaMissing.code}: ${spaMissing.message}`);
  const bad = await loadUrl(page, `${base}/fixtures/medium-bf16/`, { weights: 'int4' });
  check(!bad.ok && bad.code === 'InvalidInput', `bad options are InvalidInput: ${bad.message}`);
  const huge = await loadUrl(page, bigCpu, { backend: 'cpu' });
  check(!huge.ok && huge.code === 'OutOfMemory' && /GB/.test(huge.message), `a 2.8B-shaped model on the CPU backend: ${huge.code}: ${huge.message}`);
  check(!huge.events.some((e) => e.phase === 'upload'), 'it failed before any weight byte was used');
}

async function big(page, server, base) {
  const dir = 'target/browser-test/mamba-790m-bf16';
  if (!existsSync(`${dir}/model.safetensors.index.json`)) {
    console.log('loading: writing a random 790M-shaped bf16 checkpoint (4 shards) ...');
    execFileSync('target/debug/webmamba', ['random', '--shape', '790m', '--dtype', 'bf16', '--shards', '4', '--out', dir], { stdio: 'inherit' });
  }
  const url = `${base}/big/mamba-790m-bf16/`;
  await page.evaluate((u) => window.webmamba.Model.clearCache(u), url);
  const t0 = Date.now();
  const first = await loadUrl(page, url, { weights: 'f16' });
  const loadS = (Date.now() - t0) / 1000;
  const sentFirst = weightBytesSent(server, '/big/');
  console.log(`loading: 790M: ${JSON.stringify({ ...first, events: first.events.length })}`);
  check(first.ok && first.finite && first.ids.length === 1, `790M f16: loads, a prefill of 8 tokens (${first.prefillMs?.toFixed(0)} ms) and a decode step (${first.decodeMs?.toFixed(0)} ms) run with finite logits (${loadS.toFixed(0)} s in all)`);
  check(first.memory <= 256 * MIB, `790M f16: wasm memory ${(first.memory / MIB).toFixed(0)} MiB <= 256 MiB`);
  checkProgress(first.events, '790M');
  await reload(page);
  const t1 = Date.now();
  const second = await loadUrl(page, url, { weights: 'f16' });
  const sentSecond = weightBytesSent(server, '/big/') - sentFirst;
  check(second.ok && sentFirst > 1.5e9 && sentSecond === 0,
    `790M after a reload: ${sentSecond} weight bytes from the server (first load ${(sentFirst / 1e9).toFixed(2)} GB), loaded from the cache in ${((Date.now() - t1) / 1000).toFixed(0)} s, wasm memory ${(second.memory / MIB).toFixed(0)} MiB`);
  await page.evaluate((u) => window.webmamba.Model.clearCache(u), url);
}

if (!existsSync('www/pkg/webmamba.js')) throw new Error('run `npm run build:demo` first');
execFileSync('cargo', ['build', '--features', 'cli', '--quiet'], { stdio: 'inherit' });
const bigCpuDir = 'target/browser-test/mamba-2.8b-zeros';
if (!existsSync(`${bigCpuDir}/model.safetensors.index.json`)) {
  execFileSync('target/debug/webmamba', ['random', '--shape', '2.8b', '--zeros', '--shards', '3', '--out', bigCpuDir], { stdio: 'inherit' });
}
// `/hub/<name>/resolve/main/<file>` answers like the Hugging Face Hub: a 302 to the file.
const hub = (path) => {
  const m = /^\/hub\/([^/]+)\/resolve\/main\/(.+)$/.exec(path);
  return m ? `/fixtures/${m[1]}/${m[2]}` : null;
};
const server = await serve('tests/browser', 0,
  { mounts: { '/pkg/': 'www/pkg', '/fixtures/': 'tests/fixtures', '/spa/': 'tests/fixtures', '/big/': 'target/browser-test' },
    redirect: hub, htmlFallback: '/spa/' });
const base = `http://127.0.0.1:${server.address().port}`;
// A persistent profile (a fresh one each run), as a user's browser has: Playwright's default
// contexts are incognito-like, whose Cache API lives in memory with a small quota.
const profile = mkdtempSync(join(tmpdir(), 'webmamba-profile-'));
const browser = await chromium.launchPersistentContext(profile, { executablePath: '/usr/bin/chromium', args: ARGS });
try {
  const { page, pageErrors } = await openTestPage(browser, base);
  page.on('console', (m) => { if (m.type() === 'error') console.log(`loading: console: ${m.text()}`); });
  await fixtures(page, server, base);
  await cache(page, server, base);
  await errors(page, base, `${base}/big/mamba-2.8b-zeros/`);
  if (BIG) await big(page, server, base);
  else console.log('loading: the 790M-shaped load is opt-in: WEBMAMBA_BIG=1 node tests/browser/loading.mjs');
  check(pageErrors.length === 0, `no uncaught page errors ${JSON.stringify(pageErrors)}`);
} finally {
  await browser.close();
  server.close();
  rmSync(profile, { recursive: true, force: true });
}
if (counts.failed) {
  console.error(`loading: ${counts.failed} check(s) failed`);
  process.exit(1);
}
console.log('loading: all checks passed');
