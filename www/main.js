// The demo page: opens the GPU through webmamba's wasm package, shows the adapter, and runs
// the proof kernel (RMSNorm) against a float64 reference computed here in JavaScript.
import init, { Gpu } from './pkg/webmamba.js';

const ROWS = 256, COLS = 768, EPS = 1e-5, TOLERANCE = 1e-5;
const $ = (id) => document.getElementById(id);

function setState(state, message) {
  document.body.dataset.state = state;
  $('status').textContent = message;
}

function fillTable(id, rows) {
  const body = $(id).tBodies[0];
  body.replaceChildren(...rows.map(([k, v, cls]) => {
    const tr = document.createElement('tr');
    const th = document.createElement('td');
    const td = document.createElement('td');
    th.textContent = k;
    td.textContent = v;
    if (cls) td.className = cls;
    tr.append(th, td);
    return tr;
  }));
}

// Seeded xorshift so every run checks the same numbers.
function randomArray(n, seed, scale) {
  let s = seed >>> 0 || 1;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    out[i] = (s / 2 ** 32 * 2 - 1) * scale;
  }
  return out;
}

function rmsNormReference(x, w, eps) {
  const cols = w.length, y = new Float64Array(x.length);
  for (let r = 0; r < x.length / cols; r++) {
    let ss = 0;
    for (let i = 0; i < cols; i++) ss += x[r * cols + i] ** 2;
    const scale = 1 / Math.sqrt(ss / cols + eps);
    for (let i = 0; i < cols; i++) y[r * cols + i] = x[r * cols + i] * scale * w[i];
  }
  return y;
}

async function runProof(gpu) {
  const x = randomArray(ROWS * COLS, 1234, 3), w = randomArray(COLS, 99, 2);
  const t0 = performance.now();
  const y = await gpu.rmsNorm(x, w, EPS);
  const ms = performance.now() - t0;
  const ref = rmsNormReference(x, w, EPS);
  let worst = 0, at = 0;
  for (let i = 0; i < y.length; i++) {
    const d = Math.abs(y[i] - ref[i]);
    if (!(d <= worst)) { worst = d; at = i; }
  }
  const ok = worst <= TOLERANCE;
  fillTable('proof', [
    ['shape', `${ROWS} × ${COLS} (float32), eps ${EPS}`],
    ['GPU time', `${ms.toFixed(1)} ms (upload, kernel, readback)`],
    ['max |GPU − CPU|', `${worst.toExponential(2)} at index ${at}`],
    ['result', ok ? `PASS (tolerance ${TOLERANCE})` : `FAIL (tolerance ${TOLERANCE})`, ok ? 'pass' : 'fail'],
  ]);
  $('proof').dataset.maxError = String(worst);
  return ok;
}

async function main() {
  $('shape').textContent = `a ${ROWS} × ${COLS} matrix of random numbers`;
  try {
    await init();
    setState('loading', 'Opening the GPU…');
    const gpu = await Gpu.create();
    const a = gpu.adapter;
    fillTable('adapter', [
      ['adapter', a.name],
      ['backend', `${a.backend} (${a.deviceType})`],
      ['shader-f16', a.shaderF16 ? 'yes' : 'no (f32 weights)'],
      ['timestamp queries', a.timestampQuery ? 'yes' : 'no'],
      ['max storage binding', `${(a.maxStorageBufferBindingSize / 2 ** 20).toFixed(0)} MiB`],
      ['max buffer', `${(a.maxBufferSize / 2 ** 20).toFixed(0)} MiB`],
      ['max workgroup', `${a.maxComputeInvocationsPerWorkgroup} invocations`],
    ]);
    $('adapter').dataset.name = a.name;
    setState('loading', 'Running the proof kernel…');
    const run = async () => {
      const ok = await runProof(gpu);
      setState(ok ? 'done' : 'error', ok ? 'The GPU kernel matches the CPU.' : 'The GPU kernel does NOT match the CPU.');
    };
    await run();
    $('rerun').disabled = false;
    $('rerun').onclick = () => run().catch(showError);
  } catch (e) {
    showError(e);
  }
}

function showError(e) {
  const code = e && e.code ? ` [${e.code}]` : '';
  setState('error', `${e && e.message ? e.message : e}${code}`);
  document.body.dataset.errorCode = (e && e.code) || '';
  console.error(e);
}

main();
