#!/usr/bin/env node
// The JavaScript API as a page uses it, in headless Chromium through the npm package (www/pkg,
// built by `npm run build:demo`), with the embedded default model, on WebGPU (SwiftShader) and
// on the CPU:
//   - plain-object options; `session.stream()` yields one { text, id } per token and its text
//     adds up to what `generate` returns;
//   - an AbortSignal fired after 8 pieces ends the stream there; `generate` then continues to
//     exactly the tokens of an uninterrupted greedy run (also after `break`, and after a
//     generate rejected with AbortError mid-way);
//   - the same seed with topK/topP/repetitionPenalty gives the same text, another seed other
//     text; stop strings end the text where they begin; a negative temperature is a typed error;
//   - sessions that survive a reload: save → reload → restoreSession → append prefills only the
//     new tokens and generation continues as if the page had never reloaded; another model's
//     session is StateMismatch; a full quota is a Storage error; savedSessions/deleteSession.
import { chromium } from 'playwright-core';
import { serve } from '../../scripts/serve.mjs';
import { ARGS, checker, openTestPage, reload } from './harness.mjs';

const { check, counts } = checker('api');

async function run(page, backend) {
  return page.evaluate(async ({ backend }) => {
    const { Model } = window.webmamba;
    const model = await Model.fromUrl('/models/shakespeare-mamba-3m/', { backend, cache: false });
    const prompt = 'Once upon a time';
    const fresh = async () => { const s = model.newSession(); await s.append(prompt); return s; };
    const after = (s, n) => Array.from(s.tokens()).slice(n);
    const r = { backend: model.info.backend };

    // The uninterrupted greedy run.
    const whole = await fresh();
    const p = whole.tokens().length;
    r.wantText = await whole.generate({ maxTokens: 24, stopAtEos: false });
    const want = after(whole, p);

    // A stream, to the end: one piece per token, the same text and tokens.
    const streamed = await fresh();
    const all = [];
    for await (const piece of streamed.stream({ maxTokens: 24, stopAtEos: false })) all.push(piece);
    r.streamPieces = all.length;
    r.streamText = all.map((x) => x.text).join('');
    r.streamIds = JSON.stringify(all.map((x) => x.id)) === JSON.stringify(want);

    // Aborted after 8 pieces, then generate continues.
    const aborted = await fresh();
    const ac = new AbortController();
    const pieces = [];
    for await (const piece of aborted.stream({ maxTokens: 24, stopAtEos: false, signal: ac.signal })) {
      pieces.push(piece);
      if (pieces.length === 8) ac.abort();
    }
    r.abortedPieces = pieces.length;
    r.abortedHistory = after(aborted, p).length;
    await aborted.generate({ maxTokens: 16, stopAtEos: false });
    r.abortedContinues = JSON.stringify(after(aborted, p)) === JSON.stringify(want);

    // `break` out of a stream, then generate continues.
    const broken = await fresh();
    let n = 0;
    for await (const piece of broken.stream({ maxTokens: 24, stopAtEos: false })) { if (++n === 3) break; }
    await broken.generate({ maxTokens: 21, stopAtEos: false });
    r.breakContinues = JSON.stringify(after(broken, p)) === JSON.stringify(want);

    // generate with a signal fired mid-way rejects with AbortError; generate again continues.
    const interrupted = await fresh();
    const ac2 = new AbortController();
    let seen = 0;
    try {
      await interrupted.generate({ maxTokens: 24, stopAtEos: false, signal: ac2.signal,
        onToken: () => { if (++seen === 5) ac2.abort(); } });
      r.abortError = 'resolved';
    } catch (e) {
      r.abortError = e.name;
    }
    const kept = after(interrupted, p).length;
    await interrupted.generate({ maxTokens: 24 - kept, stopAtEos: false });
    r.interruptedContinues = JSON.stringify(after(interrupted, p)) === JSON.stringify(want);

    // Seeds with top-k / top-p / repetition penalty.
    const sample = async (seed) => (await fresh()).generate({ maxTokens: 40, temperature: 0.9, topK: 20,
      topP: 0.9, repetitionPenalty: 1.2, seed, stopAtEos: false });
    r.seedA = await sample(3);
    r.seedAgain = await sample(3);
    r.seedB = await sample(4);

    // Stop strings: the text ends where the first one begins.
    const stop = r.wantText.slice(12, 15);
    r.stop = stop;
    r.stopped = await (await fresh()).generate({ maxTokens: 24, stopAtEos: false, stop: ['§§', stop] });
    r.stopWant = r.wantText.slice(0, r.wantText.indexOf(stop));

    try { await (await fresh()).generate({ temperature: -1 }); r.negative = 'accepted'; } catch (e) { r.negative = `${e.name}:${e.code}`; }
    return r;
  }, { backend });
}

/** save in one page, restore after a reload. */
async function saved(page) {
  const before = await page.evaluate(async () => {
    const { Model } = window.webmamba;
    const model = await Model.fromUrl('/models/shakespeare-mamba-3m/', { cache: false });
    for (const n of await model.savedSessions()) await model.deleteSession(n);
    const s = model.newSession();
    await s.append('Once upon a time');
    await s.generate({ maxTokens: 6, stopAtEos: false });
    await s.save('chat');
    // What the page would have done without a reload: continue the same session.
    await s.append(' and then');
    await s.generate({ maxTokens: 8, stopAtEos: false });
    const put = IDBObjectStore.prototype.put;
    IDBObjectStore.prototype.put = () => { throw new DOMException('the quota is full (simulated)', 'QuotaExceededError'); };
    let quota;
    try { await s.save('other'); quota = 'accepted'; } catch (e) { quota = `${e.code}: ${e.message}`; } finally { IDBObjectStore.prototype.put = put; }
    return { tokens: Array.from(s.tokens()), names: await model.savedSessions(), quota };
  });
  await reload(page);
  const after = await page.evaluate(async () => {
    const { Model } = window.webmamba;
    const model = await Model.fromUrl('/models/shakespeare-mamba-3m/', { cache: false });
    const r = await model.restoreSession('chat');
    const restored = r.tokens().length;
    const outcome = await r.append(' and then');
    const added = model.encode(' and then').length;
    await r.generate({ maxTokens: 8, stopAtEos: false });
    const code = async (f) => { try { await f(); return 'accepted'; } catch (e) { return e.code; } };
    const other = await Model.fromUrl('/fixtures/tiny-f32/', { cache: false });
    return { tokens: Array.from(r.tokens()), restored, prefilled: outcome.prefilled, added,
      foreign: await code(() => other.restoreSession('chat')), missing: await code(() => model.restoreSession('nope')),
      deleted: await model.deleteSession('chat'), names: await model.savedSessions() };
  });
  check(JSON.stringify(before.names) === '["chat"]', `save: savedSessions() lists ${JSON.stringify(before.names)}`);
  check(/^Storage: .*QuotaExceededError/.test(before.quota), `save into a full quota: ${before.quota}`);
  check(after.prefilled === after.added && after.added > 0,
    `after a reload, restoreSession(${after.restored} tokens) then append prefills only the ${after.added} new tokens (${after.prefilled})`);
  check(JSON.stringify(after.tokens) === JSON.stringify(before.tokens), 'and generation continues as if the page had not reloaded');
  check(after.foreign === 'StateMismatch' && after.missing === 'InvalidInput', `another model's session: ${after.foreign}; a name never saved: ${after.missing}`);
  check(after.deleted === true && after.names.length === 0, 'deleteSession forgets it');
}

const server = await serve('tests/browser', 0,
  { mounts: { '/pkg/': 'www/pkg', '/models/': 'www/models', '/fixtures/': 'tests/fixtures' } });
const base = `http://127.0.0.1:${server.address().port}`;
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ARGS });
try {
  const { page, pageErrors } = await openTestPage(browser, base);
  const seeded = {};
  for (const backend of ['gpu', 'cpu']) {
    const r = await run(page, backend);
    seeded[backend] = r.seedA;
    const b = `${backend} (${r.backend})`;
    check(r.backend === backend, `${b}: runs where asked`);
    check(r.streamPieces === 24 && r.streamIds && r.streamText === r.wantText,
      `${b}: stream yields 24 pieces whose ids and text equal generate's (${JSON.stringify(r.wantText)})`);
    check(r.abortedPieces === 8 && r.abortedHistory === 8, `${b}: an AbortSignal fired after 8 pieces ends the stream there (${r.abortedPieces} pieces, ${r.abortedHistory} tokens fed)`);
    check(r.abortedContinues, `${b}: generate after the abort continues to the uninterrupted run's tokens`);
    check(r.breakContinues, `${b}: generate after a break continues to the uninterrupted run's tokens`);
    check(r.abortError === 'AbortError' && r.interruptedContinues, `${b}: generate aborted mid-way rejects with ${r.abortError}, and continues exactly`);
    check(r.seedA === r.seedAgain && r.seedA !== r.seedB, `${b}: seed 3 twice gives the same text (${JSON.stringify(r.seedA.slice(0, 40))}…), seed 4 another`);
    check(r.stopped === r.stopWant, `${b}: stop ${JSON.stringify(r.stop)} ends the text where it begins (${JSON.stringify(r.stopped)})`);
    check(r.negative === 'WebMambaError:InvalidInput', `${b}: a negative temperature is ${r.negative}`);
  }
  await saved(page);
  check(seeded.gpu === seeded.cpu, 'the same seed gives the same sampled text on WebGPU and on the CPU');
  check(pageErrors.length === 0, `no uncaught page errors ${JSON.stringify(pageErrors)}`);
} finally {
  await browser.close();
  server.close();
}
if (counts.failed) {
  console.error(`api: ${counts.failed} check(s) failed`);
  process.exit(1);
}
console.log('api: all checks passed');
