// node run.mjs MODULE.wasm: GB/s of bf16 weights each row order reads, alternated, 4 rounds.
import { readFileSync } from 'node:fs';
const { instance } = await WebAssembly.instantiate(readFileSync(process.argv[2]), {});
const e = instance.exports;
e.setup();
const passes = 5;
const rates = { neighbours: [], quarters: [], quarters_one: [], eighths: [], eighths_one: [] };
for (let round = 0; round < 4; round++) {
  for (const order of Object.keys(rates)) {
    const t0 = performance.now();
    e[order](passes);
    rates[order].push((passes * e.bytes_per_pass()) / ((performance.now() - t0) / 1000) / 1e9);
  }
}
// the first round warms up (pages touched, tier-up); report the rest
for (const [order, r] of Object.entries(rates)) {
  const rest = r.slice(1).sort((a, b) => a - b);
  console.log(`${order}: ${rest[1].toFixed(2)} GB/s (${rest[0].toFixed(2)}–${rest[2].toFixed(2)})`);
}
