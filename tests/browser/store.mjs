#!/usr/bin/env node
// The persistent state store (load option `store`) in every browser engine, as an origin's
// pages share it: records in the origin private file system (OPFS), written from a worker.
// Checked on each engine (the embedded model; WebGPU where the engine has an adapter, else the
// CPU backend), against uncached runs of fresh models without a store:
//   - page A (worker mode) reads a 2,000-token text and a question; page B, a second page of
//     the same origin, sends the same text and another question: B's append prefills at most
//     its own tokens after the text + one store interval (block size × sparseEvery), and both
//     generate the uncached runs' tokens;
//   - the same across two pages for a hybrid (a Granite-4.0-H fixture): its key/value pages are
//     stored once, by key, and read back with the checkpoint that references them;
//   - page A reloaded: the same text and question prefill 0 (the prompt-end came from the
//     store, with its logits) and generate the same tokens;
//   - a record damaged through OPFS from the page, one cut to half its bytes, another model's
//     record under this model's name (Chromium: the GPU model's record read by the CPU model)
//     and a half-written temporary left behind are each a miss: the turn re-reads and generates
//     the uncached tokens, and the damaged and cut records are gone (replaced by whole ones);
//   - a refused quota (writes made to throw QuotaExceededError, in the page) is a warning in
//     cacheStats().storeWarnings and info.warnings, and the session goes on in memory;
//   - a call returns before its records are written (in the background), flushStore() waits
//     for them; clearStore() empties the folder.
import { serve } from '../../scripts/serve.mjs';
import { runEngines } from './harness.mjs';

const MODEL = '/models/shakespeare-mamba-3m/';
const HYBRID = '/fixtures/granite-h-rope-moe-f32/'; // a Granite-4.0-H fixture (vocabulary 300)
const SPARSE = 4;
const BLOCK = 64;
const TOKENS = 16;

let check;

/** In a page: the text (≥ 2,000 tokens of the held-out play), both questions, and the uncached
 *  greedy tokens after text + each question (a fresh model without a store per run). */
async function references(page, backend) {
  return page.evaluate(async ({ MODEL, backend, TOKENS }) => {
    const { Model } = window.webmamba;
    const play = await (await fetch(`${MODEL}heldout-tempest.txt`)).text();
    const probe = await Model.fromUrl(MODEL, { backend: 'cpu', cache: false });
    let text = '';
    for (const line of play.split('\n')) {
      if (probe.encode(text).length >= 2000) break;
      text += `${line}\n`;
    }
    const questions = ['\nQUESTION: Who rules the island?\nANSWER:', '\nQUESTION: Where is the ship?\nANSWER:',
      '\nQUESTION: Is the quota full?\nANSWER:'];
    const out = { text, questions, textTokens: probe.encode(text).length, want: [], lengths: [] };
    for (const q of questions) {
      out.lengths.push(probe.encode(text + q).length);
      const m = await Model.fromUrl(MODEL, { backend, cache: false });
      const s = m.newSession();
      await s.append(text + q);
      out.want.push(Array.from(await s.generate({ maxTokens: TOKENS })).join(','));
      m.free();
    }
    probe.free();
    return out;
  }, { MODEL, backend, TOKENS });
}

/** In a page: loads the model with the store (worker mode unless `worker` is false), reads
 *  `prompt` in a new session and generates; what it prefilled and the store's counters. */
async function turn(page, { backend, prompt, worker = true, clear = false, before = null }) {
  return page.evaluate(async ({ MODEL, backend, prompt, worker, clear, before, SPARSE, TOKENS }) => {
    const { Model } = window.webmamba;
    const undo = before ? new Function(before)() : null; // eslint-disable-line no-new-func
    try {
      const model = await Model.fromUrl(MODEL, { backend, cache: false, worker, store: { sparseEvery: SPARSE } });
      if (clear) await model.clearStore();
      const s = model.newSession();
      const outcome = await s.append(prompt);
      const tokens = Array.from(await s.generate({ maxTokens: TOKENS })).join(',');
      await model.flushStore(); // the records are written after each call returns
      const stats = await s.stats();
      // In the page these are wasm objects: their fields are getters, which toJSON() reads.
      const plain = (v) => (typeof v?.toJSON === 'function' ? v.toJSON() : v);
      const cache = plain(await model.cacheStats());
      const info = plain(model.info);
      await model.free?.();
      return { prefilled: outcome.prefilled, tokens, storeHits: plain(stats).storeHits, cache, warnings: info.warnings };
    } finally {
      undo?.();
    }
  }, { MODEL, backend, prompt, worker, clear, before, SPARSE, TOKENS });
}

/** In a page: the store's files as [name, size] and its records' headers; with `op`, first
 *  changes the prompt-end record at `position` (of fingerprint `fp` when given): 'damage' (one
 *  byte flipped), 'cut' (half its bytes), 'temp' (removed, half of it left as a temporary), or
 *  'foreign' (overwritten by the prompt-end record with the same key and another fingerprint). */
async function onDisk(page, op = null, position = 0, fp = null) {
  return page.evaluate(async ({ op, position, fp }) => {
    const root = await navigator.storage.getDirectory();
    const d = await root.getDirectoryHandle('webmamba-store', { create: true });
    const files = [];
    for await (const [name, h] of d.entries()) {
      if (h.kind === 'file') files.push([name, new Uint8Array(await (await h.getFile()).arrayBuffer())]);
    }
    const u64 = (b, at) => Number(new DataView(b.buffer, b.byteOffset).getBigUint64(at, true));
    const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
    const meta = ([name, b]) => ({ name, size: b.length, kind: b[12], key: hex(b.subarray(45, 77)), fp: hex(b.subarray(13, 45)), position: u64(b, 77) });
    const all = files.filter(([n]) => n.endsWith('.wmrec')).map(meta);
    const out = { files: files.map(([n, b]) => [n, b.length]), records: all };
    if (!op) return out;
    const target = all.find((r) => r.kind === 0 && r.position === position && (fp === null || r.fp === fp));
    if (!target) return { ...out, error: `no prompt-end record at ${position}` };
    const bytes = files.find(([n]) => n === target.name)[1];
    const put = async (name, b) => {
      const w = await (await d.getFileHandle(name, { create: true })).createWritable();
      await w.write(b);
      await w.close();
    };
    if (op === 'damage') {
      const b = bytes.slice();
      b[Math.floor(b.length / 2)] ^= 0xff;
      await put(target.name, b);
      out.written = hex(b.subarray(b.length - 32));
    } else if (op === 'cut') {
      await put(target.name, bytes.slice(0, bytes.length >> 1));
    } else if (op === 'temp') {
      await d.removeEntry(target.name);
      await put(`${target.name}.crashed-0.tmp`, bytes.slice(0, bytes.length >> 1));
    } else if (op === 'foreign') {
      const other = all.find((r) => r.kind === 0 && r.key === target.key && r.fp !== target.fp);
      if (!other) return { ...out, error: 'no record of the other model with the same key' };
      await put(target.name, files.find(([n]) => n === other.name)[1]);
      out.foreignFp = other.fp;
    }
    out.target = target;
    return out;
  }, { op, position, fp });
}

/** In a page: a hybrid fixture (its attention layers' keys and values go to the store as
 *  pages) reads `ids` in a new session and generates; with `store: false` an uncached run.
 *  Also the store's page records on disk. */
async function hybridTurn(page, ids, store = true) {
  return page.evaluate(async ({ HYBRID, ids, store, SPARSE }) => {
    const { Model } = window.webmamba;
    const o = { backend: 'cpu', cache: false, worker: true };
    if (store) o.store = { sparseEvery: SPARSE };
    const model = await Model.fromUrl(HYBRID, o);
    const s = model.newSession();
    const outcome = await s.appendTokens(ids);
    const tokens = Array.from(await s.generate({ maxTokens: 8 })).join(',');
    await model.flushStore();
    const cache = await model.cacheStats();
    await model.free();
    const d = await (await navigator.storage.getDirectory()).getDirectoryHandle('webmamba-store', { create: true });
    let pages = 0;
    for await (const [name] of d.entries()) if (name.startsWith('page-') && name.endsWith('.wmrec')) pages += 1;
    return { prefilled: outcome.prefilled, tokens, writes: cache.storeWrites, hits: cache.storeHits, pages };
  }, { HYBRID, ids, store, SPARSE });
}

/** A second page of the same origin: another Playwright page in the same profile, or another
 *  WebDriver window. */
async function secondPage(page, base) {
  const wait = async (evaluate) => {
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      if (await evaluate(async () => (window.ready ? (await window.ready) === true : false)).catch(() => false)) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error('the second page did not start the package within 60 s');
  };
  if (page.playwright) {
    const pw = await page.playwright.context().newPage();
    await pw.goto(`${base}/loading.html`);
    const evaluate = (fn, arg) => pw.evaluate(fn, arg);
    await wait(evaluate);
    return { evaluate, close: () => pw.close() };
  }
  const d = page.driver;
  const first = await d.getWindowHandle();
  await d.switchTo().newWindow('tab');
  const second = await d.getWindowHandle();
  await d.get(`${base}/loading.html`);
  const evaluate = async (fn, arg) => {
    await d.switchTo().window(second);
    try {
      return await page.evaluate(fn, arg);
    } finally {
      await d.switchTo().window(first);
    }
  };
  await wait(evaluate);
  return {
    evaluate,
    close: async () => {
      await d.switchTo().window(second);
      await d.close();
      await d.switchTo().window(first);
    },
  };
}

const server = await serve('tests/browser', 0, { mounts: { '/pkg/': process.env.WEBMAMBA_PKG ?? 'www/pkg', '/models/': 'www/models', '/fixtures/': 'tests/fixtures' } });
const base = `http://127.0.0.1:${server.address().port}`;
try {
  await runEngines('store', base, async ({ page, webgpu, check: engineCheck }) => {
    check = engineCheck;
    const backend = webgpu ? 'gpu' : 'cpu';
    const ref = await references(page, backend);
    const [promptA, promptB] = ref.questions.map((q) => ref.text + q);
    const [nA, nB] = ref.lengths;
    check(ref.textTokens >= 2000, `the text is ${ref.textTokens} tokens; the prompts ${nA} and ${nB}`);
    const interval = BLOCK * SPARSE;
    if (!(await page.evaluate(() => typeof navigator.storage?.getDirectory === 'function'))) {
      // No origin private file system (WebKitGTK's MiniBrowser): the store is off, with a warning.
      const t = await turn(page, { backend, prompt: promptA });
      check(t.warnings.some((w) => w.startsWith('state store off')) && !t.cache.store,
        `no origin private file system: the store is off and info.warnings says so (${JSON.stringify(t.warnings)})`);
      check(t.prefilled === nA && t.tokens === ref.want[0], 'and the model works from memory: the uncached run\'s tokens');
      return { store: 'no OPFS', worker: true };
    }

    const a = await turn(page, { backend, prompt: promptA, clear: true });
    check(a.prefilled === nA && a.tokens === ref.want[0], `page A (${backend}, worker) reads all ${nA} tokens and generates the uncached run's tokens`);
    check(a.cache.store && a.cache.storeWrites > 0 && a.cache.storeBytes > 0,
      `page A wrote ${a.cache.storeWrites} records (${a.cache.storeBytes} bytes counted)`);
    const afterA = await onDisk(page);
    check(afterA.records.length === a.cache.storeWrites && afterA.files.every(([n]) => n.endsWith('.wmrec')),
      `the store folder holds ${afterA.records.length} records and no temporaries`);

    // A prefix of B that A's text covers: B reads at most the rest plus one store interval.
    // A hybrid: its key/value pages go to the store once, by key, and come back with the
    // checkpoints that reference them.
    const idsA = Array.from({ length: 300 }, (_, i) => ((i * 37) % 299) + 1);
    const idsB = [...idsA, 5, 6, 7];
    const hA = await hybridTurn(page, idsA);
    const hPageB = await secondPage(page, base);
    const hB = await hybridTurn(hPageB, idsB);
    await hPageB.close();
    const [uA, uB] = [await hybridTurn(page, idsA, false), await hybridTurn(page, idsB, false)];
    check(hA.prefilled === 300 && hA.pages === 4 && hA.tokens === uA.tokens,
      `hybrid, page A: reads 300 tokens, stores its 4 key/value pages, the uncached tokens (${hA.writes} records)`);
    // B writes its two prompt-ends (after its tokens, after generating) and no page again.
    check(hB.prefilled === 303 - 256 && hB.hits === 5 && hB.writes === 2 && hB.pages === 4 && hB.tokens === uB.tokens,
      `hybrid, page B: reads ${hB.prefilled} of 303 tokens, from the checkpoint at 256 and its 4 pages (${hB.hits} records read; ${hB.writes} written, no page again), the uncached tokens`);

    const pageB = await secondPage(page, base);
    const b = await turn(pageB, { backend, prompt: promptB });
    const own = nB - ref.textTokens;
    check(b.prefilled <= own + interval && b.prefilled < nB && b.storeHits === 1,
      `page B reads ${b.prefilled} of its ${nB} tokens (≤ its ${own} after the text + ${interval}), from the store`);
    check(b.tokens === ref.want[1], 'page B generates the uncached run\'s tokens');
    await pageB.close();

    await page.reload();
    const again = await turn(page, { backend, prompt: promptA });
    check(again.prefilled === 0 && again.storeHits === 1 && again.tokens === ref.want[0],
      `page A reloaded: the same prompt prefills ${again.prefilled} and generates the same tokens`);

    // Damaged, cut and half-written records are misses; the turn computes instead.
    for (const op of ['damage', 'cut', 'temp']) {
      const before = await onDisk(page, op, nA);
      const t = await turn(page, { backend, prompt: promptA });
      const after = await onDisk(page);
      const replaced = after.records.find((r) => r.name === before.target?.name);
      check(!before.error && t.prefilled > 0 && t.prefilled <= interval + (nA % BLOCK) && t.tokens === ref.want[0],
        `a ${op} prompt-end record is a miss: the turn re-reads ${t.prefilled} tokens from a block checkpoint and generates the uncached tokens ${before.error ?? ''}`);
      if (op !== 'temp') {
        check(t.cache.storeMisses === 1 && t.cache.storeWarnings.some((w) => w.includes('removed')) && replaced?.size === before.target.size,
          `the ${op} record was removed (a warning says so) and a whole one written in its place`);
      } else {
        check(t.cache.storeMisses === 0 && after.files.some(([n]) => n.endsWith('.crashed-0.tmp')),
          'the temporary is never read (no miss) and stays until it is stale');
      }
    }

    let foreign = 'no';
    if (webgpu) {
      // Another runtime's record (the GPU model's: another store fingerprint) under the CPU
      // model's name for the same key.
      const gpuFps = new Set((await onDisk(page)).records.map((r) => r.fp));
      const cpu = await turn(page, { backend: 'cpu', prompt: promptB });
      const cpuFp = (await onDisk(page)).records.find((r) => !gpuFps.has(r.fp))?.fp ?? null;
      const swapped = await onDisk(page, 'foreign', nB, cpuFp);
      const t = await turn(page, { backend: 'cpu', prompt: promptB });
      check(cpu.prefilled === nB && cpuFp !== null && !swapped.error && swapped.foreignFp !== cpuFp,
        `the CPU model reads all ${nB} tokens (the GPU model's records are not its own) ${swapped.error ?? ''}`);
      check(t.prefilled > 0 && t.prefilled <= interval + (nB % BLOCK) && t.tokens === cpu.tokens && t.cache.storeMisses === 1,
        `another model's record under its name is a miss: re-reads ${t.prefilled} tokens, the uncached tokens, removed`);
      foreign = 'yes';
    }

    const q = await turn(page, {
      backend,
      prompt: ref.text + ref.questions[2],
      worker: false,
      before: `const W = globalThis.FileSystemWritableFileStream?.prototype; if (!W) return null;
        const write = W.write; W.write = function () { return Promise.reject(new DOMException('simulated', 'QuotaExceededError')); };
        return () => { W.write = write; };`,
    });
    check(q.cache.storeWarnings.some((w) => w.includes('QuotaExceededError')) && q.warnings.some((w) => w.includes('QuotaExceededError')),
      `a refused quota is a warning (${JSON.stringify(q.cache.storeWarnings.at(-1))})`);
    check(q.prefilled > 0 && q.tokens === ref.want[2], 'and the session goes on in memory: the uncached run\'s tokens');

    // The records are written after the call returns: none yet when append resolves.
    const background = await page.evaluate(async ({ MODEL, text }) => {
      const m = await window.webmamba.Model.fromUrl(MODEL, { backend: 'cpu', cache: false, store: true });
      const s = m.newSession();
      await s.append(`${text}\nQUESTION: When?\nANSWER:`);
      const atReturn = m.cacheStats().storeWrites;
      await m.flushStore();
      const flushed = m.cacheStats().storeWrites;
      m.free();
      return { atReturn, flushed };
    }, { MODEL, text: ref.text });
    check(background.atReturn === 0 && background.flushed > 0,
      `a call returns before its records are written (${background.atReturn} written then, ${background.flushed} after flushStore())`);

    const cleared = await page.evaluate(async ({ MODEL }) => {
      const m = await window.webmamba.Model.fromUrl(MODEL, { backend: 'cpu', cache: false, store: true });
      const n = await m.clearStore();
      const left = (await m.cacheStats()).storeBytes;
      m.free();
      return { n, left };
    }, { MODEL });
    const empty = await onDisk(page);
    check(cleared.n > 0 && empty.files.length === 0 && cleared.left === 0, `clearStore() removed ${cleared.n} files: the folder is empty`);
    return { store: true, worker: true, foreign };
  });
} finally {
  server.close();
}
