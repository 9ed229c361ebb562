// What the browser tests share: a check() that counts, and runEngines(), which runs a test body
// once per browser engine (engines.mjs: Chromium, Firefox, WebKit; `--engine=` or
// WEBMAMBA_ENGINES to choose), each in a fresh browser on the test page (loading.html: the npm
// package from /pkg/ as window.webmamba), and prints the checks passed per engine. Each
// script's per-engine results go to target/support/<name>.json, from which
// scripts/support-matrix.mjs checks the README's support matrix.
import { mkdirSync, writeFileSync } from 'node:fs';
import { engines, launch } from './engines.mjs';

export { CHROMIUM_ARGS as ARGS } from './engines.mjs';

/** A check(cond, message) that logs under `name` (every passing check unless `quiet`) and counts. */
export function checker(name, { quiet = false } = {}) {
  const counts = { passed: 0, failed: 0 };
  const check = (cond, message) => {
    if (cond) {
      counts.passed += 1;
      if (!quiet) console.log(`${name}: ok: ${message}`);
    } else {
      counts.failed += 1;
      console.error(`${name}: FAIL: ${message}`);
    }
  };
  return { check, counts };
}

/** Where the page's test code said it was (`window.__step`, set by long sections), for a run
 *  that stopped: " (at: …)", or "" when it said nothing. A page that does not answer in 10 s
 *  (its thread busy) says so. */
async function lastStep(page) {
  if (!page) return '';
  const busy = new Promise((ok) => setTimeout(() => ok('the page did not answer within 10 s'), 10_000).unref());
  const at = await Promise.race([page.evaluate(() => window.__step ?? null).catch(() => null), busy]);
  return at ? ` (at: ${at})` : '';
}

/**
 * Runs `body({ engine, page, webgpu, check })` in each engine, in a fresh browser on
 * `${base}/loading.html`. `webgpu` is true where the engine gives a WebGPU adapter on this
 * machine. What `body` returns (e.g. `{ worker: true, cache: 'yes' }`: what was tested and
 * passed) is kept with the counts. A body that throws fails its engine, not the others. Exits
 * non-zero when any check failed.
 */
export async function runEngines(name, base, body, { quiet = false } = {}) {
  const results = {};
  for (const engine of engines()) {
    const label = `${name} [${engine}]`;
    const { check, counts } = checker(label, { quiet });
    const t0 = Date.now();
    let browser = null;
    let webgpu = false;
    let webgpuNote = '';
    let found = {};
    let page = null;
    try {
      browser = await launch(engine);
      const opened = await browser.open(base);
      page = opened.page;
      const { errors, webgpu: adapter } = opened;
      webgpu = adapter === true;
      webgpuNote = webgpu ? '' : String(adapter);
      console.log(`${label}: ${engine} ${browser.version}, WebGPU: ${webgpu ? 'yes' : `no (${webgpuNote}): the CPU backend only`}`);
      found = (await body({ engine, page, webgpu, check })) ?? {};
      const all = await errors();
      check(all.length === 0, `no uncaught errors or unhandled rejections in the page ${JSON.stringify(all)}`);
    } catch (e) {
      check(false, `the run stopped${await lastStep(page)}: ${e?.stack ?? e}`);
    } finally {
      await browser?.close().catch((e) => console.error(`${label}: closing: ${e}`));
    }
    const seconds = Math.round((Date.now() - t0) / 1000);
    results[engine] = { version: browser?.version ?? '', webgpu, webgpuNote, ...counts, seconds, ...found };
    console.log(`${label}: ${counts.passed} checks passed, ${counts.failed} failed (${seconds} s)`);
  }
  const summary = Object.entries(results).map(([e, r]) => `${e} ${r.passed}${r.failed ? ` (${r.failed} FAILED)` : ''}`);
  console.log(`${name}: checks passed per engine: ${summary.join(' · ')}`);
  mkdirSync('target/support', { recursive: true });
  writeFileSync(`target/support/${name}.json`, `${JSON.stringify(results, null, 2)}\n`);
  const failed = Object.values(results).reduce((n, r) => n + r.failed, 0);
  if (failed) {
    console.error(`${name}: ${failed} check(s) failed`);
    process.exitCode = 1;
  } else {
    console.log(`${name}: all checks passed`);
  }
  return results;
}
