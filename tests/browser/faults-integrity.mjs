// Verified downloads, run by faults.mjs in each engine, in the page and in a worker: a server
// laid out like the Hub (hub-server.mjs: a redirect to another origin, the SHA-256 where the
// Hub puts it) serving model.safetensors with one bit flipped must fail with `Integrity` and
// leave nothing in the offline cache — told by the listing, by the ETag, each alone — while
// with no digest at all the same bytes load (the negative control); an offline-cache entry
// damaged in place (in its data, in its header) is detected, fetched again once and the load
// succeeds with the true bytes cached; if the network's copy is damaged too, `Integrity`; the
// `integrity` option, right and wrong, on every loader (fromUrl, fromFiles, load). Every
// expected digest is computed by node's crypto from the fixture files.
import { createHash } from 'node:crypto';
import { file } from './fault-server.mjs';
import { cdnSeen, hubState, listingsAsked, sha256 } from './hub-server.mjs';

const sri = (alg, bytes) => `${alg}-${createHash(alg).update(bytes).digest('base64')}`;

/** In the page: the offline cache's entry for `url`: whether there is one, and its SHA-256. */
function cacheEntry(page, url) {
  return page.evaluate(async (url) => {
    const r = await (await caches.open('webmamba-v1')).match(url);
    if (!r) return { present: false };
    const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', await r.arrayBuffer()));
    return { present: true, sha256: Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('') };
  }, url);
}

/** In the page: flips the lowest bit of byte `at` (from the end when negative) of the cached
 *  entry for `url`, keeping its headers (its ETag and size still agree with the server). */
function damageCache(page, url, at) {
  return page.evaluate(async ({ url, at }) => {
    const cache = await caches.open('webmamba-v1');
    const r = await cache.match(url);
    if (!r) return false;
    const bytes = new Uint8Array(await r.arrayBuffer());
    bytes[at < 0 ? bytes.length + at : at] ^= 1;
    await cache.put(url, new Response(bytes, { status: 200, headers: r.headers }));
    return true;
  }, { url, at });
}

const clearCache = (page, url) => page.evaluate((u) => window.webmamba.Model.clearCache(u), url);

/** In the page: counts the hashing workers the package makes (`new Worker(…, { name:
 *  'webmamba-hash' })`); `mode` 'block' makes their construction throw, as a CSP without
 *  worker-src would; 'mute' makes each a worker that says it started and then never answers. */
function watchHashWorkers(page, mode) {
  return page.evaluate((mode) => {
    if (window.hashWorkers === undefined) {
      const Native = window.Worker;
      const mute = URL.createObjectURL(new Blob(['postMessage({ ready: true }); onmessage = () => {};'], { type: 'text/javascript' }));
      window.hashWorkers = { made: 0, mode: 'real' };
      window.Worker = class extends Native {
        constructor(url, options) {
          const hash = options?.name === 'webmamba-hash';
          if (hash && window.hashWorkers.mode === 'block') throw new Error('blocked by the test');
          super(hash && window.hashWorkers.mode === 'mute' ? mute : url, options);
          if (hash) window.hashWorkers.made += 1;
        }
      };
    }
    window.hashWorkers.mode = mode;
    return window.hashWorkers.made;
  }, mode);
}

/** The hashing worker (hash-worker.js): a verified load hashes there, and where none can be
 *  made the page's thread hashes instead; either way a flipped bit is `Integrity`. A worker
 *  that stops answering fails the load after the stall timeout, and the next load is whole. */
async function hashingWorker(page, { hubUrl, check, tryLoad, short, same }) {
  const cpu = { backend: 'cpu', cache: false };
  for (const mode of ['real', 'block']) {
    const how = mode === 'block' ? 'no hashing worker can be made: the page hashes' : 'the hashing worker';
    const before = await watchHashWorkers(page, mode);
    const flipped = await tryLoad(page, hubUrl('flip'), cpu);
    const ok = await tryLoad(page, hubUrl('ok'), cpu);
    const made = (await watchHashWorkers(page, 'real')) - before;
    check(!flipped.ok && flipped.code === 'Integrity' && ok.ok && same(ok) && made === (mode === 'block' ? 0 : 2),
      `in-page: integrity: ${how}: one bit flipped: ${short(flipped)}; the true bytes: ${short(ok)}; hashing workers made: ${made}`);
  }
  await watchHashWorkers(page, 'mute');
  const started = Date.now();
  const mute = await tryLoad(page, hubUrl('ok'), { ...cpu, stallTimeoutMs: 1500 });
  const waited = Date.now() - started;
  await watchHashWorkers(page, 'real');
  const after = await tryLoad(page, hubUrl('ok'), cpu);
  check(!mute.ok && mute.code === 'Io' && /hashing worker failed: it sent nothing for 1500 ms/.test(mute.message) && after.ok && same(after),
    `in-page: integrity: a hashing worker that stops answering fails the load after the stall timeout: ${short(mute)} (after ${waited} ms); the next load: ${short(after)}`);
}

/** Runs every integrity case; `tryLoad(page, url, options)` and `short(result)` are faults.mjs'. */
export async function integrityCases(page, { base, worker, want, check, tryLoad, short }) {
  const mode = worker ? 'worker' : 'in-page';
  const hubUrl = (kind) => `${base}/hubsim/${kind}/resolve/main/`;
  const weightsUrl = (kind) => `${hubUrl(kind)}model.safetensors`;
  const same = (r) => JSON.stringify(r.tokens) === JSON.stringify(want);
  const cpu = { backend: 'cpu', worker };
  const truth = sha256(file('tiny', 'model.safetensors')).toString('hex');

  let asked = listingsAsked.length;
  const ok = await tryLoad(page, hubUrl('ok'), { ...cpu, cache: false });
  check(ok.ok && same(ok) && listingsAsked.slice(asked).includes('ok'),
    `${mode}: integrity: a Hub-like folder (302 to another origin, digests published) loads: ${short(ok)}, its tree listing was read`);

  for (const [kind, told] of [['flip', /Hub's file listing/], ['flip-notree', /server's ETag/], ['flip-noexpose', /Hub's file listing/]]) {
    await clearCache(page, hubUrl(kind));
    const r = await tryLoad(page, hubUrl(kind), cpu);
    const kept = await cacheEntry(page, weightsUrl(kind));
    check(!r.ok && r.code === 'Integrity' && /model\.safetensors: integrity check failed/.test(r.message) && told.test(r.message) && !kept.present,
      `${mode}: integrity: one bit flipped (${kind}): ${short(r)}; cached: ${kept.present}`);
    await clearCache(page, hubUrl(kind));
  }
  if (!worker) await hashingWorker(page, { hubUrl, check, tryLoad, short, same });
  // A file read in parts (a vision tower skipped): its published digest cannot be checked, and
  // the warning says so; none of the tower's bytes came.
  const vlFrom = cdnSeen.length;
  const vl = await tryLoad(page, hubUrl('vl'), { ...cpu, cache: false });
  const vlGets = cdnSeen.slice(vlFrom).filter((e) => e.kind === 'vl' && e.name === 'model.safetensors' && e.method === 'GET');
  const vlLast = Math.max(...vlGets.map((e) => Number(/^bytes=\d+-(\d+)$/.exec(e.range ?? '')?.[1] ?? Infinity)));
  check(vl.ok && vl.warnings?.length === 1 && /model\.safetensors: 20080 of its 137192 bytes .* not downloaded, so its published SHA-256 was not checked/.test(vl.warnings[0])
    && vlLast === 117111,
    `${mode}: integrity: a file read in parts (the vision tower from byte 117112 skipped) loads with a warning that its digest was not checked: ${short(vl)}, ${JSON.stringify(vl.warnings)}; requests ${JSON.stringify(vlGets.map((e) => e.range))}`);
  const unseen = await tryLoad(page, hubUrl('flip-nodigest'), { ...cpu, cache: false });
  check(unseen.ok, `${mode}: integrity: negative control: with no digest published the flipped bit loads unseen (${short(unseen)})`);

  // An offline-cache entry damaged in place: detected, fetched again once, the load succeeds.
  hubState.flip = false;
  await clearCache(page, hubUrl('toggle'));
  const cached = await tryLoad(page, hubUrl('toggle'), cpu);
  check(cached.ok && (await cacheEntry(page, weightsUrl('toggle'))).sha256 === truth,
    `${mode}: integrity: a verified load is cached (${short(cached)})`);
  const gets = (from) => cdnSeen.slice(from).filter((e) => e.kind === 'toggle' && e.name === 'model.safetensors'
    && e.method === 'GET' && !e.range).length;
  for (const [where, at] of [['its data', -1], ['its header', 8]]) {
    const damaged = await damageCache(page, weightsUrl('toggle'), at);
    const from = cdnSeen.length;
    const r = await tryLoad(page, hubUrl('toggle'), cpu);
    const after = await cacheEntry(page, weightsUrl('toggle'));
    const warned = (r.warnings ?? []).some((w) => /model\.safetensors: the offline cache's copy was damaged/.test(w));
    check(damaged && r.ok && same(r) && gets(from) === 1 && after.sha256 === truth && warned,
      `${mode}: integrity: a cache entry damaged in ${where}: ${short(r)}, fetched again ${gets(from)} time(s), the cache holds the true bytes again: ${after.sha256 === truth}, warned: ${warned}`);
  }
  // …and when the network's copy is damaged too: Integrity, after one fetch, nothing cached.
  await damageCache(page, weightsUrl('toggle'), -1);
  hubState.flip = true;
  const from = cdnSeen.length;
  const both = await tryLoad(page, hubUrl('toggle'), cpu);
  hubState.flip = false;
  const left = await cacheEntry(page, weightsUrl('toggle'));
  check(!both.ok && both.code === 'Integrity' && gets(from) === 1 && !left.present,
    `${mode}: integrity: cache and network both damaged: ${short(both)}; fetched again ${gets(from)} time(s); cached: ${left.present}`);
  await clearCache(page, hubUrl('toggle'));

  // The integrity option: a plain static server (no digests of its own), and the Hub-like one.
  const weights = file('tiny', 'model.safetensors');
  const config = file('tiny', 'config.json');
  const plain = `${base}/fixtures/tiny-f32/`;
  const right = { 'model.safetensors': sri('sha256', weights), 'config.json': sri('sha512', config) };
  const other = Buffer.concat([weights, Buffer.from([0])]);
  for (const [label, url, integrity, code, pattern] of [
    ['right (sha256 + sha512)', plain, right, 'ok'],
    ['right, on the Hub-like folder too', hubUrl('ok'), right, 'ok'],
    ['wrong', plain, { 'model.safetensors': sri('sha256', other) }, 'Integrity', /model\.safetensors: .*integrity option/],
    ['wrong for config.json (sha384)', plain, { 'config.json': sri('sha384', Buffer.from('{}')) }, 'Integrity', /config\.json: .*integrity option/],
    ['right, where the host publishes nothing and the bit is flipped', hubUrl('flip-nodigest'), { 'model.safetensors': sri('sha256', weights) }, 'Integrity', /model\.safetensors/],
  ]) {
    await clearCache(page, url);
    const r = await tryLoad(page, url, { ...cpu, integrity });
    const kept = await cacheEntry(page, `${url}model.safetensors`);
    if (code === 'ok') check(r.ok && same(r) && kept.present, `${mode}: integrity option ${label}: ${short(r)}, cached`);
    else check(!r.ok && r.code === code && pattern.test(r.message) && !(label === 'wrong' && kept.present),
      `${mode}: integrity option ${label}: ${short(r)}${label === 'wrong' ? `; model.safetensors cached: ${kept.present}` : ''}`);
    await clearCache(page, url);
  }
  const loaders = await page.evaluate(async ({ plain, right, wrong, worker }) => {
    const { Model } = window.webmamba;
    const names = ['config.json', 'model.safetensors', 'tokenizer.json'];
    const bytes = await Promise.all(names.map(async (f) => new Uint8Array(await (await fetch(plain + f)).arrayBuffer())));
    const files = names.map((f, i) => new File([bytes[i]], f));
    const outcome = (p) => p.then((m) => { m.free(); return 'loaded'; }, (e) => `${e.code}: ${e.message}`);
    const o = (integrity) => ({ backend: 'cpu', cache: false, worker, integrity });
    return {
      filesRight: await outcome(Model.fromFiles(files, o(right))),
      filesWrong: await outcome(Model.fromFiles(files, o(wrong))),
      bytesRight: await outcome(Model.load(...bytes, o(right))),
      bytesWrong: await outcome(Model.load(...bytes, o(wrong))),
    };
  }, { plain, right, wrong: { 'model.safetensors': sri('sha256', other) }, worker });
  check(loaders.filesRight === 'loaded' && /^Integrity: model\.safetensors/.test(loaders.filesWrong)
    && loaders.bytesRight === 'loaded' && /^Integrity: model\.safetensors/.test(loaders.bytesWrong),
  `${mode}: integrity option on fromFiles and load: ${JSON.stringify(loaders)}`);
}
