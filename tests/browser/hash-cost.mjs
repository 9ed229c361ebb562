// What verified downloads cost (loading.mjs, with WEBMAMBA_HASH_COST=1, in Chromium): the same
// 790M-shaped checkpoint loaded without digests and with an `integrity` option naming every
// shard's SHA-256 — hashed by the package's hashing worker, and (no worker can be made) on the
// page's thread — side by side in one browser.
import { createHash } from 'node:crypto';
import { createReadStream, readFileSync } from 'node:fs';

/** What hashing costs a 790M-shaped load (1.6 GB in 4 shards, f16 on the GPU, no offline
 *  cache): loads without digests, with an `integrity` option naming every file's SHA-256
 *  (node's, streamed from disk) hashed by the hashing worker, and the same with the worker's
 *  construction made to throw (the loading thread hashes), alternated three times each; the
 *  medians side by side. The check: the worker's cost < 5% of the load. */
export async function hashCost(page, url, dir, check) {
  const index = JSON.parse(readFileSync(`${dir}/model.safetensors.index.json`, 'utf8'));
  const integrity = {};
  for (const name of [...new Set(Object.values(index.weight_map))].sort()) {
    const h = createHash('sha256');
    for await (const chunk of createReadStream(`${dir}/${name}`)) h.update(chunk);
    integrity[name] = `sha256-${h.digest('base64')}`;
  }
  const times = { plain: [], hashed: [], 'hashed on the page thread': [] };
  for (let i = 0; i < 3; i++) {
    for (const kind of Object.keys(times)) {
      await page.reload();
      const r = await page.evaluate(async ({ url, integrity, block }) => {
        if (block) {
          const Native = window.Worker;
          window.Worker = class extends Native {
            constructor(u, o) {
              if (o?.name === 'webmamba-hash') throw new Error('no hashing worker in this arm');
              super(u, o);
            }
          };
        }
        try {
          const t = performance.now();
          const model = await window.webmamba.Model.fromUrl(url, { weights: 'f16', cache: false, integrity });
          const ms = performance.now() - t;
          const backend = model.info.backend;
          model.free();
          return { ok: true, ms, backend };
        } catch (e) {
          return { ok: false, message: `${e.code}: ${e.message}` };
        }
      }, { url, integrity: kind === 'plain' ? undefined : integrity, block: kind !== 'plain' && kind !== 'hashed' });
      if (!r.ok) {
        check(false, `790M load (${kind}) for the hashing cost: ${r.message}`);
        return;
      }
      times[kind].push(r.ms);
      console.log(`loading: 790M ${kind} load ${i + 1}: ${(r.ms / 1000).toFixed(1)} s (${r.backend})`);
    }
  }
  const median = (v) => [...v].sort((a, b) => a - b)[1];
  const [plain, hashed, here] = Object.values(times).map(median);
  const cost = hashed / plain - 1;
  console.log(`loading: 790M hashing cost: median load ${(plain / 1000).toFixed(1)} s without digests, ${(hashed / 1000).toFixed(1)} s with every shard's SHA-256 checked by the hashing worker: ${(100 * cost).toFixed(1)}%; ${(here / 1000).toFixed(1)} s hashed on the page's thread: ${(100 * (here / plain - 1)).toFixed(1)}%`);
  check(cost < 0.05, `790M: verifying every shard's SHA-256 costs ${(100 * cost).toFixed(1)}% of the load (< 5%): ${times.plain.map((t) => (t / 1000).toFixed(1)).join('/')} s vs ${times.hashed.map((t) => (t / 1000).toFixed(1)).join('/')} s`);
}
