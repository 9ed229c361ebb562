#!/usr/bin/env node
// End-to-end check of what a user sees: serves www/ (after `npm run build:demo`), opens it in
// headless Chromium (playwright-core, Debian's /usr/bin/chromium), and checks that
//   1. with WebGPU the embedded model loads on the GPU, greedy generation from "Once upon a
//      time" gives exactly HF transformers' greedy tokens (www/models/*/hf_reference.json), and
//      Regenerate resumes from the prompt-end checkpoint (0 tokens re-read) with the same text;
//   2. without WebGPU (no --enable-unsafe-webgpu) the page says so, falls back to the CPU, and
//      still gives HF's tokens;
//   3. the page loads the model with Model.fromUrl (a progress bar), and after a reload from the
//      offline cache (the server sends no weight bytes).
// Screenshots: target/demo.png, target/demo-no-webgpu.png.
import { mkdir, readFile } from 'node:fs/promises';
import { chromium } from 'playwright-core';
import { serve } from './serve.mjs';

const BASE_ARGS = ['--no-sandbox', '--disable-background-networking', '--disable-component-update',
  '--disable-sync', '--disable-quic', '--no-first-run'];
const reference = JSON.parse(await readFile('www/models/shakespeare-mamba-3m/hf_reference.json', 'utf8'));
const EOS = 0;

function check(cond, message) {
  if (!cond) { console.error(`demo-smoke: FAIL: ${message}`); process.exitCode = 1; }
  else console.log(`demo-smoke: ok: ${message}`);
}

async function waitFor(page, states) {
  await page.waitForFunction((s) => s.includes(document.body.dataset.state), states, { timeout: 120_000 });
  return page.evaluate(() => ({ state: document.body.dataset.state, status: document.getElementById('status').textContent }));
}

/** Greedy generation of `n` tokens; returns the generated ids and the prompt outcome. */
async function generate(page, button, n) {
  await page.fill('#temperature', '0');
  await page.fill('#max-tokens', String(n));
  await page.click(button);
  const end = await waitFor(page, ['done', 'error']);
  return page.evaluate((end) => ({
    end,
    tokens: (document.getElementById('output').dataset.tokens || '').split(' ').filter(Boolean).map(Number),
    text: document.getElementById('output').textContent,
    prefilled: document.getElementById('outcome').dataset.prefilled,
    resumedFrom: document.getElementById('outcome').dataset.resumedFrom,
  }), end);
}

function matchesHf(tokens, n, label) {
  const want = reference.greedy_ids.slice(0, tokens.length);
  const stoppedAtEos = tokens.length < n && reference.greedy_ids[tokens.length] === EOS;
  check(tokens.length > 0 && JSON.stringify(tokens) === JSON.stringify(want) && (tokens.length === n || stoppedAtEos),
    `${label}: ${tokens.length} greedy tokens equal HF transformers' (${JSON.stringify(tokens.slice(0, 8))}…)`);
}

async function visit(url, args, screenshot, expectBackend) {
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: [...BASE_ARGS, ...args] });
  try {
    const page = await browser.newPage({ viewport: { width: 900, height: 1100 } });
    const pageErrors = [];
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    const ready = await (async () => { await page.goto(url); return waitFor(page, ['ready', 'error']); })();
    check(ready.state === 'ready', `${expectBackend}: page ready: ${ready.status}`);
    const backend = await page.evaluate(() => document.body.dataset.backend);
    check(backend === expectBackend, `model runs on the ${backend}`);
    const n = 24;
    const first = await generate(page, '#generate', n);
    check(first.end.state === 'done', `generate finished: ${first.end.status}`);
    matchesHf(first.tokens, n, `${backend} generate`);
    check(first.prefilled === String(reference.prompt_ids.length) && first.resumedFrom === '',
      `the first prompt is read whole (${first.prefilled} tokens, no checkpoint yet)`);
    const again = await generate(page, '#regenerate', n);
    check(JSON.stringify(again.tokens) === JSON.stringify(first.tokens), `${backend} regenerate gives the same tokens`);
    check(again.prefilled === '0' && again.resumedFrom === String(reference.prompt_ids.length),
      `regenerate resumes from the prompt-end checkpoint (prefilled ${again.prefilled}, from ${again.resumedFrom})`);
    console.log(`demo-smoke: ${backend} text: ${JSON.stringify(first.text)}`);
    // The JS API's error paths: typed, catchable, and the session survives them.
    const api = await page.evaluate(async () => {
      const codeOf = (p) => p.then(() => 'resolved', (e) => `${e.name}:${e.code}`);
      const s = window.demo.model.newSession();
      const first = s.append('To be, or not to be');
      const concurrent = await codeOf(s.append('that is'));
      await first;
      const corrupt = await codeOf(s.importState(new Uint8Array([1, 2, 3])));
      const saved = await s.exportState();
      const damaged = saved.slice(); damaged[100] ^= 1;
      const damagedCode = await codeOf(s.importState(damaged));
      const after = await s.append(' the question');
      const t = s.text();
      s.close();
      return { concurrent, corrupt, damagedCode, prefilledAfter: after.prefilled, text: t };
    });
    check(api.concurrent === 'WebMambaError:Busy', `a concurrent call is a typed Busy error (${api.concurrent})`);
    check(api.corrupt === 'WebMambaError:CorruptState' && api.damagedCode === 'WebMambaError:CorruptState',
      `bad state bytes are CorruptState errors (${api.corrupt}, ${api.damagedCode})`);
    check(api.text === 'To be, or not to be the question' && api.prefilledAfter > 0,
      `the session survives failed calls: ${JSON.stringify(api.text)}`);
    await page.screenshot({ path: screenshot, fullPage: true });
    // The model came through Model.fromUrl with a progress bar; a reload reads it from the
    // offline cache: no weight bytes from the server.
    const weights = '/models/shakespeare-mamba-3m/model.safetensors';
    const before = server.sent.get(weights) ?? 0;
    await page.reload();
    const reloaded = await waitFor(page, ['ready', 'error']);
    const progress = await page.evaluate(() => document.getElementById('progress').value);
    check(reloaded.state === 'ready' && before > 0 && (server.sent.get(weights) ?? 0) === before && progress === 1,
      `after a reload the model loads from the offline cache (${(server.sent.get(weights) ?? 0) - before} more weight bytes; progress bar at ${progress})`);
    check(pageErrors.length === 0, `no uncaught page errors ${JSON.stringify(pageErrors)}`);
    return ready;
  } finally {
    await browser.close();
  }
}

await mkdir('target', { recursive: true });
const server = await serve('www', 0);
const url = `http://127.0.0.1:${server.address().port}/`;
try {
  await visit(url, ['--enable-unsafe-webgpu'], 'target/demo.png', 'gpu');
  const off = await visit(url, [], 'target/demo-no-webgpu.png', 'cpu');
  check(off.status.includes('WebGPU is not available in this browser'), `without WebGPU the page says so: ${off.status}`);
} finally {
  server.close();
}
