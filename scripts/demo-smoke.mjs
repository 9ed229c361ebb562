#!/usr/bin/env node
// End-to-end check of what a user sees: serves www/ (built by `npm run build:demo`), opens it
// in headless Chromium (playwright-core, Debian's /usr/bin/chromium), and checks that
//   1. with WebGPU enabled the page shows a named adapter and the proof kernel passes;
//   2. with WebGPU disabled (no --enable-unsafe-webgpu) the page shows the typed
//      `NoAdapter` error ("WebGPU is not available in this browser: ...") instead of breaking.
// Screenshots go to target/demo.png and target/demo-no-webgpu.png.
import { mkdir } from 'node:fs/promises';
import { chromium } from 'playwright-core';
import { serve } from './serve.mjs';

const BASE_ARGS = ['--no-sandbox', '--disable-background-networking', '--disable-component-update',
  '--disable-sync', '--disable-quic', '--no-first-run'];

async function visit(url, args, screenshot) {
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: [...BASE_ARGS, ...args] });
  try {
    const page = await browser.newPage({ viewport: { width: 900, height: 900 } });
    const pageErrors = [];
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    await page.goto(url);
    await page.waitForFunction(() => document.body.dataset.state !== 'loading', null, { timeout: 60_000 });
    await page.screenshot({ path: screenshot, fullPage: true });
    return await page.evaluate(() => ({
      state: document.body.dataset.state,
      status: document.getElementById('status').textContent,
      errorCode: document.body.dataset.errorCode ?? '',
      adapter: document.getElementById('adapter').dataset.name ?? '',
      maxError: Number(document.getElementById('proof').dataset.maxError),
    })).then((r) => ({ ...r, pageErrors }));
  } finally {
    await browser.close();
  }
}

function check(cond, message) {
  if (!cond) { console.error(`demo-smoke: FAIL: ${message}`); process.exitCode = 1; }
  else console.log(`demo-smoke: ok: ${message}`);
}

await mkdir('target', { recursive: true });
const server = await serve('www', 0);
const url = `http://127.0.0.1:${server.address().port}/`;
try {
  const on = await visit(url, ['--enable-unsafe-webgpu'], 'target/demo.png');
  console.log(`demo-smoke: with WebGPU: ${JSON.stringify(on)}`);
  check(on.state === 'done', `page finished with state "${on.state}": ${on.status}`);
  check(on.adapter && on.adapter !== '(unnamed adapter)', `adapter is named: "${on.adapter}"`);
  check(on.maxError <= 1e-5, `proof kernel max |GPU - CPU| = ${on.maxError}`);
  check(on.pageErrors.length === 0, `no uncaught page errors ${JSON.stringify(on.pageErrors)}`);

  const off = await visit(url, [], 'target/demo-no-webgpu.png');
  console.log(`demo-smoke: without WebGPU: ${JSON.stringify(off)}`);
  check(off.state === 'error' && off.errorCode === 'NoAdapter', `typed NoAdapter error shown (code "${off.errorCode}")`);
  check(off.status.includes('WebGPU is not available in this browser'), `message: ${off.status}`);
  check(off.pageErrors.length === 0, `no uncaught page errors ${JSON.stringify(off.pageErrors)}`);
} finally {
  server.close();
}
