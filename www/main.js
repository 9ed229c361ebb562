// The demo: loads the embedded model (www/models/shakespeare-mamba-3m) through webmamba's npm
// package (imported as a page without a bundler does) with Model.fromUrl (streamed, with a
// progress bar, kept in the offline cache), on WebGPU when the browser has it (else on the
// CPU), and chats with one session.
// Generate edits the session to the prompt (only what changed is re-read), Stop/Continue pause
// and resume exactly, Regenerate rewinds to the prompt's end (a kept checkpoint: nothing re-read).
import { Model } from './pkg/index.js'; // the npm package's entry: no init() needed

const MODEL_DIR = 'models/shakespeare-mamba-3m';
const $ = (id) => document.getElementById(id);
let model, session, promptLength = 0, generating = false;

function setState(state, message) {
  document.body.dataset.state = state;
  $('status').textContent = message;
}

function fillTable(id, rows) {
  $(id).tBodies[0].replaceChildren(...rows.map(([k, v]) => {
    const tr = document.createElement('tr');
    for (const text of [k, v]) {
      const td = document.createElement('td');
      td.textContent = text;
      tr.append(td);
    }
    return tr;
  }));
}

/** The progress bar: bytes downloaded and uploaded over all files, then kernels compiled. */
function progressBar() {
  const seen = new Map(); // "phase file" -> { loaded, total }
  return (e) => {
    seen.set(`${e.phase} ${e.file}`, e);
    const bytes = [...seen.values()].filter((p) => p.phase !== 'compile');
    const [loaded, total] = bytes.reduce(([l, t], p) => [l + p.loaded, t + p.total], [0, 0]);
    $('progress').value = e.phase === 'compile' ? e.loaded / e.total : total ? loaded / total : 0;
    // Downloading and storing interleave piece by piece: the text follows the download.
    if (e.phase === 'compile') setState('loading', `Compiling kernels (${e.loaded}/${e.total})…`);
    else if (e.phase === 'download') setState('loading', `Loading ${e.file}: ${mib(e.loaded)} of ${mib(e.total)}…`);
    if (e.warning) console.warn(e.warning);
  };
}

const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(bytes < 2 ** 20 ? 2 : 1)} MiB`;

function showStats(outcome) {
  const s = session.stats();
  if (outcome) {
    const from = outcome.resumedFrom === undefined ? 'no checkpoint' : `the checkpoint after token ${outcome.resumedFrom}`;
    $('outcome').textContent = `Prompt: ${outcome.prefilled} token(s) run through the model, resumed from ${from}.`;
    $('outcome').dataset.prefilled = String(outcome.prefilled);
    $('outcome').dataset.resumedFrom = String(outcome.resumedFrom ?? '');
  }
  fillTable('checkpoints', [
    ['history', `${s.historyLength} tokens`],
    ['checkpoints on it', s.checkpoints.length ? Array.from(s.checkpoints).join(', ') : 'none yet'],
    ['one checkpoint', mib(s.checkpointBytes)],
    ['cache', `${s.cacheEntries} checkpoints, ${mib(s.cacheBytes)} of ${mib(s.cacheBudget)}`],
    ['tokens run (session)', `${s.tokensPrefilled}, ${s.hits} resume(s) from a checkpoint`],
  ]);
}

function setBusy(busy) {
  generating = busy;
  $('generate').disabled = busy;
  $('regenerate').disabled = busy || promptLength === 0;
  $('continue').disabled = busy || promptLength === 0;
  $('stop').disabled = !busy;
}

function options(reseed) {
  // The inputs may hold anything a user types; the API wants whole numbers and t >= 0.
  const whole = (id, fallback) => Math.max(0, Math.floor(Number($(id).value))) || fallback;
  const o = {
    maxTokens: whole('max-tokens', 80),
    temperature: Math.max(0, Number($('temperature').value)) || 0,
  };
  if (reseed) o.seed = whole('seed', 0);
  return o;
}

async function run(action) {
  setBusy(true);
  try {
    await action();
    setState('done', `Done (${model.info.backend === 'gpu' ? 'WebGPU' : 'CPU'}).`);
  } catch (e) {
    showError(e);
  } finally {
    setBusy(false);
    showStats();
  }
}

async function generate(reseed) {
  const out = $('output').querySelector('.generated');
  setState('running', 'Generating…');
  const ids = [];
  await session.generate(options(reseed), (text, id) => {
    out.textContent += text;
    ids.push(id);
  });
  $('output').dataset.tokens = (($('output').dataset.tokens || '') + ' ' + ids.join(' ')).trim();
}

async function onGenerate() {
  await run(async () => {
    const prompt = $('prompt').value;
    setState('running', 'Reading the prompt…');
    const outcome = await session.edit(prompt);
    promptLength = session.tokens().length;
    showStats(outcome);
    $('output').querySelector('.prompt-text').textContent = prompt;
    $('output').querySelector('.generated').textContent = '';
    $('output').dataset.tokens = '';
    await generate(true);
  });
}

async function onRegenerate() {
  await run(async () => {
    const outcome = await session.rewind(promptLength);
    showStats(outcome);
    $('output').querySelector('.generated').textContent = '';
    $('output').dataset.tokens = '';
    await generate(true);
  });
}

async function onContinue() {
  await run(() => generate(false));
}

async function main() {
  try {
    setState('loading', 'Downloading the model…');
    // Streams the files into the GPU (or memory) and keeps them in the offline cache.
    model = await Model.fromUrl(MODEL_DIR, { onProgress: progressBar() });
    session = model.newSession();
    window.demo = { model, get session() { return session; } }; // for the console (and the smoke test)
    const info = model.info;
    fillTable('model', [
      ['model', `${MODEL_DIR.split('/').pop()}: d_model ${info.dModel}, ${info.layers} layers, vocabulary ${info.vocab}`],
      ['running on', info.backend === 'gpu' ? `WebGPU — ${info.adapter}` : `the CPU — ${info.adapter}`],
      ['weights', `${info.weightFormat}, ${mib(info.weightBytes)}${info.backend === 'gpu'
        ? ` on the GPU (+ ${mib(info.activationBytes)} activations, ${mib(info.stateSlotBytes)} state and checkpoints)` : ' in memory'}`],
      ['state size', mib(info.stateBytes)],
    ]);
    document.body.dataset.backend = info.backend;
    $('generate').onclick = onGenerate;
    $('regenerate').onclick = onRegenerate;
    $('continue').onclick = onContinue;
    $('stop').onclick = () => session.stop();
    setBusy(false);
    showStats();
    setState('ready', info.backend === 'gpu'
      ? 'Ready. Write a prompt and press Generate.'
      : 'WebGPU is not available in this browser: running on the CPU (slower). Write a prompt and press Generate.');
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
