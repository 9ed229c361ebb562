#!/usr/bin/env node
// The npm package as a consumer gets it: `npm pack` the built package (www/pkg, from `npm run
// build:demo`: the same build as `npm run build`'s pkg/), install the tarball into a fresh
// Vite + TypeScript app (tests/package/app: vite and typescript from npm, no bundler config),
// type-check it with `tsc --strict --noEmit` (target ES2022 + DOM, skipLibCheck off), `vite
// build` it, and run it in headless Chromium both built (served statically) and on Vite's dev
// server: the README's example writes streamed text into the page, the package's Web Worker
// (bundled by Vite with its wasm) gives the same greedy text as the page, and
// `model.chat.completions.create({ stream: true })` (typed by the package's declarations)
// streams the text of the same request not streamed.
import { execFileSync, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { chromium } from 'playwright-core';
import { serve } from '../../scripts/serve.mjs';
import { ARGS, checker } from '../browser/harness.mjs';

const { check, counts } = checker('consumer');
const PKG = 'www/pkg';
if (!existsSync(`${PKG}/package.json`)) throw new Error('run `npm run build:demo` first');
const work = resolve('target/consumer');
const app = `${work}/app`;
rmSync(work, { recursive: true, force: true });
mkdirSync(work, { recursive: true });

const sh = (cmd, args, cwd) => {
  console.log(`consumer: $ ${cmd} ${args.join(' ')}`);
  return execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
};

// The tarball, and what it holds.
const packed = JSON.parse(sh('npm', ['pack', resolve(PKG), '--json', '--pack-destination', work], work))[0];
const files = packed.files.map((f) => f.path).sort();
for (const f of ['package.json', 'README.md', 'index.js', 'index.d.ts', 'worker.js', 'worker-client.js', 'hash-worker.js', 'simd.js', 'webmamba.js', 'webmamba_bg.wasm',
  'webmamba_relaxed_bg.wasm', 'threads/webmamba.js', 'threads/webmamba_bg.wasm', 'threads/webmamba_relaxed_bg.wasm']) {
  check(files.includes(f), `the tarball has ${f}`);
}
check(packed.name === 'webmamba', `the package is named ${packed.name}`);

// A fresh app: the template, the embedded model as a static asset, the tarball installed.
cpSync('tests/package/app', app, { recursive: true });
cpSync('www/models/shakespeare-mamba-3m', `${app}/public/models/shakespeare-mamba-3m`, { recursive: true });
// The same model with a chat template (Qwen2.5-Instruct's ChatML, tests/fixtures/chat).
cpSync('www/models/shakespeare-mamba-3m', `${app}/public/models/chat-model`, { recursive: true });
writeFileSync(`${app}/public/models/chat-model/tokenizer_config.json`, JSON.stringify({
  chat_template: readFileSync('tests/fixtures/chat/chatml-qwen2.5-instruct.jinja', 'utf8'), eos_token: '<|endoftext|>' }));
sh('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', `../${packed.filename}`], app);
const installed = JSON.parse(readFileSync(`${app}/node_modules/webmamba/package.json`, 'utf8'));
check(installed.exports['.'].types === './index.d.ts', 'installed: its exports name the types and the entry');
let typed = true;
try {
  console.log(sh('npx', ['tsc', '--version'], app).trim());
  sh('npx', ['tsc', '--strict', '--noEmit', '-p', '.'], app);
} catch (e) {
  typed = false;
  console.error(e.stdout);
}
check(typed, 'tsc --strict --noEmit passes on src/main.ts (ES2022 + DOM, skipLibCheck off)');
sh('npx', ['vite', 'build'], app);
const assets = sh('ls', ['dist/assets'], app).split('\n').filter(Boolean);
check(assets.some((f) => f.endsWith('.wasm')), `vite build put the wasm in dist/assets (${assets.join(', ')})`);

/** Opens the app at `url` in `browser` and checks what it did (`how` names the server). */
async function runApp(browser, url, how) {
  const page = await browser.newPage();
  const errors = [];
  const logs = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => (m.type() === 'error' ? errors.push(`${m.text()} ${m.location().url}`) : logs.push(m.text())));
  await page.goto(url);
  await page.waitForSelector('body[data-done]', { timeout: 180_000 }).catch(() => {});
  const r = await page.evaluate(() => ({ streamed: document.body.textContent, ...document.body.dataset }));
  await page.close();
  check(logs.some((l) => l.startsWith('download ')) && logs.some((l) => l.startsWith('compile ')),
    `${how}: onProgress logged the download and compile phases (${logs.length} lines)`);
  check(r.streamed.length > 0, `${how}: the app wrote the streamed text: ${JSON.stringify(r.streamed)}`);
  check(typeof r.text === 'string' && r.text.length > 0, `${how}: generate resolved to text: ${JSON.stringify(r.text)}`);
  check(r.page && r.worker === r.page, `${how}: the package's worker (${r.workerBackend}) gives the page's greedy text: ${JSON.stringify(r.worker)}`);
  check(r.simd === 'relaxed' && r.workerSimd === 'relaxed',
    `${how}: the page and the worker run the relaxed-SIMD module (info.simd ${r.simd}, ${r.workerSimd}): the bundle has it`);
  const usage = JSON.parse(r.chatUsage ?? 'null');
  check(r.chatStreamed?.length > 0 && r.chatStreamed === r.chatWhole && usage?.completion_tokens > 0 && usage.prompt_tokens > 0,
    `${how}: chat.completions.create with stream: true gives the text of the same request not streamed (${JSON.stringify(r.chatStreamed)}), usage on the last chunk ${r.chatUsage}`);
  check(/^get_weather \{"city": ".{0,8}"\} tool_calls$/.test(r.toolCall ?? '') && Number(r.toolCached) > 0,
    `${how}: a typed tool_choice "required" call (${r.toolCall}); sent back, ${r.toolCached} prompt tokens came from the session`);
  // fromUrl asks for the optional files a model folder may have: tokenizer_config.json (the
  // embedded model has none; Chromium logs the 404).
  const unexpected = errors.filter((e) => !/404.*\/(model\.safetensors\.index\.json|tokenizer_config\.json|chat_template\.jinja|generation_config\.json)$/.test(e));
  check(unexpected.length === 0, `${how}: no console errors but the optional files' 404s ${JSON.stringify(unexpected)}`);
}

/** A free TCP port on 127.0.0.1. */
async function freePort() {
  const probe = createServer();
  await new Promise((ok) => probe.listen(0, '127.0.0.1', ok));
  const { port } = probe.address();
  await new Promise((ok) => probe.close(ok));
  return port;
}

// The built app, served statically, then the app on Vite's dev server (which pre-bundles
// dependencies and answers missing files with index.html), in headless Chromium.
const server = await serve(`${app}/dist`, 0);
const port = await freePort();
const dev = spawn('npx', ['vite', '--host', '127.0.0.1', '--port', String(port), '--strictPort'], { cwd: app, stdio: 'ignore', detached: true });
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ARGS });
try {
  await runApp(browser, `http://127.0.0.1:${server.address().port}/`, 'vite build');
  await runApp(browser, `http://127.0.0.1:${port}/`, 'vite dev server');
} finally {
  await browser.close();
  server.close();
  process.kill(-dev.pid);
}
if (counts.failed) {
  console.error(`consumer: ${counts.failed} check(s) failed`);
  process.exit(1);
}
console.log('consumer: all checks passed');
