// The wasm side: node run.mjs MODULE.wasm prints GMAC/s of each shape (as src/main.rs).
import { readFileSync } from 'node:fs';
const { instance } = await WebAssembly.instantiate(readFileSync(process.argv[2]), {});
const { setup, multiply } = instance.exports;
const cells = [];
for (const [m, k, n] of [[256, 768, 3072], [256, 1536, 768], [256, 1536, 80]]) {
  setup(m, k, n);
  multiply(m, k, n, 2);
  const reps = 10;
  const t0 = performance.now();
  multiply(m, k, n, reps);
  const seconds = (performance.now() - t0) / 1000 / reps;
  cells.push(((m * k * n) / seconds / 1e9).toFixed(1));
}
console.log(cells.join(' | '));
