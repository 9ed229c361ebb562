#!/usr/bin/env node
// GGUF files through every browser loader, in every engine (Chromium, Firefox, WebKit:
// engines.mjs), through the npm package (www/pkg) served by scripts/serve.mjs (Range, HEAD,
// ETag; it logs every request and the bytes it sends). The fixtures are llama.cpp's own:
// tests/fixtures/gguf/mamba-tiny-F32.gguf (convert_hf_to_gguf.py) and its split set
// tests/fixtures/gguf-split/mamba-tiny-F32-0000{1,2,3}-of-00003.gguf (llama-gguf-split,
// tools/fixtures/gguf_split.sh), with HF transformers' reference (every position's logits,
// greedy ids); mamba-d256-Q8_0.gguf (llama-quantize) for a quantized file.
//   1. Model.fromUrl('…/mamba-tiny-F32.gguf') on the CPU (in the page and in a worker) and on
//      WebGPU where the engine has it, Model.fromFiles([the .gguf]) and Model.load(null, bytes):
//      logits at every position within 1e-4 of HF, HF's greedy tokens, identical logits on
//      every path of a backend; progress monotone to each file's total; the server sent the
//      file's bytes once (its header's prefix is not asked for again) and wasm memory is small;
//   2. the split set by the URL of its first part and by picking its three files: the single
//      file's logits; each part's bytes sent once; a set with a part missing (by URL, picked)
//      is a typed Io error naming that part;
//   3. a folder laid out like the Hub (`<org>/<name>/resolve/main/`, its tree listing written
//      here with each file's SHA-256 as lfs.oid): `quant: 'q8_0'` loads the Q8_0 file (HF's
//      logits on the dequantized weights within 1e-4), `file:` the split set, a quant with no
//      match or several and no choice at all are InvalidInput listing the candidates, and a
//      listing whose digest does not match the file is Integrity;
//   4. the offline cache: a second fromUrl gets 0 bytes from the server (the whole file was
//      cached from the prefix and the rest), Model.clearCache('…x.gguf') removes it;
//   5. bad calls: `file` with `quant`, a `.gguf` URL with `quant`, a path as `file`, Model.load
//      with a config and GGUF bytes or with null and safetensors bytes: InvalidInput.
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { serve } from '../../scripts/serve.mjs';
import { runEngines } from './harness.mjs';

const GGUF = 'tests/fixtures/gguf';
const SPLIT = [1, 2, 3].map((i) => `mamba-tiny-F32-0000${i}-of-00003.gguf`);
const HUB = 'target/browser-test/gguf-hub';
const REPO = 'test/mamba-GGUF';
let check;

/** HF's outputs for GGUF fixture `stem`: ids, logits (rows), promptIds, greedyIds. */
function reference(stem) {
  const bytes = readFileSync(`${GGUF}/${stem}.reference.safetensors`);
  const len = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + len).toString());
  const data = (key) => {
    const { dtype, data_offsets: [a, b] } = header[key];
    const copy = new Uint8Array(bytes.subarray(8 + len + a, 8 + len + b)).buffer;
    return dtype === 'F32' ? Array.from(new Float32Array(copy)) : Array.from(new Int32Array(copy));
  };
  const ids = data('ids');
  const flat = data('logits');
  const vocab = flat.length / ids.length;
  const logits = ids.map((_, i) => flat.slice(i * vocab, (i + 1) * vocab));
  return { ids, logits, promptIds: data('prompt_ids'), greedyIds: data('greedy_ids') };
}

/** Runs in the page: loads by `how` ('url', 'files', 'bytes'), then the logits after each of
 *  `ids` (one token at a time) and the greedy continuation of `promptIds` (argmax, appended). */
async function probe(page, how, url, options, r) {
  return page.evaluate(async ({ how, url, options, ids, promptIds, greedy }) => {
    const { Model } = window.webmamba;
    const events = [];
    const o = { ...options, onProgress: (e) => events.push(e) };
    try {
      let model;
      if (how === 'url') model = await Model.fromUrl(url, o);
      else if (how === 'files') model = await Model.fromFiles(document.getElementById('files').files, o);
      else model = await Model.load(null, new Uint8Array(await (await fetch(url)).arrayBuffer()), undefined, o);
      const s = model.newSession();
      const logits = [];
      for (const id of ids) {
        await s.appendTokens(new Uint32Array([id]));
        logits.push(Array.from(await s.logits()));
      }
      // Greedy by hand (argmax, appended), and by generate (which needs the file's tokenizer).
      const g = model.newSession();
      await g.appendTokens(new Uint32Array(promptIds));
      const out = [];
      for (let i = 0; i < greedy; i++) {
        const l = await g.logits();
        out.push(l.reduce((best, v, j) => (v > l[best] ? j : best), 0));
        await g.appendTokens(new Uint32Array([out[i]]));
      }
      const h = model.newSession();
      await h.appendTokens(new Uint32Array(promptIds));
      const text = await h.generate({ maxTokens: greedy, stopAtEos: false });
      const generated = Array.from(await h.tokens()).slice(promptIds.length);
      const decoded = await model.decode(new Uint32Array(out));
      const info = model.info;
      model.free();
      return { ok: true, logits, greedy: out, generated, text, decoded, events, backend: info.backend, warnings: info.warnings, memory: window.wasmMemory() };
    } catch (e) {
      return { ok: false, name: e.name, code: e.code, message: String(e.message ?? e), events };
    }
  }, { how, url, options, ids: r.ids, promptIds: r.promptIds, greedy: r.greedyIds.length });
}

const maxDiff = (a, b) => a.reduce((m, row, i) => row.reduce((n, v, j) => Math.max(n, Math.abs(v - b[i][j])), m), 0);
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
/** Body bytes the server sent for `path` since log entry `since`, and the requests' ranges. */
function sent(server, path, since) {
  const got = server.log.slice(since).filter((e) => e.path === path && e.method === 'GET');
  return { bytes: got.reduce((n, e) => n + e.bytes, 0), requests: got.map((e) => e.range ?? 'whole') };
}

/** Checks a load against HF: every position, greedy tokens, progress to every file's total. */
function against(got, r, label, tol = 1e-4) {
  if (!got.ok) {
    check(false, `${label}: ${got.code}: ${got.message}`);
    return false;
  }
  const d = maxDiff(got.logits, r.logits);
  check(d <= tol, `${label} (${got.backend}): logits at ${r.ids.length} positions vs HF max |diff| ${d.toExponential(2)}`);
  check(same(got.greedy, r.greedyIds) && same(got.generated, r.greedyIds) && got.text === got.decoded,
    `${label}: HF's ${r.greedyIds.length} greedy tokens, by argmax and by generate with the file's tokenizer (${JSON.stringify(got.greedy)}: ${JSON.stringify(got.text)})`);
  const last = new Map();
  let monotone = true;
  for (const e of got.events) {
    const key = `${e.phase} ${e.file}`;
    if (last.has(key) && e.loaded < last.get(key).loaded) monotone = false;
    last.set(key, e);
  }
  const files = [...last.values()].filter((e) => e.phase === 'download');
  check(monotone && [...last.values()].every((e) => e.loaded === e.total) && files.length > 0,
    `${label}: progress monotone, every file to its total (${files.map((e) => `${e.file} ${e.total}`).join(', ')})`);
  return true;
}

async function single(page, server, base, webgpu) {
  const r = reference('mamba-tiny-F32');
  const path = '/fixtures/gguf/mamba-tiny-F32.gguf';
  const size = statSync(`${GGUF}/mamba-tiny-F32.gguf`).size;
  await page.setInputFiles('#files', [`${GGUF}/mamba-tiny-F32.gguf`]);
  const runs = {};
  const paths = [['url', 'cpu'], ['url', 'cpu', true], ['files', 'cpu'], ['bytes', 'cpu']];
  if (webgpu) paths.push(['url', 'gpu'], ['files', 'gpu'], ['bytes', 'gpu']);
  for (const [how, backend, worker = false] of paths) {
    const label = `mamba-tiny-F32.gguf ${how}${worker ? ' in a worker' : ''}`;
    const since = server.log.length;
    const got = await probe(page, how, `${base}${path}`, { backend, weights: 'f32', cache: false, worker }, r);
    if (!against(got, r, label)) continue;
    runs[`${label} ${backend}`] = got;
    if (how === 'url') {
      const { bytes, requests } = sent(server, path, since);
      check(bytes >= size && bytes <= size + 16,
        `${label}: ${bytes} bytes sent for the ${size}-byte file (requests ${requests.join(', ')})${worker ? '' : `, wasm memory ${(got.memory / 2 ** 20).toFixed(0)} MiB`}`);
    }
  }
  for (const backend of ['cpu', 'gpu']) {
    const all = Object.entries(runs).filter(([k]) => k.endsWith(` ${backend}`)).map(([, v]) => v.logits);
    if (all.length > 1) check(all.every((l) => maxDiff(l, all[0]) === 0), `${backend}: ${all.length} load paths give identical logits`);
  }
  return runs['mamba-tiny-F32.gguf url cpu']?.logits;
}

async function split(page, server, base, webgpu, want) {
  const r = reference('mamba-tiny-F32');
  const dir = 'tests/fixtures/gguf-split';
  const first = `${base}/fixtures/gguf-split/${SPLIT[0]}`;
  const since = server.log.length;
  for (const backend of webgpu ? ['cpu', 'gpu'] : ['cpu']) {
    const got = await probe(page, 'url', first, { backend, weights: 'f32', cache: false }, r);
    if (against(got, r, 'split set by URL') && backend === 'cpu' && want) {
      check(maxDiff(got.logits, want) === 0, 'split set by URL: the single file\'s logits exactly');
    }
    if (backend === 'cpu') {
      const each = SPLIT.map((f) => [f, sent(server, `/fixtures/gguf-split/${f}`, since).bytes, statSync(`${dir}/${f}`).size]);
      check(each.every(([, b, s]) => b >= s && b <= s + 16), `split set by URL: each part's bytes sent once ${JSON.stringify(each)}`);
    }
  }
  await page.setInputFiles('#files', SPLIT.map((f) => `${dir}/${f}`));
  against(await probe(page, 'files', first, { backend: 'cpu', cache: false }, r), r, 'split set picked');
  // Part 2 missing: by URL (a folder with parts 1 and 3) and picked.
  const gap = 'target/browser-test/gguf-gap';
  rmSync(gap, { recursive: true, force: true });
  mkdirSync(gap, { recursive: true });
  for (const f of [SPLIT[0], SPLIT[2]]) copyFileSync(`${dir}/${f}`, `${gap}/${f}`);
  const missing = await probe(page, 'url', `${base}/big/gguf-gap/${SPLIT[0]}`, { backend: 'cpu', cache: false }, r);
  check(!missing.ok && missing.code === 'Io' && missing.message.includes(SPLIT[1]) && /part 2 of the 3-part split set/.test(missing.message),
    `a split set missing part 2 by URL: ${missing.code}: ${missing.message}`);
  await page.setInputFiles('#files', [SPLIT[0], SPLIT[2]].map((f) => `${dir}/${f}`));
  const unpicked = await probe(page, 'files', '', { backend: 'cpu' }, r);
  check(!unpicked.ok && unpicked.code === 'Io' && unpicked.message.includes(SPLIT[1]),
    `a split set missing part 2 picked: ${unpicked.code}: ${unpicked.message}`);
}

/** A folder laid out like the Hub, with its tree listing (each file's SHA-256 as lfs.oid); a
 *  second whose listing gives the file a wrong digest. */
function writeHub() {
  rmSync(HUB, { recursive: true, force: true });
  const files = [[`${GGUF}/mamba-tiny-F32.gguf`, 'mamba-tiny-F32.gguf'], [`${GGUF}/mamba-d256-Q8_0.gguf`, 'mamba-d256-Q8_0.gguf'],
    ...SPLIT.map((f) => [`tests/fixtures/gguf-split/${f}`, f])];
  for (const [repo, bad] of [[REPO, false], ['test/mamba-BAD', true]]) {
    const dir = `${HUB}/${repo}/resolve/main`;
    mkdirSync(dir, { recursive: true });
    const listing = [{ type: 'file', oid: '0'.repeat(40), size: 10, path: 'README.md' }];
    writeFileSync(`${dir}/README.md`, '# test\n');
    for (const [from, name] of bad ? files.slice(0, 1) : files) {
      const bytes = readFileSync(from);
      copyFileSync(from, `${dir}/${name}`);
      const oid = createHash('sha256').update(bad ? Buffer.concat([bytes, Buffer.from('x')]) : bytes).digest('hex');
      listing.push({ type: 'file', oid: '1'.repeat(40), size: bytes.length, path: name, lfs: { oid, size: bytes.length, pointerSize: 134 } });
    }
    mkdirSync(`${HUB}/api/models/${repo}/tree`, { recursive: true });
    writeFileSync(`${HUB}/api/models/${repo}/tree/main`, JSON.stringify(listing));
  }
}

async function hub(page, server, base, webgpu) {
  const folder = `${base}/${REPO}/resolve/main/`;
  const q8 = reference('mamba-d256-Q8_0');
  const size = statSync(`${GGUF}/mamba-d256-Q8_0.gguf`).size;
  for (const backend of webgpu ? ['cpu', 'gpu'] : ['cpu']) {
    // On the GPU the Q8_0 blocks are computed on as the file stores them.
    const since = server.log.length;
    const got = await probe(page, 'url', folder, { backend, quant: 'q8_0', cache: false }, q8);
    if (!against(got, q8, 'Hub folder, quant "q8_0"') || backend !== 'cpu') continue;
    const { bytes, requests } = sent(server, `/${REPO}/resolve/main/mamba-d256-Q8_0.gguf`, since);
    check(bytes === size, `Hub folder, quant "q8_0": ${bytes} bytes sent for the ${size}-byte file (requests ${requests.join(', ')}), wasm memory ${(got.memory / 2 ** 20).toFixed(0)} MiB`);
  }
  const r = reference('mamba-tiny-F32');
  against(await probe(page, 'url', folder, { backend: 'cpu', file: SPLIT[0], cache: false }, r), r, 'Hub folder, file: the split set (each part checked against the listing)');
  const refused = async (options, url = folder) => probe(page, 'url', url, { backend: 'cpu', cache: false, ...options }, r);
  const none = await refused({ quant: 'Q4_K_M' });
  check(!none.ok && none.code === 'InvalidInput' && none.message.includes('mamba-d256-Q8_0.gguf') && !none.message.includes('00002'),
    `quant "Q4_K_M" with no such file: ${none.code}: ${none.message}`);
  const several = await refused({ quant: 'F32' });
  check(!several.ok && several.code === 'InvalidInput' && several.message.includes('mamba-tiny-F32.gguf') && several.message.includes(SPLIT[0]),
    `quant "F32" matching two: ${several.code}: ${several.message}`);
  const unchosen = await refused({});
  check(!unchosen.ok && unchosen.code === 'InvalidInput' && /choose one with `quant` or `file`/.test(unchosen.message),
    `a Hub folder of GGUF files with no choice: ${unchosen.code}: ${unchosen.message}`);
  const bad = await refused({ file: 'mamba-tiny-F32.gguf' }, `${base}/test/mamba-BAD/resolve/main/`);
  check(!bad.ok && bad.code === 'Integrity', `a file whose listed SHA-256 differs: ${bad.code}: ${bad.message}`);
  const noListing = await refused({ quant: 'F32' }, `${base}/fixtures/gguf/`);
  check(!noListing.ok && noListing.code === 'InvalidInput', `quant on a folder with no listing: ${noListing.code}: ${noListing.message}`);
}

async function cache(page, server, base, want) {
  const url = `${base}/fixtures/gguf/mamba-tiny-F32.gguf`;
  const path = '/fixtures/gguf/mamba-tiny-F32.gguf';
  const r = reference('mamba-tiny-F32');
  await page.evaluate((u) => window.webmamba.Model.clearCache(u), url);
  const t0 = server.log.length;
  const first = await probe(page, 'url', url, { backend: 'cpu' }, r);
  const t1 = server.log.length;
  const second = await probe(page, 'url', url, { backend: 'cpu' }, r);
  const [a, b] = [sent(server, path, t0).bytes - sent(server, path, t1).bytes, sent(server, path, t1).bytes];
  check(first.ok && second.ok && maxDiff(second.logits, want ?? first.logits) === 0 && a > 0 && b === 0,
    `offline cache: the first load got ${a} bytes, the second ${b}, the same logits ${first.message ?? ''}${second.message ?? ''}`);
  const cleared = await page.evaluate((u) => window.webmamba.Model.clearCache(u), url);
  check(cleared === 1, `Model.clearCache of the .gguf URL removed ${cleared} cached file`);
}

async function refusals(page, base) {
  const r = reference('mamba-tiny-F32');
  const url = `${base}/fixtures/gguf/mamba-tiny-F32.gguf`;
  const cases = [
    ['file and quant together', 'url', `${base}/fixtures/gguf/`, { file: 'mamba-tiny-F32.gguf', quant: 'F32' }],
    ['a .gguf URL with quant', 'url', url, { quant: 'F32' }],
    ['a path as file', 'url', `${base}/fixtures/`, { file: 'gguf/mamba-tiny-F32.gguf' }],
    ['Model.load with quant', 'bytes', url, { quant: 'F32' }],
  ];
  for (const [label, how, u, options] of cases) {
    const got = await probe(page, how, u, { backend: 'cpu', cache: false, ...options }, r);
    check(!got.ok && got.code === 'InvalidInput', `${label}: ${got.code}: ${got.message}`);
  }
  const mixed = await page.evaluate(async (base) => {
    const { Model } = window.webmamba;
    const get = async (u) => new Uint8Array(await (await fetch(u)).arrayBuffer());
    const codes = [];
    for (const [config, weights] of [[await get(`${base}/fixtures/tiny-f32/config.json`), await get(`${base}/fixtures/gguf/mamba-tiny-F32.gguf`)],
      [null, await get(`${base}/fixtures/tiny-f32/model.safetensors`)]]) {
      codes.push(await Model.load(config, weights, undefined, { backend: 'cpu' }).then(() => 'loaded', (e) => `${e.code}: ${e.message}`));
    }
    return codes;
  }, base);
  check(mixed.every((c) => c.startsWith('InvalidInput')), `Model.load with a config and GGUF bytes, and with null and safetensors bytes: ${mixed.join(' | ')}`);
}

writeHub();
const server = await serve('tests/browser', 0, {
  mounts: { '/pkg/': process.env.WEBMAMBA_PKG ?? 'www/pkg', '/fixtures/': 'tests/fixtures', '/big/': 'target/browser-test',
    '/test/': `${HUB}/test`, '/api/': `${HUB}/api` },
});
const base = `http://127.0.0.1:${server.address().port}`;
try {
  await runEngines('gguf', base, async ({ page, webgpu, check: engineCheck }) => {
    check = engineCheck;
    const want = await single(page, server, base, webgpu);
    await split(page, server, base, webgpu, want);
    await hub(page, server, base, webgpu);
    await cache(page, server, base, want);
    await refusals(page, base);
    return { gguf: true };
  });
} finally {
  server.close();
}
