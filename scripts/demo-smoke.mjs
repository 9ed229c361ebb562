#!/usr/bin/env node
// The demo's browser test, as a user sees it: serves www/ (after `npm run build:demo`) and
// tests/fixtures/ (as /fixtures/), opens the page in headless Chromium (playwright-core,
// Debian's /usr/bin/chromium) at 1280x800, and checks that
//   1. the progress bar shows while the embedded model loads (Model.fromUrl, Worker mode), then
//      the page is ready with the model in a Web Worker, on WebGPU (SwiftShader) when the
//      browser has it;
//   2. greedy generation from "Once upon a time" gives exactly HF transformers' greedy tokens
//      (www/models/*/hf_reference.json), the speed line reads "… tok/s" and the timeline shows
//      the prompt-end checkpoint; Regenerate resumes from it (0 tokens re-read, ringed on the
//      timeline) with the same text; the JS API's error paths stay typed in Worker mode (Busy: tests/browser/api.mjs);
//   3. after a reload the model comes from the offline cache (no weight bytes from the server),
//      the same text is back, Continue re-reads nothing (`data-prefilled="0"`) and goes on
//      with HF's next greedy tokens, and a next prompt that extends the text reads only its
//      new tokens; after another reload Regenerate reads nothing, from the state store (ringed
//      as the store's on the timeline), the store line shows its bytes and "Clear stored
//      states" empties it;
//   4. at a 390-px-wide phone viewport nothing overflows horizontally (nor at 1280x800);
//   5. a URL with no model shows its error in the page and keeps the loaded model; a fixture
//      model (a Falcon-Mamba) loads by URL through #model-url / #load-url and generates HF's
//      greedy tokens for it (tests/fixtures/falcon-bias-bf16/reference.safetensors), and
//      again from its folder through the folder picker (#model-folder); so does a Mamba-2
//      fixture (mamba2-bias-bf16) by URL;
//   6. without WebGPU (no --enable-unsafe-webgpu) the page says so, falls back to the CPU, and
//      still gives HF's tokens;
// and that no page raised an uncaught error or logged a console error.
// Screenshots: target/demo.png (1280x800), target/demo-phone.png (390x844),
// target/demo-no-webgpu.png.
import { mkdir, readFile } from 'node:fs/promises';
import { chromium } from 'playwright-core';
import { serve } from './serve.mjs';
import { writeChatModel } from '../tests/browser/chat-model.mjs';

const BASE_ARGS = ['--no-sandbox', '--disable-background-networking', '--disable-component-update',
  '--disable-sync', '--disable-quic', '--no-first-run'];
const reference = JSON.parse(await readFile('www/models/shakespeare-mamba-3m/hf_reference.json', 'utf8'));
const fixture = await fixtureReference('falcon-bias-bf16'); // a Falcon-Mamba, by URL
const mamba2 = await fixtureReference('mamba2-bias-bf16'); // a Mamba-2, by URL
const hybrid = await fixtureReference('granite-h-rope-moe-f32'); // a Granite-4.0-H hybrid, by URL
const EOS = 0; // both models' end-of-text id
const N = 24; // tokens per greedy turn (the embedded reference has 48: two turns)

function check(cond, message) {
  if (!cond) { console.error(`demo-smoke: FAIL: ${message}`); process.exitCode = 1; }
  else console.log(`demo-smoke: ok: ${message}`);
}

/** HF's prompt and greedy ids for a fixture (tests/fixtures/NAME/reference.safetensors). */
async function fixtureReference(name) {
  const bytes = await readFile(`tests/fixtures/${name}/reference.safetensors`);
  const len = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + len).toString());
  const ints = (key) => {
    const [a, b] = header[key].data_offsets;
    return Array.from(new Int32Array(new Uint8Array(bytes.subarray(8 + len + a, 8 + len + b)).buffer));
  };
  const meta = JSON.parse(await readFile(`tests/fixtures/${name}/reference.json`, 'utf8'));
  return { prompt: meta.prompt, promptIds: ints('prompt_ids'), greedyIds: ints('greedy_ids'), config: meta.hf_config };
}

async function waitFor(page, states) {
  await page.waitForFunction((s) => s.includes(document.body.dataset.state), states, { timeout: 120_000 });
  return page.evaluate(() => ({ state: document.body.dataset.state, status: document.getElementById('status').textContent }));
}

/** Clicks `button` for a greedy turn of `n` tokens; returns what the page shows after it. */
async function turn(page, button, n) {
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
    speed: document.getElementById('speed').textContent,
    ends: document.querySelectorAll('#timeline .end').length,
    blocks: document.querySelectorAll('#timeline .block').length,
    pages: document.querySelectorAll('#timeline .page').length,
    cacheLine: document.getElementById('cache-line').textContent,
    ringed: document.querySelectorAll('#timeline .from').length,
    timeline: document.getElementById('timeline').getAttribute('aria-label'),
  }), end);
}

/** `tokens` are HF's greedy `want` (or a prefix of it that stopped at the end token). */
function matchesHf(tokens, want, n, label) {
  const same = JSON.stringify(tokens) === JSON.stringify(want.slice(0, tokens.length));
  const stoppedAtEos = tokens.length < n && tokens.at(-1) === EOS; // the end token is kept
  check(tokens.length > 0 && same && (tokens.length === n || stoppedAtEos),
    `${label}: ${tokens.length} greedy tokens equal HF transformers' (${JSON.stringify(tokens.slice(0, 8))}…)`);
}

/** The page's width against the viewport's (a horizontal scrollbar is a layout bug). */
async function checkNoOverflow(page, label) {
  const { scroll, inner } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth }));
  check(scroll <= inner, `${label}: no horizontal overflow (page ${scroll} px wide in a ${inner} px viewport)`);
}

/** The JS API's error paths through the demo's (worker) model: typed, and the session survives. */
async function checkApiErrors(page, backend) {
  const api = await page.evaluate(async () => {
    const codeOf = (p) => p.then(() => 'resolved', (e) => `${e.name}:${e.code}`);
    const s = window.demo.model.newSession();
    await s.append('To be, or not to be');
    const corrupt = await codeOf(s.importState(new Uint8Array([1, 2, 3])));
    const saved = await s.exportState();
    const damaged = saved.slice(); damaged[100] ^= 1;
    const damagedCode = await codeOf(s.importState(damaged));
    const after = await s.append(' the question');
    const t = await s.text();
    s.close();
    return { corrupt, damagedCode, prefilledAfter: after.prefilled, text: t,
      worker: window.demo.model.constructor.name };
  });
  check(api.worker === 'WorkerModel', `${backend}: the model runs in the JS API's Worker mode (${api.worker})`);
  check(api.corrupt === 'WebMambaError:CorruptState' && api.damagedCode === 'WebMambaError:CorruptState',
    `bad state bytes are CorruptState errors (${api.corrupt}, ${api.damagedCode})`);
  check(api.text === 'To be, or not to be the question' && api.prefilledAfter > 0,
    `the session survives failed calls: ${JSON.stringify(api.text)}`);
}

/** Loads the falcon-bias-bf16 fixture through #model-url / #load-url and generates greedily with it. */
async function checkLoadByUrl(page, base) {
  // A folder with no model first: the error is in the page, the loaded model stays usable.
  await page.fill('#model-url', `${base}no-such-model/`);
  await page.click('#load-url');
  const failed = await waitFor(page, ['ready', 'error']);
  const usable = await page.evaluate(() => !document.getElementById('generate').disabled);
  check(failed.state === 'error' && /no-such-model/.test(failed.status) && /\[\w+\]/.test(failed.status) && usable,
    `a URL with no model gives an error in the page and keeps the model: ${failed.status}`);
  await page.fill('#model-url', `${base}fixtures/falcon-bias-bf16/`);
  await page.click('#load-url');
  const loaded = await waitFor(page, ['ready', 'error']);
  const table = await page.evaluate(() => document.getElementById('model').textContent);
  const { hidden_size: d, num_hidden_layers: layers, vocab_size: vocab } = fixture.config;
  check(loaded.state === 'ready' && table.includes(`(Falcon-Mamba): d_model ${d}, ${layers} layers, vocabulary ${vocab}`),
    `a fixture model loads by URL through #model-url/#load-url: ${loaded.status} / ${table.slice(0, 80)}…`);
  const ids = await page.evaluate(async (p) => Array.from(await window.demo.model.encode(p)), fixture.prompt);
  check(JSON.stringify(ids) === JSON.stringify(fixture.promptIds), `its tokenizer reads the prompt as HF's (${ids})`);
  await page.fill('#prompt', fixture.prompt);
  const n = fixture.greedyIds.length;
  const got = await turn(page, '#generate', n);
  matchesHf(got.tokens, fixture.greedyIds, n, 'the fixture loaded by URL');

  // The folder picker (#model-folder, webkitdirectory): the same model from the files.
  await page.setInputFiles('#model-folder', 'tests/fixtures/falcon-bias-bf16');
  const picked = await waitFor(page, ['ready', 'error']);
  const from = await page.evaluate(() => document.getElementById('model').textContent);
  check(picked.state === 'ready' && from.includes('falcon-bias-bf16 (Falcon-Mamba)') && !from.includes('http'),
    `a model folder loads through the folder picker: ${picked.status}`);
  const again = await turn(page, '#generate', n);
  matchesHf(again.tokens, fixture.greedyIds, n, 'the fixture picked as a folder');

  // A Mamba-2 model (the SSD mixer) by URL: named as such, HF's greedy tokens.
  await page.fill('#model-url', `${base}fixtures/mamba2-bias-bf16/`);
  await page.click('#load-url');
  const ssd = await waitFor(page, ['ready', 'error']);
  const ssdTable = await page.evaluate(() => document.getElementById('model').textContent);
  check(ssd.state === 'ready' && ssdTable.includes(`(Mamba-2): d_model ${mamba2.config.hidden_size}`),
    `a Mamba-2 fixture loads by URL: ${ssd.status} / ${ssdTable.slice(0, 80)}…`);
  await page.fill('#prompt', mamba2.prompt);
  const m2 = mamba2.greedyIds.length;
  matchesHf((await turn(page, '#generate', m2)).tokens, mamba2.greedyIds, m2, 'the Mamba-2 fixture');

  // A hybrid (Mamba-2 + attention + experts) by URL: it runs on the GPU backend, with HF's
  // greedy tokens.
  await page.fill('#model-url', `${base}fixtures/granite-h-rope-moe-f32/`);
  await page.click('#load-url');
  const granite = await waitFor(page, ['ready', 'error']);
  const graniteTable = await page.evaluate(() => document.getElementById('model').textContent);
  check(granite.state === 'ready' && graniteTable.includes(`(Granite-4.0-H): d_model ${hybrid.config.hidden_size}`)
    && granite.status.includes('Ready.')
    && await page.evaluate(() => document.body.dataset.backend) === 'gpu',
    `a Granite-4.0-H hybrid fixture loads by URL: ${granite.status} / ${graniteTable.slice(0, 80)}…`);
  await page.fill('#prompt', hybrid.prompt);
  const h = hybrid.greedyIds.length;
  matchesHf((await turn(page, '#generate', h)).tokens, hybrid.greedyIds, h, 'the Granite-4.0-H hybrid fixture');
  // Past a block of history: the timeline shows its key/value pages beside the checkpoints.
  const block = await page.evaluate(() => Number(document.getElementById('model').textContent.match(/a block every (\d+) tokens/)?.[1]));
  const longer = await turn(page, '#continue', block);
  check(longer.end.state === 'done' && longer.pages >= 1 && longer.blocks >= 1 && /key\/value pages: /.test(longer.cacheLine)
    && /key\/value page\(s\)/.test(longer.timeline) && await page.evaluate(() => !document.getElementById('legend-page').hidden),
    `the hybrid's timeline shows its key/value pages beside the checkpoints (${longer.pages} page(s), ${longer.blocks} block mark(s); ${longer.cacheLine})`);
  await page.screenshot({ path: 'target/demo-hybrid.png', fullPage: true });

  // A model with a chat template: the chat view shows; two messages, each reply under its
  // message with the counts of its turn — the second reads only its own tokens.
  check(await page.evaluate(() => document.getElementById('chat-view').hidden), 'no chat view for a model without a chat template');
  await page.fill('#model-url', `${base}chat-model/`);
  await page.click('#load-url');
  const chatty = await waitFor(page, ['ready', 'error']);
  check(chatty.state === 'ready' && await page.evaluate(() => !document.getElementById('chat-view').hidden && document.body.dataset.chat === 'yes'),
    `a model with a chat template shows the chat view: ${chatty.status}`);
  const replies = [];
  for (const [k, text] of ['Good morrow.', 'What news?'].entries()) {
    await page.fill('#chat-input', text);
    await page.click('#chat-send');
    await page.waitForFunction((n) => document.querySelectorAll('.bubble.assistant[data-prefilled]').length === n, k + 1, { timeout: 120_000 });
    replies.push(await page.evaluate(() => {
      const b = [...document.querySelectorAll('.bubble.assistant')].at(-1);
      return { prefilled: Number(b.dataset.prefilled), prompt: Number(b.dataset.promptTokens), text: b.querySelector('.text').textContent, meta: b.querySelector('.meta').textContent };
    }));
  }
  check(replies[0].prefilled === replies[0].prompt && replies[1].prefilled < replies[1].prompt - replies[0].prompt
    && replies.every((r) => r.text.length > 0 && /^read \d+ of \d+ prompt tokens/.test(r.meta)),
    `two chat turns: ${replies.map((r) => `"${r.meta}"`).join(', ')}`);
  await page.screenshot({ path: 'target/demo-chat.png', fullPage: true });
}

async function visit(base, { args, backend, screenshot, full }) {
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: [...BASE_ARGS, ...args] });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const errors = [];
    page.on('pageerror', (e) => errors.push(`uncaught: ${e}`));
    // A model folder's optional files (tokenizer_config.json, chat_template.jinja,
    // generation_config.json) are asked for; a folder without them answers 404, which Chromium
    // logs: those are expected, any other console error is not.
    const optional = /\/(tokenizer_config\.json|chat_template\.jinja|generation_config\.json|model\.safetensors\.index\.json)$/;
    page.on('console', (m) => m.type() === 'error' && !(/404/.test(m.text()) && optional.test(m.location().url))
      && errors.push(`console: ${m.text()} ${m.location().url}`));
    // Every value the progress bar takes while it is on screen.
    await page.addInitScript(() => document.addEventListener('DOMContentLoaded', () => {
      const bar = document.getElementById('progress');
      window.progressSeen = [];
      new MutationObserver(() => getComputedStyle(bar).display !== 'none' && window.progressSeen.push(bar.value))
        .observe(bar, { attributes: true, attributeFilter: ['value'] });
    }));
    await page.goto(base);
    const ready = await waitFor(page, ['ready', 'error']);
    check(ready.state === 'ready', `${backend}: page ready: ${ready.status}`);
    const seen = await page.evaluate(() => window.progressSeen);
    check(seen.some((v) => v > 0 && v < 1) && seen.at(-1) === 1,
      `the progress bar showed the load (${seen.length} values, ${seen.slice(0, 4).map((v) => v.toFixed(2))}… ${seen.at(-1)})`);
    check(await page.evaluate(() => document.body.dataset.backend) === backend, `model runs on the ${backend}`);
    // `npm start`'s server sends COOP/COEP: the CPU backend runs on wasm threads, every core
    const threads = await page.evaluate(() => [self.crossOriginIsolated, navigator.hardwareConcurrency,
      window.demo.model.info.threads, document.getElementById('model').textContent]);
    check(threads[0] === true, 'the demo page is cross-origin isolated');
    if (backend === 'cpu') {
      check(threads[2] === Math.min(threads[1], 256) && threads[2] > 1 && threads[3].includes(`${threads[2]} threads`),
        `the CPU runs on wasm threads, one per core (${threads[2]} of ${threads[1]}; the table says so)`);
    }

    const first = await turn(page, '#generate', N);
    check(first.end.state === 'done', `generate finished: ${first.end.status}`);
    matchesHf(first.tokens, reference.greedy_ids, N, `${backend} generate`);
    check(first.prefilled === String(reference.prompt_ids.length) && first.resumedFrom === '',
      `the first prompt is read whole (${first.prefilled} tokens, no checkpoint yet)`);
    check(/prefill [\d.]+ tok\/s .*first token after .*decode [\d.]+ tok\/s/.test(first.speed), `speed line: ${first.speed}`);
    check(first.ends >= 1, `the timeline marks the prompt-end checkpoint (${first.timeline})`);
    const again = await turn(page, '#regenerate', N);
    check(JSON.stringify(again.tokens) === JSON.stringify(first.tokens), `${backend} regenerate gives the same tokens`);
    check(again.prefilled === '0' && again.resumedFrom === String(reference.prompt_ids.length) && again.ringed === 1,
      `regenerate resumes from the prompt-end checkpoint (prefilled ${again.prefilled}, from ${again.resumedFrom}, ringed ${again.ringed})`);
    console.log(`demo-smoke: ${backend} text: ${JSON.stringify(first.text)}`);
    await checkApiErrors(page, backend);
    await checkNoOverflow(page, `${backend} at 1280x800`);
    await page.screenshot({ path: screenshot, fullPage: true });
    if (full) await reloadAndMore(page, again);
    check(errors.length === 0, `${backend}: no uncaught page errors or console errors ${JSON.stringify(errors)}`);
    return ready;
  } finally {
    await browser.close();
  }
}

/** 3–5 above, after a first visit that ended with `again`. */
async function reloadAndMore(page, again) {
  // A reload: the model from the offline cache, the conversation from the saved session.
  const weights = '/models/shakespeare-mamba-3m/model.safetensors';
  const before = server.sent.get(weights) ?? 0;
  await page.reload();
  const reloaded = await waitFor(page, ['ready', 'error']);
  check(reloaded.state === 'ready' && before > 0 && (server.sent.get(weights) ?? 0) === before,
    `after a reload the model loads from the offline cache (${(server.sent.get(weights) ?? 0) - before} more weight bytes): ${reloaded.status}`);
  const restored = await page.evaluate(() => ({
    text: document.getElementById('output').textContent, prompt: document.getElementById('prompt').value }));
  check(restored.text === again.text && restored.prompt === reference.prompt,
    `the same text is back after the reload (${JSON.stringify(restored.text.slice(0, 40))}…)`);
  const more = await turn(page, '#continue', N);
  check(more.prefilled === '0', `Continue after the reload re-reads nothing (data-prefilled="${more.prefilled}", from ${more.resumedFrom})`);
  matchesHf(more.tokens, reference.greedy_ids, 2 * N, 'generate, reload, continue');
  // The next prompt, the whole text and more: only the new tokens are read.
  const extended = `${more.text} And then`;
  const expect = await page.evaluate(async (t) => {
    const ids = Array.from(await window.demo.model.encode(t));
    const history = Array.from(await window.demo.session.tokens());
    let common = 0;
    while (common < history.length && ids[common] === history[common]) common += 1;
    return { ids: ids.length, history: history.length, common };
  }, extended);
  await page.fill('#prompt', extended);
  const next = await turn(page, '#generate', 4);
  check(expect.common === expect.history && next.prefilled === String(expect.ids - expect.history)
    && next.resumedFrom === String(expect.history),
    `the next prompt after the reload reads only its new tokens (prefilled ${next.prefilled} of ${expect.ids}, from ${next.resumedFrom})`);

  // The state store: after another reload the memory cache is empty, and Regenerate finds the
  // prompt-end in the store; the timeline rings it as the store's; clearing empties it.
  await page.reload();
  await waitFor(page, ['ready', 'error']);
  const stored = await turn(page, '#regenerate', 4);
  const marks = await page.evaluate(() => ({
    fromStore: document.getElementById('outcome').dataset.fromStore,
    ring: document.querySelectorAll('#timeline .from-store').length,
    line: document.getElementById('store-line').textContent,
    bytes: Number(document.getElementById('store-line').dataset.bytes),
  }));
  check(stored.prefilled === '0' && marks.fromStore === 'true' && marks.ring === 1 && JSON.stringify(stored.tokens) === JSON.stringify(next.tokens),
    `after a reload, Regenerate reads nothing: the prompt-end came from the state store, ringed as such, the same tokens (${marks.line})`);
  check(marks.bytes > 0 && /State store \(this browser, all tabs\): [\d.]+ MiB on disk/.test(marks.line), `the store's bytes are shown (${marks.bytes})`);
  await page.click('#clear-store');
  await page.waitForFunction(() => document.getElementById('store-line').dataset.bytes === '0');
  const cleared = await page.evaluate(() => document.getElementById('outcome').textContent);
  check(/Cleared the state store: [1-9]\d* file\(s\) removed/.test(cleared), `"Clear stored states" empties the store (${cleared})`);

  await page.setViewportSize({ width: 390, height: 844 });
  await checkNoOverflow(page, 'a 390-px phone');
  await page.screenshot({ path: 'target/demo-phone.png', fullPage: true });
  await page.setViewportSize({ width: 1280, height: 800 });

  await checkLoadByUrl(page, base);
}

await mkdir('target', { recursive: true });
const server = await serve('www', 0, { mounts: { '/fixtures/': 'tests/fixtures', '/chat-model/': writeChatModel() }, isolated: true });
const base = `http://127.0.0.1:${server.address().port}/`;
try {
  await visit(base, { args: ['--enable-unsafe-webgpu'], backend: 'gpu', screenshot: 'target/demo.png', full: true });
  const off = await visit(base, { args: [], backend: 'cpu', screenshot: 'target/demo-no-webgpu.png', full: false });
  check(off.status.includes('WebGPU is not available in this browser'), `without WebGPU the page says so: ${off.status}`);
} finally {
  server.close();
}
