#!/usr/bin/env node
// Loading real checkpoints in every browser engine (Chromium, Firefox, WebKit: engines.mjs)
// through the npm package (www/pkg, built by `npm run build:demo`), served by scripts/serve.mjs
// (Range, HEAD, ETag; it counts the bytes it sends):
//   1. fixtures, single-file (medium-bf16) and sharded (original-sharded), through
//      Model.fromUrl (also in the Hub's form, `…/resolve/main/`, answered with redirects as the
//      Hub does), Model.fromFiles and the bytes entry Model.load, on the CPU in the page and in
//      a worker, and on WebGPU where the engine has an adapter (Chromium's SwiftShader): the
//      same logits whatever the path, within 1e-4 of HF transformers' (reference.safetensors),
//      and HF's greedy tokens;
//   1b. a Qwen3.5 checkpoint with a vision tower in its file (qwen35-vl-bf16) by Model.fromUrl on
//      the CPU: none of the tower's bytes are downloaded (Range requests for the rest), with and
//      without the offline cache (a file read in parts is not cached); a server that ignores
//      Range, or an `integrity` entry for the file, has it read whole; HF's logits, from picked
//      files too;
//   2. progress events: monotone per (phase, file), each file's last one has loaded == total;
//   3. the offline cache: after a page reload a second fromUrl gets 0 weight bytes from the
//      server (in the page and in a worker); Model.clearCache empties it; cache: false stores
//      nothing;
//   4. typed errors: a folder that is not there, bad options, a model too large for the CPU
//      backend in wasm32 (a 2.8B-shaped checkpoint of sparse zeros: OutOfMemory before any
//      weight byte is downloaded);
//   5. with WEBMAMBA_BIG=1 (or --big), in Chromium: a random bf16 checkpoint at mamba-790m's shape in 4
//      shards (1.6 GB, written at test time by `webmamba random`, not committed), loaded with
//      weights "f16": wasm memory stays <= 256 MiB, progress reaches the total, a prefill and a
//      decode step run, and after a reload the second load gets 0 weight bytes;
//   5b. with WEBMAMBA_HASH_COST=1 (or --hash-cost), in Chromium: what verified downloads cost
//      (hash-cost.mjs): that checkpoint loaded with and without an `integrity` option naming
//      every shard's SHA-256 (computed by node), alternated three times; the check is issue
//      54's goal, hashing < 5% of the load (docs/BENCHMARKS.md); `--only-hash-cost`: that
//      check alone;
//   6. with WEBMAMBA_BIG_HYBRID=1 (or --big-hybrid), in Chromium: a random bf16 checkpoint at
//      Granite-4.0-H-1B's shape (`webmamba random --shape granite-h-1b`, 2.9 GB in 4 shards,
//      written at test time) by Model.fromUrl on the GPU with f16 weights: wasm memory stays
//      <= 256 MiB, and a 600-token prefill (two forward chunks, crossing key/value pages) and 8
//      decode steps give the logits of the native CPU reference (`webmamba logits`) within 1e-4;
//   7. with WEBMAMBA_BIG_Q4=1 (or --big-q4; --only-big-q4 for it alone), in Chromium: a random
//      bf16 checkpoint at mamba-2.8b's shape (5.6 GB in 6 shards, `webmamba random --q4-grid`:
//      every matrix on values q4 stores exactly) by Model.fromUrl on the GPU with weights "q4":
//      GPU weights <= 1.6 GB, wasm memory <= 256 MiB, a 32-token prefill and a decode step give
//      finite logits, the native CPU reference's within 1e-4.
//   8. with WEBMAMBA_BIG_QWEN=1 (or --big-qwen; --only-big-qwen for it alone), in Chromium: a
//      random bf16 checkpoint at Qwen3.5-0.8B's shape (`webmamba random --shape qwen3.5-0.8b
//      --q4-grid`, 2 shards) with a vision tower in its files as the Hub's have one
//      (tools/fixtures/add_vision_tower.py: HF's own tensor names and shapes; needs a python with
//      transformers 5.25, WEBMAMBA_PYTHON, default `python3`) by Model.fromUrl on the GPU with
//      weights "q4": none of the tower's bytes is downloaded (the server's answered ranges), wasm memory <= 256
//      MiB, a 300-token prefill (five DeltaNet chunks, two forward chunks) and 4 decode steps
//      give the native CPU reference's logits within 1e-4.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, copyFileSync, existsSync, mkdirSync, openSync, readFileSync, readSync, statSync, writeFileSync } from 'node:fs';
import { serve } from '../../scripts/serve.mjs';
import { hashCost } from './hash-cost.mjs';
import { runEngines } from './harness.mjs';

const BIG = process.env.WEBMAMBA_BIG === '1' || process.argv.includes('--big');
const ONLY_HASH_COST = process.argv.includes('--only-hash-cost'); // that check alone, in Chromium
const HASH_COST = ONLY_HASH_COST || process.env.WEBMAMBA_HASH_COST === '1' || process.argv.includes('--hash-cost');
const ONLY_BIG_HYBRID = process.argv.includes('--only-big-hybrid'); // that check alone, in Chromium
const BIG_HYBRID = ONLY_BIG_HYBRID || process.env.WEBMAMBA_BIG_HYBRID === '1' || process.argv.includes('--big-hybrid');
const ONLY_BIG_Q4 = process.argv.includes('--only-big-q4'); // that check alone, in Chromium
const BIG_Q4 = ONLY_BIG_Q4 || process.env.WEBMAMBA_BIG_Q4 === '1' || process.argv.includes('--big-q4');
const ONLY_BIG_QWEN = process.argv.includes('--only-big-qwen'); // that check alone, in Chromium
const BIG_QWEN = ONLY_BIG_QWEN || process.env.WEBMAMBA_BIG_QWEN === '1' || process.argv.includes('--big-qwen');
const MIB = 2 ** 20;
/** The current engine's check (runEngines gives each engine its own counts). */
let check;

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
    const logits = Array.from(await s.logits());
    const g = model.newSession();
    await g.appendTokens(new Uint32Array(promptIds));
    await g.generate({ maxTokens: greedy, stopAtEos: false });
    const out = Array.from(await g.tokens()).slice(promptIds.length);
    const info = model.info;
    model.free();
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
/** Each answer the server gave to a GET of `path` since its log entry `since`, as [first, end)
 *  of the file. */
const answered = (server, path, since) => server.log.slice(since).filter((e) => e.path === path && e.method === 'GET')
  .map((e) => { const a = e.status === 206 ? Number(/^bytes=(\d+)-/.exec(e.range)[1]) : 0; return [a, a + e.bytes]; });
/** Bytes of the [first, end) `ranges` inside the [first, end) `spans`. */
const bytesIn = (ranges, spans) => ranges.reduce((n, [a, b]) => n + spans.reduce((m, [x, y]) => m + Math.max(0, Math.min(b, y) - Math.max(a, x)), 0), 0);
/** The vision tower's tensors in safetensors file `file`, as [first, end) of the file (its
 *  header only is read). */
function towerSpans(file) {
  const fd = openSync(file, 'r');
  try {
    const head = Buffer.alloc(8);
    readSync(fd, head, 0, 8, 0);
    const len = Number(head.readBigUInt64LE(0));
    const text = Buffer.alloc(len);
    readSync(fd, text, 0, len, 8);
    return Object.entries(JSON.parse(text.toString())).filter(([k]) => k.startsWith('model.visual.'))
      .map(([, v]) => [8 + len + v.data_offsets[0], 8 + len + v.data_offsets[1]]);
  } finally {
    closeSync(fd);
  }
}

async function fixtures(page, base, webgpu) {
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
    // Every load path on the CPU, in the page and in a worker; on WebGPU where the engine has it.
    const paths = [['url', 'cpu'], ['hub', 'cpu'], ['files', 'cpu'], ['bytes', 'cpu'], ['url', 'cpu', true], ['files', 'cpu', true]];
    if (webgpu) paths.push(['url', 'gpu'], ['hub', 'gpu'], ['files', 'gpu'], ['bytes', 'gpu'], ['url', 'gpu', true]);
    for (const [how, backend, worker = false] of paths) {
      if (how === 'bytes' && files.length > 3) continue; // the bytes entry takes one weights file
      const [kind, from] = how === 'hub' ? ['url', hubUrl] : [how, url];
      const got = await probe(page, kind, from, { backend, weights, cache: false, worker }, r.ids, r.promptIds, r.greedyIds.length);
      const path = `${how}/${backend}${worker ? '/worker' : ''}`;
      runs[path] = got;
      const d = maxDiff(got.logits, hfLast);
      check(got.backend === backend && d <= 1e-4, `${name} ${path} (${got.weightFormat}): last logits vs HF max |diff| ${d.toExponential(2)}`);
      check(JSON.stringify(got.greedy) === JSON.stringify(r.greedyIds),
        `${name} ${path}: HF's ${r.greedyIds.length} greedy tokens (${JSON.stringify(got.greedy)} vs ${JSON.stringify(r.greedyIds)})`);
      checkProgress(got.events, `${name} ${path}`, backend === 'gpu');
    }
    for (const backend of webgpu ? ['gpu', 'cpu'] : ['cpu']) {
      const same = Object.entries(runs).filter(([k]) => k.split('/')[1] === backend).map(([, v]) => v.logits);
      check(same.every((l) => maxDiff(l, same[0]) === 0), `${name} ${backend}: ${same.length} load paths give identical logits`);
    }
  }
}

/** A Qwen3.5 checkpoint with a vision tower in its file (Qwen3_5ForConditionalGeneration, the
 *  Hub's layout): Model.fromUrl on the CPU gets none of the tower's bytes (one Range request for
 *  the text model's tensors before it) and gives HF's logits; the same with the offline cache on,
 *  twice (a file read in parts is not cached: the second load asks for its parts again), and
 *  from a server that ignores Range (the whole file, read through). */
async function parts(page, server, base) {
  const name = 'qwen35-vl-bf16';
  const r = reference(name);
  const hfLast = r.logits.slice(-(r.logits.length / r.ids.length));
  const file = readFileSync(`tests/fixtures/${name}/model.safetensors`);
  const vision = towerSpans(`tests/fixtures/${name}/model.safetensors`);
  const [from, to] = [Math.min(...vision.map((o) => o[0])), Math.max(...vision.map((o) => o[1]))];
  const url = `${base}/fixtures/${name}/`;
  await page.evaluate((u) => window.webmamba.Model.clearCache(u), url);
  // A digest given for the file has it read whole, and checked.
  const integrity = { 'model.safetensors': `sha256-${createHash('sha256').update(file).digest('base64')}` };
  for (const [label, prefix, options, whole] of [['Range', '/fixtures/', { cache: false }, false],
    ['Range, cache on', '/fixtures/', {}, false], ['Range, cache on, again', '/fixtures/', {}, false],
    ['a server ignoring Range', '/norange/', { cache: false }, true],
    ['integrity given', '/fixtures/', { cache: false, integrity }, true]]) {
    const path = `${prefix}${name}/model.safetensors`;
    const start = server.log.length;
    const got = await probe(page, 'url', `${base}${prefix}${name}/`, { backend: 'cpu', ...options }, r.ids, r.promptIds, r.greedyIds.length);
    const sent = answered(server, path, start);
    const tower = bytesIn(sent, [[from, to]]);
    const d = maxDiff(got.logits, hfLast);
    check(got.backend === 'cpu' && d <= 1e-4 && JSON.stringify(got.greedy) === JSON.stringify(r.greedyIds),
      `${name} (${label}): last logits vs HF max |diff| ${d.toExponential(2)}, HF's greedy tokens`);
    checkProgress(got.events, `${name} (${label})`, false);
    const want = whole ? to - from : 0;
    check(tower === want && got.warnings.length === 0,
      `${name} (${label}): ${tower} of the vision tower's ${to - from} bytes (${from}..${to}) sent (want ${want}); requests ${JSON.stringify(sent)}; warnings ${JSON.stringify(got.warnings)}`);
  }
  const cached = await page.evaluate((u) => window.webmamba.Model.clearCache(u), url);
  check(cached === 3, `${name}: the file read in parts was not cached (${cached} cached files: config, tokenizer, generation_config)`);
  // Picked files: the same slices (Blob.slice), the same logits.
  await page.setInputFiles('#files', ['config.json', 'tokenizer.json', 'generation_config.json', 'model.safetensors']
    .map((f) => `tests/fixtures/${name}/${f}`));
  const picked = await probe(page, 'files', url, { backend: 'cpu' }, r.ids, r.promptIds, r.greedyIds.length);
  const d = maxDiff(picked.logits, hfLast);
  check(d <= 1e-4 && JSON.stringify(picked.greedy) === JSON.stringify(r.greedyIds),
    `${name} (picked files): last logits vs HF max |diff| ${d.toExponential(2)}, HF's greedy tokens`);
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
      const ids = Array.from(await s.tokens()).slice(8);
      const decodeMs = performance.now() - t1;
      const logits = Array.from(await s.logits());
      const info = model.info;
      model.free();
      return { ok: true, events, ids, finite: logits.every(Number.isFinite), memory: window.wasmMemory(), prefillMs, decodeMs,
        adapter: info.adapter,
        info: { backend: info.backend, weightFormat: info.weightFormat, weightBytes: info.weightBytes,
          activationBytes: info.activationBytes, warnings: info.warnings, f16Subnormal: info.f16Subnormal, f16Overflow: info.f16Overflow } };
    } catch (e) {
      return { ok: false, name: e.name, code: e.code, message: String(e.message ?? e), events, memory: window.wasmMemory() };
    }
  }, { url, options });
}

/** Whether the engine's Cache API keeps its entries across a page reload. WebKitGTK's
 *  MiniBrowser under WebDriver (an ephemeral session) keeps the cache's name but none of its
 *  entries; a user's Safari or Epiphany profile keeps them. */
async function cacheSurvivesReload(page) {
  await page.evaluate(async () => (await caches.open('webmamba-probe')).put('/probe', new Response('x')));
  await page.reload();
  return page.evaluate(async () => {
    const kept = (await (await caches.open('webmamba-probe')).keys()).length === 1;
    await caches.delete('webmamba-probe');
    return kept;
  });
}

async function cache(page, server, base) {
  const url = `${base}/fixtures/medium-bf16/`;
  // Where the engine forgets the Cache API's entries on a reload, the second load comes from the
  // same page instead: the offline cache's own code is still checked, the reload is not.
  const survives = await cacheSurvivesReload(page);
  const reload = survives ? () => page.reload() : async () => {};
  const after = survives ? 'after a reload' : 'in the same page (this engine keeps no Cache API entries across a reload here)';
  if (!survives) console.log(`loading: the Cache API forgets its entries on a reload here: cache checks ${after}`);
  await page.evaluate((u) => window.webmamba.Model.clearCache(u), url);
  const prefix = '/fixtures/medium-bf16/';
  const before = weightBytesSent(server, prefix);
  const first = await loadUrl(page, url, {});
  const firstBytes = weightBytesSent(server, prefix) - before;
  await reload();
  const mid = weightBytesSent(server, prefix);
  const second = await loadUrl(page, url, {});
  const secondBytes = weightBytesSent(server, prefix) - mid;
  check(first.ok && second.ok && JSON.stringify(first.ids) === JSON.stringify(second.ids),
    `cache: both loads work and agree (${first.message ?? ''}${second.message ?? ''})`);
  check(firstBytes > 0 && secondBytes === 0, `cache: first load got ${firstBytes} weight bytes, the second (${after}) ${secondBytes}`);
  // The same through the Hub's URL form (redirects): cached under the URL asked for.
  const hubUrl = `${base}/hub/medium-bf16/resolve/main/`;
  const hubFirst = await loadUrl(page, hubUrl, {});
  await reload();
  const beforeHub = weightBytesSent(server, prefix);
  const hubSecond = await loadUrl(page, hubUrl, {});
  check(hubFirst.ok && hubSecond.ok && weightBytesSent(server, prefix) === beforeHub,
    `cache: through .../resolve/main/ redirects too, a second load (${after}) downloads no weight bytes`);
  await page.evaluate((u) => window.webmamba.Model.clearCache(u), hubUrl);
  // In a worker: the same Cache API (the origin's), so a reload downloads nothing there either.
  const workerFirst = await loadUrl(page, url, { worker: true });
  await reload();
  const beforeWorker = weightBytesSent(server, prefix);
  const workerSecond = await loadUrl(page, url, { worker: true });
  check(workerFirst.ok && workerSecond.ok && weightBytesSent(server, prefix) === beforeWorker
    && JSON.stringify(workerSecond.ids) === JSON.stringify(first.ids),
    `cache: in a worker too, a second load (${after}) downloads no weight bytes (${workerFirst.message ?? ''}${workerSecond.message ?? ''})`);
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
  check(refused.ok && refused.warnings.length === 4 && refused.inProgress === 4 && /quota exceeded/.test(refused.warnings[0]),
    `a refused cache write is a warning and the load succeeds: ${JSON.stringify(refused)}`);
  const cleared = await page.evaluate((u) => window.webmamba.Model.clearCache(u), url);
  check(cleared === 0, `nothing was cached by the refused writes (${cleared} entries)`);
  const fourth = await loadUrl(page, url, {});
  const cachedAgain = await page.evaluate((u) => window.webmamba.Model.clearCache(u), url);
  check(fourth.ok && cachedAgain === 4, `clearCache removed the ${cachedAgain} cached files (config, tokenizer, generation_config, weights)`);
  const mid2 = weightBytesSent(server, prefix);
  const third = await loadUrl(page, url, { cache: false });
  const again = await page.evaluate((u) => window.webmamba.Model.clearCache(u), url);
  check(third.ok && weightBytesSent(server, prefix) - mid2 > 0 && again === 0,
    `after clearCache the weights are downloaded again; cache: false stored nothing (${again} entries)`);
  return survives;
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

/** The package imported by the test's own script: in Firefox that script runs in WebDriver's
 *  sandbox, another JavaScript realm (as an extension's content script does), whose Uint8Array
 *  and Uint32Array are not the page's — `fetch` bodies and typed arrays then fail `instanceof`
 *  (this was "Io: config.json: JsValue(Uint8Array)" in Firefox). Loads, ids and state bytes must
 *  work there too. */
async function otherRealm(page, base) {
  const r = await page.evaluate(async (base) => {
    try {
      const { Model } = await import('/pkg/index.js');
      const model = await Model.fromUrl(`${base}/fixtures/tiny-f32/`, { backend: 'cpu' });
      const s = model.newSession();
      await s.appendTokens(new Uint32Array([5, 17, 3]));
      const state = await s.exportState();
      const t = model.newSession();
      await t.importState(new Uint8Array(state));
      const same = Array.from(t.logits()).every((v, i) => v === s.logits()[i]);
      const loaded = await Model.load(new Uint8Array(await (await fetch(`${base}/fixtures/tiny-f32/config.json`)).arrayBuffer()),
        await (await fetch(`${base}/fixtures/tiny-f32/model.safetensors`)).arrayBuffer(), undefined, { backend: 'cpu' });
      model.free();
      loaded.free();
      return { ok: same };
    } catch (e) {
      return { ok: false, message: `${e.name} ${e.code}: ${e.message}` };
    }
  }, base);
  check(r.ok, `the package imported from the test's own script (another realm in Firefox): fromUrl, Uint32Array ids, state bytes and Model.load work ${r.message ?? ''}`);
}

async function errors(page, base, bigCpu, webgpu) {
  // A model the GPU cannot run: "gpu" is a typed error, "auto" runs it on the CPU and says why.
  writeWideStateModel('target/browser-test/state-1025');
  const wide = `${base}/big/state-1025/`;
  const strict = await loadUrl(page, wide, { backend: 'gpu', cache: false });
  const strictWant = webgpu ? 'UnsupportedModel' : 'NoAdapter';
  check(!strict.ok && strict.code === strictWant, `state_size 1025 on backend "gpu": ${strict.code}: ${strict.message}`);
  const auto = await loadUrl(page, wide, { cache: false });
  check(auto.ok && auto.finite && auto.info.backend === 'cpu' && (!webgpu || /cannot run this model/.test(auto.adapter)),
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

/** The random 790M-shaped bf16 checkpoint (4 shards, written once, not committed). */
function bigDir() {
  const dir = 'target/browser-test/mamba-790m-bf16';
  if (!existsSync(`${dir}/model.safetensors.index.json`)) {
    console.log('loading: writing a random 790M-shaped bf16 checkpoint (4 shards) ...');
    execFileSync('target/debug/webmamba', ['random', '--shape', '790m', '--dtype', 'bf16', '--shards', '4', '--out', dir], { stdio: 'inherit' });
  }
  return dir;
}

async function big(page, server, base) {
  const dir = bigDir();
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
  await page.reload();
  const t1 = Date.now();
  const second = await loadUrl(page, url, { weights: 'f16' });
  const sentSecond = weightBytesSent(server, '/big/') - sentFirst;
  check(second.ok && sentFirst > 1.5e9 && sentSecond === 0,
    `790M after a reload: ${sentSecond} weight bytes from the server (first load ${(sentFirst / 1e9).toFixed(2)} GB), loaded from the cache in ${((Date.now() - t1) / 1000).toFixed(0)} s, wasm memory ${(second.memory / MIB).toFixed(0)} MiB`);
  await page.evaluate((u) => window.webmamba.Model.clearCache(u), url);
}

/** Reads rows `from..to` of a 2-D f32 .npy file (as `webmamba logits` writes it). */
function npyRows(path, from, to) {
  const bytes = readFileSync(path);
  const headerLen = bytes.readUInt16LE(8);
  const header = bytes.subarray(10, 10 + headerLen).toString();
  const [, cols] = /'shape': \((\d+), (\d+)\)/.exec(header).slice(1).map(Number);
  const data = new Float32Array(new Uint8Array(bytes.subarray(10 + headerLen)).buffer);
  return Array.from({ length: to - from }, (_, i) => data.subarray((from + i) * cols, (from + i + 1) * cols));
}

/**
 * A random bf16 checkpoint of a published shape, written at test time (`webmamba random --shape
 * <shape> <extra>`), loaded by Model.fromUrl on the GPU with `weights`: wasm memory stays <= 256
 * MiB, GPU weights within `maxWeightBytes`, and a `prompt`-token prefill and `steps` decode steps
 * give finite logits, those of the native CPU reference (`webmamba logits`) within `tol`.
 */
async function bigAgainstCpu(page, base, { label, shape, extra = [], shards, weights, prompt, steps, tol, maxWeightBytes = Infinity, vision = null }) {
  const name = `${shape}-bf16${extra.join('')}${vision ? '-vision' : ''}`;
  const dir = `target/browser-test/${name}`;
  if (!existsSync(`${dir}/model.safetensors.index.json`)) {
    console.log(`loading: writing a random ${label} bf16 checkpoint (${shards} shards) ...`);
    execFileSync('target/debug/webmamba', ['random', '--shape', shape, '--dtype', 'bf16', '--shards', String(shards), ...extra, '--out', dir], { stdio: 'inherit' });
  }
  if (vision && !existsSync(`${dir}/vision.json`)) {
    console.log(`loading: adding a vision tower to the ${label} files ...`);
    const out = execFileSync(process.env.WEBMAMBA_PYTHON ?? 'python3', ['tools/fixtures/add_vision_tower.py', dir], { encoding: 'utf8' });
    writeFileSync(`${dir}/vision.json`, out.trim().split('\n').pop());
  }
  const sentBefore = vision ? weightBytesSent(vision.server, `/big/${name}/`) : 0;
  const logBefore = vision ? vision.server.log.length : 0;
  const config = JSON.parse(readFileSync(`${dir}/config.json`, 'utf8'));
  // The prompt, then the decode steps' tokens: a fixed pseudo-random sequence.
  let x = 12345;
  // (A multimodal checkpoint's text model is config.text_config: Qwen3.5's.)
  const vocab = config.vocab_size ?? config.text_config?.vocab_size;
  const ids = Array.from({ length: prompt + steps }, () => { x = (x * 1103515245 + 12345) % 2 ** 31; return x % vocab; });
  const npy = `${dir}/cpu-logits-${ids.length}.npy`;
  if (!existsSync(npy)) {
    console.log(`loading: the CPU reference of the ${label} (${ids.length} positions) ...`);
    const t = Date.now();
    execFileSync('target/debug/webmamba', ['logits', '--model', dir, '--backend', 'cpu', '--ids', ids.join(','), '--out', npy], { stdio: 'inherit' });
    console.log(`loading: CPU reference in ${((Date.now() - t) / 1000).toFixed(0)} s`);
  }
  const want = npyRows(npy, prompt - 1, prompt + steps);
  const url = `${base}/big/${name}/`;
  const t0 = Date.now();
  const got = await page.evaluate(async ({ url, ids, prompt, weights }) => {
    try {
      const t = performance.now();
      const model = await window.webmamba.Model.fromUrl(url, { weights, backend: 'gpu', cache: false });
      const loadMs = performance.now() - t;
      const s = model.newSession();
      const t1 = performance.now();
      await s.appendTokens(new Uint32Array(ids.slice(0, prompt)));
      const prefillMs = performance.now() - t1;
      const rows = [Array.from(await s.logits())];
      const t2 = performance.now();
      for (const id of ids.slice(prompt)) {
        await s.appendTokens(new Uint32Array([id]));
        rows.push(Array.from(await s.logits()));
      }
      const decodeMs = (performance.now() - t2) / (ids.length - prompt);
      const info = model.info;
      model.free();
      return { ok: true, rows, loadMs, prefillMs, decodeMs, memory: window.wasmMemory(),
        info: { backend: info.backend, weightFormat: info.weightFormat, weightBytes: info.weightBytes, maxContext: info.maxContext } };
    } catch (e) {
      return { ok: false, code: e.code, message: String(e.message ?? e), memory: window.wasmMemory() };
    }
  }, { url, ids, prompt, weights });
  const seconds = (Date.now() - t0) / 1000;
  if (!got.ok) {
    check(false, `${label}: ${got.code}: ${got.message}`);
    return;
  }
  let worst = 0;
  let finite = true;
  got.rows.forEach((row, i) => row.forEach((v, j) => { finite &&= Number.isFinite(v); worst = Math.max(worst, Math.abs(v - want[i][j])); }));
  const scale = Math.max(...want.map((row) => row.reduce((m, v) => Math.max(m, Math.abs(v)), 0)));
  console.log(`loading: ${label}: ${JSON.stringify(got.info)}, load ${(got.loadMs / 1000).toFixed(0)} s, prefill ${got.prefillMs.toFixed(0)} ms, decode ${got.decodeMs.toFixed(0)} ms/token, ${seconds.toFixed(0)} s in all, largest |logit| ${scale.toFixed(3)}`);
  check(got.info.backend === 'gpu' && got.info.weightFormat === weights, `${label}: on the GPU with ${weights} weights (${JSON.stringify(got.info)})`);
  check(got.info.weightBytes <= maxWeightBytes, `${label}: ${(got.info.weightBytes / 1e9).toFixed(3)} GB of GPU weights <= ${(maxWeightBytes / 1e9).toFixed(1)} GB`);
  check(got.memory <= 256 * MIB, `${label}: wasm memory ${(got.memory / MIB).toFixed(0)} MiB <= 256 MiB`);
  check(finite, `${label}: every logit is finite`);
  check(worst <= tol, `${label}: a ${prompt}-token prefill and ${steps} decode steps on the GPU give the CPU reference's logits: max |diff| ${worst.toExponential(2)} <= ${tol}`);
  if (vision) {
    // Every weight byte the server sent, against the files' bytes less the tower's.
    const tower = JSON.parse(readFileSync(`${dir}/vision.json`, 'utf8'));
    const files = Object.values(JSON.parse(readFileSync(`${dir}/model.safetensors.index.json`, 'utf8')).weight_map);
    const total = [...new Set(files)].reduce((n, f) => n + statSync(`${dir}/${f}`).size, 0);
    const sent = weightBytesSent(vision.server, `/big/${name}/`) - sentBefore;
    // The tower's bytes in each answer, tensor by tensor (as [first, end) of its file).
    let towerSent = 0;
    let towerTotal = 0;
    for (const f of new Set(files)) {
      const spans = towerSpans(`${dir}/${f}`);
      towerTotal += spans.reduce((n, [a, b]) => n + b - a, 0);
      towerSent += bytesIn(answered(vision.server, `/big/${name}/${f}`, logBefore), spans);
    }
    check(tower.tower_bytes > 0 && towerTotal === tower.tower_bytes && towerSent === 0,
      `${label}: ${towerSent} of the vision tower's ${towerTotal} bytes (${tower.tower_tensors} tensors) sent; ${(sent / 1e9).toFixed(3)} GB of the weight files' ${(total / 1e9).toFixed(3)} GB`);
  }
}

/**
 * Qwen3.5-0.8B's shape with a vision tower in its files, q4 (written with --q4-grid, so q4
 * computes what the CPU reference computes from the file): the tower's bytes are never sent.
 */
function bigQwen(page, server, base) {
  return bigAgainstCpu(page, base, { label: 'Qwen3.5-0.8B-shaped (q4, a vision tower in the files)', shape: 'qwen3.5-0.8b', extra: ['--q4-grid'], shards: 2, weights: 'q4', prompt: 300, steps: 4, tol: 1e-4, vision: { server } });
}

/** Granite-4.0-H-1B's shape (2.9 GB in 4 shards), f16 weights, crossing forward chunks and key/value pages. */
function bigHybrid(page, base) {
  return bigAgainstCpu(page, base, { label: 'Granite-4.0-H-1B-shaped', shape: 'granite-h-1b', shards: 4, weights: 'f16', prompt: 600, steps: 8, tol: 1e-4 });
}

/**
 * mamba-2.8b's shape (5.6 GB in 6 shards) in q4: 1.6 GB of GPU weights at most. Written with
 * --q4-grid (every matrix on the values q4 — or int8, for dt_proj's 160 columns — stores
 * exactly), so q4 computes what the CPU reference computes from the file.
 */
function bigQ4(page, base) {
  return bigAgainstCpu(page, base, { label: 'mamba-2.8b-shaped (q4)', shape: '2.8b', extra: ['--q4-grid'], shards: 6, weights: 'q4', prompt: 32, steps: 1, tol: 1e-4, maxWeightBytes: 1.6e9 });
}

if (!existsSync(`${process.env.WEBMAMBA_PKG ?? 'www/pkg'}/webmamba.js`)) throw new Error('run `npm run build:demo` first');
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
  { mounts: { '/pkg/': process.env.WEBMAMBA_PKG ?? 'www/pkg', '/fixtures/': 'tests/fixtures', '/spa/': 'tests/fixtures',
    '/norange/': 'tests/fixtures', '/big/': 'target/browser-test' },
  redirect: hub, htmlFallback: '/spa/', ignoreRange: '/norange/' });
const base = `http://127.0.0.1:${server.address().port}`;
try {
  await runEngines('loading', base, async ({ engine, page, webgpu, check: engineCheck }) => {
    check = engineCheck;
    if (ONLY_BIG_HYBRID || ONLY_BIG_Q4 || ONLY_HASH_COST || ONLY_BIG_QWEN) {
      if (engine === 'chromium' && ONLY_BIG_HYBRID) await bigHybrid(page, base);
      if (engine === 'chromium' && ONLY_BIG_Q4) await bigQ4(page, base);
      if (engine === 'chromium' && ONLY_BIG_QWEN) await bigQwen(page, server, base);
      if (engine === 'chromium' && ONLY_HASH_COST) await hashCost(page, `${base}/big/mamba-790m-bf16/`, bigDir(), check);
      return { worker: true, cache: 'not checked (--only-big-*)' };
    }
    await fixtures(page, base, webgpu);
    await parts(page, server, base);
    const survives = await cache(page, server, base);
    await otherRealm(page, base);
    await errors(page, base, `${base}/big/mamba-2.8b-zeros/`, webgpu);
    if (BIG && engine === 'chromium') await big(page, server, base);
    if (HASH_COST && engine === 'chromium') await hashCost(page, `${base}/big/mamba-790m-bf16/`, bigDir(), check);
    else if (!BIG) console.log('loading: the 790M-shaped load is opt-in: WEBMAMBA_BIG=1 node tests/browser/loading.mjs');
    if (BIG_HYBRID && engine === 'chromium') await bigHybrid(page, base);
    else if (!BIG_HYBRID) console.log('loading: the Granite-4.0-H-1B-shaped load is opt-in: WEBMAMBA_BIG_HYBRID=1 node tests/browser/loading.mjs');
    if (BIG_Q4 && engine === 'chromium') await bigQ4(page, base);
    else if (!BIG_Q4) console.log('loading: the mamba-2.8b-shaped q4 load is opt-in: WEBMAMBA_BIG_Q4=1 node tests/browser/loading.mjs');
    if (BIG_QWEN && engine === 'chromium') await bigQwen(page, server, base);
    else if (!BIG_QWEN) console.log('loading: the Qwen3.5-0.8B-shaped load with a vision tower is opt-in: WEBMAMBA_BIG_QWEN=1 node tests/browser/loading.mjs');
    return { worker: true, cache: survives ? 'yes' : 'yes, within a page (the test browser keeps no Cache API entries across a reload)' };
  });
} finally {
  server.close();
}
