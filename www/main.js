// The demo: loads a Mamba model through webmamba's npm package (imported as a page without a
// bundler does) in the package's Worker mode — the page stays responsive while the model reads
// a prompt, even on the CPU fallback — on WebGPU when the browser has it, else on the CPU.
// The embedded model (www/models/shakespeare-mamba-3m) loads first; #model-url / #load-url
// load any folder URL in the Hugging Face layout and #model-folder a folder on this computer.
// Generate edits the session to the prompt (only what changed is re-read), Stop/Continue pause
// and resume exactly, Regenerate rewinds to the prompt's end (a kept checkpoint: nothing
// re-read). After each turn the session is saved (`session.save`) and restored on the next
// visit, so a reload loses nothing and re-reads nothing.
// Checkpoints also go to the persistent state store (`store: true`: the origin private file
// system), so a reload or another tab re-reads nothing a checkpoint covers; #clear-store empties it.
// A model with a chat template also gets the chat view (chatview.js: bubbles, each turn's
// prefill count).
// `?model=URL` loads that model first; `?worker=0` runs the model in the page instead;
// `?store=0` keeps checkpoints in memory only.
import { Model } from './pkg/index.js'; // the npm package's entry: no init() needed
import { mib, size } from './format.js';
import { lastModelUrl, recall, remember, sessionName, setLastModelUrl } from './saved.js';
import { draw } from './timeline.js';
import { turn } from './turns.js';
import { chatView } from './chatview.js';

const EMBEDDED = { key: 'models/shakespeare-mamba-3m/', name: 'shakespeare-mamba-3m' };
const params = new URLSearchParams(location.search);
const WORKER = params.get('worker') !== '0';
const STORE = params.get('store') !== '0';
const $ = (id) => document.getElementById(id);

/** What the page holds; `window.demo` for the console (and the demo's browser test). */
const demo = {
  model: null,
  session: null,
  source: null, // { key, name, url? }: where the model came from; key names its saved session
  promptLength: 0,
  tokens: [], // ids generated since the prompt (data-tokens)
  last: null, // the last turn: { kind, resumedFrom, generatedFrom, end, ... }
  busy: true,
};
window.demo = demo;
/** What a turn (turns.js) updates on the page. */
const ui = { setState, showError, setBusy, showStats, save };
const chat = chatView(demo, ui);

function setState(state, message) {
  document.body.dataset.state = state;
  $('status').textContent = message;
}

function showError(e, context = '') {
  const code = e && e.code ? ` [${e.code}]` : '';
  setState('error', `${context}${e && e.message ? e.message : e}${code}`);
  document.body.dataset.errorCode = (e && e.code) || '';
}

function notice(text) {
  $('outcome').dataset.notice = text;
  if (text) $('outcome').textContent = text;
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

/** The progress bar, one run: weight bytes read (90%; the loader reports every weight file's
 *  size before the first byte), then kernels compiled (10%); indeterminate before the weights
 *  (config, tokenizer, headers). */
function progressBar(name) {
  const seen = new Map(); // "phase file" -> { loaded, total }
  return (e) => {
    seen.set(`${e.phase} ${e.file}`, e);
    const weights = [...seen.values()].filter((p) => p.phase === 'download' && p.file.endsWith('.safetensors'));
    const [loaded, total] = weights.reduce(([l, t], p) => [l + p.loaded, t + p.total], [0, 0]);
    const compiled = seen.get('compile kernels');
    if (compiled) $('progress').value = 0.9 + 0.1 * (compiled.loaded / compiled.total);
    else if (total) $('progress').value = 0.9 * (loaded / total);
    else $('progress').removeAttribute('value');
    // Downloading and storing interleave piece by piece: the text follows the download.
    if (e.phase === 'compile') setState('loading', `${name}: compiling kernels (${e.loaded}/${e.total})…`);
    else if (e.phase === 'download') setState('loading', `${name}: loading ${e.file}, ${size(e.loaded)} of ${size(e.total)}…`);
    else if (e.phase === 'upload' && e.file && !seen.has(`download ${e.file}`)) {
      setState('loading', `${name}: reading ${e.file}, ${size(e.loaded)} of ${size(e.total)}…`);
    }
    if (e.warning) console.warn(e.warning);
  };
}

/** Buttons: nothing while busy; Continue and Regenerate only after a prompt. */
function setBusy(busy) {
  demo.busy = busy;
  const none = !demo.session;
  $('generate').disabled = busy || none;
  $('regenerate').disabled = busy || none || demo.promptLength === 0;
  $('continue').disabled = busy || none || demo.promptLength === 0;
  $('stop').disabled = !busy || none || document.body.dataset.state !== 'generating';
  for (const id of ['load-url', 'model-folder', 'load-embedded', 'clear-store']) $(id).disabled = busy;
}

/** Redraws what depends on the session: the checkpoint table and the timeline (from `stats`,
 *  the session's `stats()` when the caller has just read them). */
async function showStats(stats) {
  if (!demo.session) return;
  const s = stats ?? await demo.session.stats();
  fillTable('checkpoints', [
    ['history', `${s.historyLength} tokens`],
    ['checkpoints on it', s.checkpoints.length ? Array.from(s.checkpoints).join(', ') : 'none yet'],
    ['tokens run (session)', `${s.tokensPrefilled}, ${s.hits} resume(s) from a checkpoint`],
  ]);
  $('legend-page').hidden = !(demo.model.info.pageBytes > 0);
  await showStore();
  draw({ stats: s, blockSize: demo.model.info.blockSize, turn: demo.last });
}

/** The state store's line under the model table (`cacheStats()`), with its latest warning. */
async function showStore() {
  const c = await demo.model.cacheStats();
  const warning = c.storeWarnings.at(-1);
  const off = demo.model.info.warnings.find((w) => w.startsWith('state store off'));
  $('store-line').textContent = !c.store
    ? `State store: ${off ?? 'off'}.`
    : `State store (this browser, all tabs): ${mib(c.storeBytes)} on disk; this page read ${c.storeHits} `
      + `and wrote ${c.storeWrites} record(s)${c.storeMisses ? `, removed ${c.storeMisses} damaged` : ''}.`
      + (warning ? ` Last warning: ${warning}` : '');
  $('store-line').dataset.bytes = String(c.storeBytes);
  $('clear-store').disabled = demo.busy || !c.store;
}

/** Puts the output back as `record` left it (or empty). */
function showText(record) {
  $('output').querySelector('.prompt-text').textContent = record?.prompt ?? '';
  $('output').querySelector('.generated').textContent = record?.generated ?? '';
  $('output').dataset.tokens = (record?.tokens ?? []).join(' ');
  demo.tokens = record?.tokens ?? [];
  demo.promptLength = record?.promptLength ?? 0;
  demo.last = record?.turn ?? null;
  if (record) $('prompt').value = record.prompt;
}

/** Saves the session and the page's record after a turn (best effort). */
async function save() {
  const record = {
    prompt: $('output').querySelector('.prompt-text').textContent,
    generated: $('output').querySelector('.generated').textContent,
    promptLength: demo.promptLength,
    tokens: demo.tokens,
    turn: demo.last,
    history: Array.from(await demo.session.tokens()), // to restore through the state store
  };
  const why = await remember(demo.session, demo.source.key, record);
  if (why) {
    console.warn(why);
    notice(why);
  }
}

/** What the page calls each `info.architecture` (config.json's model_type). */
const ARCHITECTURES = {
  mamba: 'Mamba', falcon_mamba: 'Falcon-Mamba', mamba2: 'Mamba-2', granitemoehybrid: 'Granite-4.0-H',
  bamba: 'Bamba', nemotron_h: 'Nemotron-H', jamba: 'Jamba', falcon_h1: 'Falcon-H1', zamba2: 'Zamba2',
};

/** The CPU's threads as the model table says them: wasm threads need a worker in a
 *  cross-origin-isolated page (COOP/COEP: `npm start`'s server sends them). */
function threadsText(n) {
  if (n > 1) return `${n} threads`;
  return self.crossOriginIsolated ? 'one thread' : 'one thread: the page is not cross-origin isolated';
}

function describe(info, source) {
  document.body.dataset.backend = info.backend;
  const gpu = info.backend === 'gpu';
  fillTable('model', [
    ['model', `${source.name} (${ARCHITECTURES[info.architecture] ?? info.architecture}): `
      + `d_model ${info.dModel}, ${info.layers} layers, vocabulary ${info.vocab}`],
    ['running on', `${gpu ? `WebGPU — ${info.adapter}` : `the CPU (${threadsText(info.threads)}) — ${info.adapter}`}${WORKER ? ' (in a Web Worker)' : ''}`],
    ['weights', `${info.weightFormat}, ${mib(info.weightBytes)}${gpu ? ' on the GPU' : ' in memory'}`],
    ...(gpu ? [['GPU memory', `${mib(info.weightBytes + info.activationBytes + info.stateSlotBytes)}: `
      + `${mib(info.weightBytes)} weights, ${mib(info.activationBytes)} activations, `
      + `${mib(info.stateSlotBytes)} state and checkpoint slots`]] : []),
    ['state', `${mib(info.stateBytes)} per checkpoint, a block every ${info.blockSize} tokens`
      + (info.pageBytes > 0 ? `; its attention layers' keys and values in shared pages of ${mib(info.pageBytes)} a block` : '')],
    ...(source.url ? [['from', source.url]] : []),
  ]);
}

/** Loads a model with `load(options)` and makes it the page's; the previous one stays until
 *  the new one is ready (and stays if it fails). Restores the saved conversation if any. */
async function open(source, load) {
  setBusy(true);
  $('progress').removeAttribute('value');
  setState('loading', `Loading ${source.name}…`);
  let model;
  try {
    model = await load({ worker: WORKER, store: STORE, weights: $('weights').value, onProgress: progressBar(source.name) });
  } catch (e) {
    showError(e, `Could not load ${source.name}: `);
    console.warn(e);
    setBusy(false);
    return false;
  }
  $('progress').value = 1;
  const previous = demo.model;
  Object.assign(demo, { model, source, session: null, last: null });
  previous?.free();
  describe(model.info, source);
  chat.show(model);
  const record = recall(source.key);
  let restored = null;
  let reread = null; // tokens the restore read (through the state store)
  // With the state store the conversation comes back as a shared session: its history's end is
  // in the store, so appending it reads nothing — and what it makes next goes to the store too.
  // (A session restored from saved bytes stays private: it reads the store but writes nothing.)
  if (record && Array.isArray(record.history) && record.history.length > 0 && (await model.cacheStats()).store) {
    const s = model.newSession();
    try {
      reread = (await s.appendTokens(record.history)).prefilled;
      restored = s;
    } catch (e) {
      s.close();
      console.warn('webmamba demo: the conversation was not restored from the state store:', e);
    }
  }
  if (record && !restored) {
    try {
      restored = await model.restoreSession(sessionName(source.key));
    } catch (e) {
      console.warn('webmamba demo: the saved session was not restored:', e);
    }
  }
  demo.session = restored ?? model.newSession();
  showText(restored ? record : null);
  $('outcome').textContent = restored ? `Restored the saved conversation (${record.promptLength} prompt token(s) `
    + `and ${record.tokens.length} generated${reread === null ? '' : reread === 0 ? ', its state from the state store'
      : `; the state store did not cover it, ${reread} token(s) re-read`}): `
    + 'Continue or a new prompt re-read nothing that was already read.' : '';
  $('speed').textContent = '';
  setBusy(false);
  await showStats();
  const gpu = model.info.backend === 'gpu';
  // On the CPU either WebGPU is missing or the GPU backend cannot run this model (a device
  // limit, its memory, a block kind it lacks): info.adapter says which.
  const refused = model.info.adapter.startsWith('CPU fallback: the GPU cannot run this model');
  const where = gpu ? 'Ready.' : `${refused ? 'The GPU backend cannot run this model'
    : 'WebGPU is not available in this browser'}: running on the CPU (slower).`;
  setState('ready', `${restored ? 'Restored. ' : ''}${where} Write a prompt and press Generate.`);
  return true;
}

/** A folder URL in the Hugging Face layout; a Hub repository page becomes its file URL. */
function folderUrl(text) {
  const t = text.trim();
  const hub = /^https:\/\/huggingface\.co\/([^/\s]+\/[^/\s]+?)\/?$/.exec(t);
  if (hub) return `https://huggingface.co/${hub[1]}/resolve/main/`;
  return t.endsWith('/') ? t : `${t}/`;
}

async function openUrl(url) {
  const name = decodeURIComponent(url.replace(/\/resolve\/main\/$/, '').replace(/\/$/, '').split('/').pop() || url);
  return open({ key: url, name, url }, (o) => Model.fromUrl(url, o));
}

async function main() {
  $('generate').onclick = () => turn(demo, ui, 'generate');
  $('regenerate').onclick = () => turn(demo, ui, 'regenerate');
  $('continue').onclick = () => turn(demo, ui, 'continue');
  $('stop').onclick = () => demo.session?.stop();
  $('clear-store').onclick = async () => {
    setBusy(true);
    try {
      const n = await demo.model.clearStore();
      notice(`Cleared the state store: ${n} file(s) removed. Checkpoints in memory stay until the page closes.`);
    } catch (e) {
      showError(e, 'Could not clear the state store: ');
    } finally {
      setBusy(false);
      await showStore().catch((e) => showError(e));
    }
  };
  $('load-url').onclick = async () => {
    const text = $('model-url').value;
    if (!text.trim()) {
      showError(new Error('Write a model folder URL first.'));
      return;
    }
    const url = folderUrl(text);
    if (await openUrl(url)) setLastModelUrl(url);
  };
  $('model-url').onkeydown = (e) => e.key === 'Enter' && $('load-url').click();
  $('model-folder').onchange = async (e) => {
    const files = e.target.files;
    if (!files?.length) return;
    const name = files[0].webkitRelativePath.split('/')[0] || files[0].name;
    await open({ key: `folder ${name}`, name }, (o) => Model.fromFiles(files, o));
    e.target.value = '';
  };
  $('load-embedded').onclick = async () => {
    if (await open(EMBEDDED, (o) => Model.fromUrl(EMBEDDED.key, o))) setLastModelUrl(null);
  };
  const wanted = params.get('model') ?? lastModelUrl();
  if (wanted && await openUrl(folderUrl(wanted))) return;
  const failed = wanted ? $('status').textContent : '';
  if (await open(EMBEDDED, (o) => Model.fromUrl(EMBEDDED.key, o)) && failed) {
    notice(`${failed} — the embedded model was loaded instead.`);
  }
}

main().catch((e) => showError(e));
