#!/usr/bin/env node
// The CPU backend on wasm threads (load option `threads`) in every browser engine. The server
// sends COOP/COEP (cross-origin isolation) except under /plain/. Checked on each engine, with
// the CPU backend in worker mode:
//   - in the isolated page, `threads: 2` runs on 2 threads (info.threads) and the default on
//     one per core (where the engine can post shared memory to a worker; WebKitGTK cannot, and
//     there the threaded build must fall back to one thread, with a warning); the greedy tokens and the logits after a 300-token prompt (the embedded
//     model) and after a hybrid's prompt (a Granite-4.0-H fixture: attention and experts) are
//     bitwise those of `threads: 1` and of the model in the page (the plain build, one thread);
//   - the same page's in-page model asked for 2 threads runs on one, with a warning saying why;
//     and so does a worker in a page that is not cross-origin isolated (/plain/);
//   - a `threads` that is not a whole number from 1 to 256 is a typed InvalidInput error;
//   - in Chromium and Firefox the page and every worker run the relaxed-SIMD modules
//     (info.simd 'relaxed'), so the bitwise comparisons above are between relaxed modules.
// The prefill speed at 1 and 2 threads is printed (a figure, not a check: benchmarks live in
// docs/BENCHMARKS.md).
import { serve } from '../../scripts/serve.mjs';
import { runEngines } from './harness.mjs';

const MODEL = '/models/shakespeare-mamba-3m/';
const HYBRID = '/fixtures/granite-h-rope-moe-f32/';

/** In a page: loads `url` on the CPU with `options`, reads `prompt` (text, or ids), generates
 *  greedily; its info, tokens, last logits (as a string of their bits) and prefill speed. */
async function run(page, url, prompt, options) {
  return page.evaluate(async ({ url, prompt, options }) => {
    const { Model } = window.webmamba;
    const plain = (v) => (typeof v?.toJSON === 'function' ? v.toJSON() : v);
    try {
      const model = await Model.fromUrl(url, { backend: 'cpu', cache: false, ...options });
      const s = model.newSession();
      const ids = typeof prompt === 'string' ? Array.from(await model.encode(prompt)) : prompt;
      const t0 = performance.now();
      await s.appendTokens(Uint32Array.from(ids));
      const seconds = (performance.now() - t0) / 1000;
      const logits = await s.logits();
      const bits = Array.from(new Uint32Array(logits.buffer, logits.byteOffset, logits.length), (b) => b.toString(16)).join('');
      const tokens = Array.from(await s.generate({ maxTokens: 12 })).join(',');
      const info = plain(model.info);
      await model.free?.();
      return { threads: info.threads, simd: info.simd, warnings: info.warnings, tokens, bits, n: ids.length, tokS: ids.length / seconds };
    } catch (e) {
      return { error: `${e?.name}/${e?.code}: ${e?.message}` };
    }
  }, { url, prompt, options });
}

/** Navigates the harness's page to `url` and waits for the package (window.ready). */
async function goto(page, url) {
  if (page.playwright) await page.playwright.goto(url);
  else await page.driver.get(url);
  // a WebDriver command may run before the new document's module script has
  for (let i = 0; i < 600; i += 1) {
    if (await page.evaluate(async () => (window.ready ? (await window.ready) === true : false)).catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url}: the package did not start`);
}

const server = await serve('tests/browser', 0, {
  mounts: { '/plain/': 'tests/browser', '/pkg/': process.env.WEBMAMBA_PKG ?? 'www/pkg', '/models/': 'www/models', '/fixtures/': 'tests/fixtures' },
  isolated: (path) => !path.startsWith('/plain/'),
});
const base = `http://127.0.0.1:${server.address().port}`;

try {
  await runEngines('threads', base, async ({ engine, page, check }) => {
    const [isolated, cores] = await page.evaluate(() => [self.crossOriginIsolated, navigator.hardwareConcurrency]);
    check(isolated === true, `the page is cross-origin isolated (COOP/COEP): ${isolated}`);
    // Wasm threads need a shared WebAssembly.Memory posted to a worker: WebKitGTK's MiniBrowser
    // refuses to clone one (DataCloneError), so there the threaded build must fall back to one
    // thread with a warning, and the results must still be exact.
    const shares = await page.evaluate(() => new Promise((ok) => {
      try {
        const w = new Worker(URL.createObjectURL(new Blob(['onmessage = () => postMessage(1)'], { type: 'text/javascript' })));
        w.onmessage = () => { w.terminate(); ok(true); };
        w.postMessage(new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true }));
      } catch {
        ok(false);
      }
    }));
    console.log(`threads [${engine}]: a shared WebAssembly.Memory can${shares ? '' : 'not'} be posted to a worker here`);
    const many = (n) => (shares ? n : 1);
    const quiet = (r) => (shares ? r.warnings.length === 0 : r.warnings.some((w) => /threaded build did not start/.test(w)));
    const text = (await page.evaluate(async (m) => (await fetch(`${m}heldout-tempest.txt`)).text(), MODEL)).slice(0, 1200);
    const hybridIds = Array.from({ length: 90 }, (_, i) => (i * 37 + 11) % 300);

    const inPage = await run(page, MODEL, text, { threads: 2 });
    check(inPage.threads === 1 && inPage.warnings.some((w) => /threads: 2 asked for.*one thread.*worker mode/.test(w)),
      `in the page, threads: 2 runs on one thread and says why (${inPage.threads}, ${JSON.stringify(inPage.warnings)})`);
    const one = await run(page, MODEL, text, { worker: true, threads: 1 });
    const two = await run(page, MODEL, text, { worker: true, threads: 2 });
    const all = await run(page, MODEL, text, { worker: true });
    check(!one.error && one.threads === 1 && one.warnings.length === 0, `worker, threads: 1: ${one.threads ?? one.error} thread, no warning`);
    for (const [name, r, want] of [['threads: 2', two, many(2)], ['the default', all, many(Math.min(cores, 256))]]) {
      check(!r.error && r.threads === want && quiet(r),
        `worker, ${name}: ${r.threads ?? r.error} thread(s) (want ${want}), ${shares ? 'no warning' : 'the fallback warned'} ${JSON.stringify(r.warnings ?? [])}`);
    }
    check(two.n >= 250 && two.bits === one.bits && two.bits === inPage.bits && all.bits === one.bits,
      `the logits after ${two.n} tokens are bitwise equal on 1, 2 and ${all.threads} threads and in the page`);
    check(two.tokens === one.tokens && two.tokens === inPage.tokens && all.tokens === one.tokens,
      `the same greedy tokens on every thread count (${two.tokens})`);
    // Chromium (114+) and Firefox (146+) have relaxed SIMD: the page and the workers (plain and
    // threaded builds) must run their relaxed-SIMD modules; WebKit's answer is only logged.
    const simd = { chromium: 'relaxed', firefox: 'relaxed' }[engine] ?? inPage.simd;
    check([inPage, one, two, all].every((r) => r.simd === simd),
      `the page and every worker run the ${simd} module (${[inPage, one, two, all].map((r) => r.simd).join(', ')})`);
    console.log(`threads [${engine}]: prefill of ${two.n} tokens (3M model, worker): 1 thread ${one.tokS.toFixed(0)} tok/s, `
      + `2 threads ${two.tokS.toFixed(0)} tok/s (${(two.tokS / one.tokS).toFixed(2)}x)`);

    const h1 = await run(page, HYBRID, hybridIds, { worker: true, threads: 1 });
    const h2 = await run(page, HYBRID, hybridIds, { worker: true, threads: 2 });
    check(!h2.error && h2.threads === many(2) && h2.bits === h1.bits && h2.tokens === h1.tokens,
      `a Granite-4.0-H hybrid (attention, experts) on 2 threads: bitwise the logits and tokens of 1 (${h2.threads ?? h2.error})`);

    for (const bad of [0, 1.5, 257, 'two', -1]) {
      const r = await run(page, MODEL, 'x', { worker: true, threads: bad });
      check(r.error?.startsWith('WebMambaError/InvalidInput') && r.error.includes('threads'),
        `threads: ${JSON.stringify(bad)} is a typed error (${r.error})`);
    }

    await goto(page, `${base}/plain/loading.html`);
    check(await page.evaluate(() => self.crossOriginIsolated) === false, 'the /plain/ page is not cross-origin isolated');
    const plainWorker = await run(page, MODEL, text, { worker: true, threads: 2 });
    check(plainWorker.threads === 1 && plainWorker.bits === one.bits
      && plainWorker.warnings.some((w) => /threads: 2 asked for.*cross-origin-isolated/.test(w)),
      `a worker of a page that is not isolated runs on one thread, says why, same logits (${plainWorker.threads ?? plainWorker.error})`);
    return { worker: true, threads: two.threads === 2 && h2.threads === 2 ? true : 'no (shared memory cannot be posted to a worker)' };
  });
} finally {
  server.close();
}
