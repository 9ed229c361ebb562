// The three browser engines the tests run in, behind one small interface:
//   - chromium: Debian's Chromium through Playwright (playwright-core), WebGPU on SwiftShader;
//   - firefox:  Debian's firefox-esr through geckodriver (crates.io), headless;
//   - webkit:   Debian's WebKitGTK MiniBrowser through WebKitWebDriver, under Xvfb (it needs a
//               display: scripts/test starts the tests with xvfb-run).
// Firefox and WebKit are driven with selenium-webdriver (W3C WebDriver; Playwright's own
// Firefox/WebKit builds cannot be downloaded here). What the tests use is the same everywhere:
//   const browser = await launch('firefox');
//   const { page, errors, webgpu } = await browser.open(base); // `${base}/loading.html`, package ready
//   await page.evaluate(fn, arg); await page.reload(); await page.setInputFiles('#files', paths);
//   await errors(); // the page's uncaught errors and unhandled rejections so far
//   await browser.close();
// `open` also says whether the engine offers a WebGPU adapter on this machine (`webgpu`: true,
// or why not): tests run the GPU backend where it does, the CPU backend everywhere.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium } from 'playwright-core';
import { Builder, By } from 'selenium-webdriver';
import firefox from 'selenium-webdriver/firefox.js';

/** Chromium flags: WebGPU on (SwiftShader), nothing from the network but our server. */
export const CHROMIUM_ARGS = ['--no-sandbox', '--enable-unsafe-webgpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--disable-quic', '--no-first-run'];

const GECKODRIVER = process.env.GECKODRIVER ?? join(process.env.CARGO_HOME ?? `${process.env.HOME}/.cargo`, 'bin/geckodriver');
const MINIBROWSER = process.env.MINIBROWSER ?? '/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser';
/** How long one page.evaluate may run in Firefox and WebKit (a whole test section runs in one):
 *  15 minutes, or WEBMAMBA_SCRIPT_TIMEOUT_S seconds (to see what a stopped run reports). */
const SCRIPT_TIMEOUT_MS = Number(process.env.WEBMAMBA_SCRIPT_TIMEOUT_S ?? 15 * 60) * 1000;

/** Every engine, in the order the tests run them. */
export const ENGINES = ['chromium', 'firefox', 'webkit'];

/** The engines a test script runs: `--engine=a,b` or WEBMAMBA_ENGINES, else all three. */
export function engines(argv = process.argv) {
  const arg = argv.find((a) => a.startsWith('--engine='))?.slice('--engine='.length) ?? process.env.WEBMAMBA_ENGINES;
  const list = arg ? arg.split(',').map((s) => s.trim()).filter(Boolean) : ENGINES;
  for (const e of list) if (!ENGINES.includes(e)) throw new Error(`unknown engine ${e} (${ENGINES.join(', ')})`);
  return list;
}

/** Launches `engine`. Chromium gets a fresh persistent profile (a user's browser has one; its
 *  incognito-like default keeps the Cache API in memory with a small quota). */
export async function launch(engine) {
  return engine === 'chromium' ? chromiumBrowser() : webdriverBrowser(engine);
}

/** Waits for the test page's package, then asks the engine for a WebGPU adapter: `webgpu` is
 *  true when it gives one, else a string saying why not. */
async function ready(page) {
  await started(page);
  return page.evaluate(async () => {
    if (!navigator.gpu) return 'no navigator.gpu';
    try {
      return (await navigator.gpu.requestAdapter()) ? true : 'navigator.gpu.requestAdapter() gives no adapter';
    } catch (e) {
      return `navigator.gpu.requestAdapter() throws ${e}`;
    }
  });
}

/** Waits (up to 60 s) until the test page has started the package: after a navigation, a
 *  WebDriver command may run before the new document's module script has. */
async function started(page) {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const state = await page.evaluate(async () => (window.ready ? (await window.ready) === true : false)).catch(() => false);
    if (state) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  const errors = await page.evaluate(() => window.__pageErrors).catch((e) => String(e));
  throw new Error(`the test page did not start the package within 60 s: ${JSON.stringify(errors)}`);
}

/** The page's uncaught errors (loading.html records them in `window.__pageErrors`), kept across
 *  reloads: `page.reload` is wrapped to read them first, and to wait for the package after. */
function withErrors(page) {
  const seen = [];
  const pull = async () => {
    const now = await page.evaluate(() => {
      const e = window.__pageErrors ?? [];
      window.__pageErrors = [];
      return e;
    });
    seen.push(...now);
  };
  const reload = page.reload;
  page.reload = async () => {
    await pull();
    await page.evaluate(() => { window.ready = null; }); // so the wait below sees the new page's
    await reload();
    await started(page);
  };
  return async () => {
    await pull();
    return seen.slice();
  };
}

async function chromiumBrowser() {
  const profile = mkdtempSync(join(tmpdir(), 'webmamba-profile-'));
  const context = await chromium.launchPersistentContext(profile, { executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
  return {
    engine: 'chromium',
    // The full version from the browser; the user agent (which says 156.0.0.0) where the
    // context has no Browser object to ask.
    version: context.browser()?.version() || await chromiumVersion(context),
    async open(base) {
      const pw = context.pages()[0] ?? await context.newPage();
      const pageErrors = [];
      pw.on('pageerror', (e) => pageErrors.push(String(e)));
      // A renderer that dies (out of memory, a GPU process crash) says so, not just "closed".
      pw.on('crash', () => console.error(`chromium: the page crashed (${new Date().toISOString()})`));
      await pw.goto(`${base}/loading.html`);
      const page = {
        playwright: pw,
        evaluate: (fn, arg) => pw.evaluate(fn, arg),
        reload: () => pw.reload(),
        setInputFiles: (selector, files) => pw.setInputFiles(selector, files),
      };
      const pulled = withErrors(page);
      // Playwright's own listener also sees errors the page's listener cannot (a failed module load).
      const errors = async () => [...new Set([...(await pulled()), ...pageErrors])];
      return { page, errors, webgpu: await ready(page) };
    },
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

async function chromiumVersion(context) {
  const page = context.pages()[0] ?? await context.newPage();
  const ua = await page.evaluate(() => navigator.userAgent);
  return /Chrome\/([\d.]+)/.exec(ua)?.[1] ?? ua;
}

/** A free TCP port on 127.0.0.1. */
async function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

/** Waits until a WebDriver server answers /status. */
async function waitForDriver(url, child, what) {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${what} exited with ${child.exitCode}`);
    try {
      const r = await fetch(`${url}/status`);
      if (r.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what} did not start within 30 s`);
}

async function webdriverBrowser(engine) {
  let driver;
  let child = null;
  if (engine === 'firefox') {
    const options = new firefox.Options().setBinary('/usr/bin/firefox-esr').addArguments('-headless');
    // WebGPU where Firefox offers it (on by default from Firefox 141 on Windows only).
    options.setPreference('dom.webgpu.enabled', true);
    const service = new firefox.ServiceBuilder(GECKODRIVER);
    driver = await new Builder().forBrowser('firefox').setFirefoxOptions(options).setFirefoxService(service).build();
  } else {
    if (!process.env.DISPLAY) throw new Error('WebKit (MiniBrowser) needs a display: run the tests under xvfb-run');
    const port = await freePort();
    child = spawn('WebKitWebDriver', [`--port=${port}`], { stdio: ['ignore', 'ignore', 'inherit'] });
    const url = `http://127.0.0.1:${port}`;
    await waitForDriver(url, child, 'WebKitWebDriver');
    driver = await new Builder().usingServer(url).withCapabilities({
      browserName: 'MiniBrowser',
      'webkitgtk:browserOptions': { binary: MINIBROWSER, args: ['--automation'] },
    }).build();
  }
  await driver.manage().setTimeouts({ script: SCRIPT_TIMEOUT_MS, pageLoad: 120_000 });
  const caps = await driver.getCapabilities();
  const page = {
    driver,
    /** Runs `fn(arg)` in the page and returns its (awaited) result, as Playwright's evaluate. */
    evaluate: (fn, arg) => driver.executeScript(`return (${fn})(arguments[0]);`, arg ?? null),
    reload: () => driver.navigate().refresh(),
    async setInputFiles(selector, files) {
      const input = await driver.findElement(By.css(selector));
      await driver.executeScript('arguments[0].value = "";', input); // WebDriver appends to a multiple input
      await input.sendKeys(files.map((f) => resolve(f)).join('\n'));
    },
  };
  return {
    engine,
    version: String(caps.get('browserVersion') ?? ''),
    async open(base) {
      await driver.get(`${base}/loading.html`);
      return { page, errors: withErrors(page), webgpu: await ready(page) };
    },
    async close() {
      try {
        await driver.quit();
      } finally {
        child?.kill();
      }
    },
  };
}
