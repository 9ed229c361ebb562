// What the browser tests share: Chromium's flags (WebGPU on SwiftShader), the test page
// (loading.html: the npm package from /pkg/ as window.webmamba) opened and ready, a reload that
// waits for it again, and a check() that counts failures.

/** Chromium flags: WebGPU on (SwiftShader), nothing from the network but our server. */
export const ARGS = ['--no-sandbox', '--enable-unsafe-webgpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--disable-quic', '--no-first-run'];

/** Opens `${base}/loading.html` in `context` (a Browser or a persistent BrowserContext) and waits
 *  for the package; returns the page and the uncaught errors it raises from then on. */
export async function openTestPage(context, base) {
  const page = (context.pages?.() ?? [])[0] ?? await context.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  await page.goto(`${base}/loading.html`);
  await page.evaluate(() => window.ready);
  return { page, pageErrors };
}

/** Reloads the page and waits for the package again. */
export async function reload(page) {
  await page.reload();
  await page.evaluate(() => window.ready);
}

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
