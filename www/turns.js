// One turn of the conversation, timed and accounted for:
//   generate    edits the history to the prompt (resuming from its longest cached prefix), then
//               generates after it;
//   regenerate  rewinds to the prompt's end (its kept checkpoint) and generates again;
//   continue    generates after the history as it stands.
// What the turn re-read is counted, not assumed: the session's tokens-run counter grows by the
// tokens read plus one per generated token (each is fed to the model), so re-read = Δcounter −
// generated. The speed line shows prefill and decode tokens/s and the time to the first token.

const $ = (id) => document.getElementById(id);

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

const ms = (t) => (t < 1000 ? `${Math.round(t)} ms` : `${(t / 1000).toFixed(2)} s`);
const rate = (n, t) => `${(n / (t / 1000)).toFixed(n / (t / 1000) < 100 ? 1 : 0)} tok/s`;

function showSpeed(t) {
  const parts = [];
  if (t.reread === 0) parts.push('prefill: nothing to read (resumed)');
  else if (t.prefillMs > 0) parts.push(`prefill ${rate(t.reread, t.prefillMs)} (${t.reread} tokens in ${ms(t.prefillMs)})`);
  else parts.push(`${t.reread} token(s) re-read`);
  if (t.firstMs !== null) parts.push(`first token after ${ms(t.firstMs)}`);
  if (t.generated > 0 && t.decodeMs > 0) parts.push(`decode ${rate(t.generated, t.decodeMs)} (${t.generated} tokens)`);
  $('speed').textContent = `Last turn: ${parts.join(' · ')}`;
}

/** `#outcome`: what the turn ran through the model and where its state came from — a cached
 *  checkpoint (`fromCheckpoint`), the live state (the history already ended there) or zeros. */
function showOutcome(kind, prefilled, resumedFrom, fromCheckpoint, fromStore = false) {
  const from = resumedFrom === 0 ? 'from the start (no checkpoint)'
    : fromStore ? `resumed from the checkpoint after token ${resumedFrom}, read from this browser's state store`
    : fromCheckpoint ? `resumed from the checkpoint after token ${resumedFrom}`
      : `continuing the live state after token ${resumedFrom}`;
  const what = kind === 'continue' ? 'Continue' : 'Prompt';
  $('outcome').textContent = `${what}: ${prefilled} token(s) run through the model, ${from}.`;
  $('outcome').dataset.prefilled = String(prefilled);
  $('outcome').dataset.resumedFrom = resumedFrom > 0 ? String(resumedFrom) : '';
  $('outcome').dataset.fromStore = String(fromStore);
}

/** Runs one turn of `kind` on `demo.session`; `ui` is the page's (main.js). */
export async function turn(demo, ui, kind) {
  const { session } = demo;
  const generatedText = $('output').querySelector('.generated');
  ui.setState('generating', kind === 'continue' ? 'Generating…' : 'Reading the prompt…');
  ui.setBusy(true);
  const t0 = performance.now();
  let after; // the session's stats once the turn ended (redrawn from, not read again)
  try {
    const before = await session.stats();
    let outcome = null;
    if (kind === 'generate') {
      const prompt = $('prompt').value;
      outcome = await session.edit(prompt);
      demo.promptLength = (await session.stats()).historyLength;
      $('output').querySelector('.prompt-text').textContent = prompt;
    } else if (kind === 'regenerate') {
      outcome = await session.rewind(demo.promptLength);
    }
    const generatedFrom = outcome ? demo.promptLength : before.historyLength;
    const storeHits = async () => (outcome ? (await session.stats()).storeHits > before.storeHits : false);
    if (outcome) {
      generatedText.textContent = '';
      // The state came from where the tokens run begin (a checkpoint, the live state or zeros).
      showOutcome(kind, outcome.prefilled, generatedFrom - outcome.prefilled, outcome.resumedFrom !== undefined, await storeHits());
    }
    const t1 = performance.now();
    ui.setState('generating', 'Generating…');
    let firstMs = null;
    await session.generate(options(kind !== 'continue'), (text) => {
      firstMs ??= performance.now() - t0;
      generatedText.textContent += text;
    });
    const t2 = performance.now();
    // Every id after the prompt (onToken sees only those that complete some text).
    demo.tokens = Array.from(await session.tokens()).slice(demo.promptLength);
    $('output').dataset.tokens = demo.tokens.join(' ');
    after = await session.stats();
    const generated = after.historyLength - generatedFrom;
    const reread = Number(after.tokensPrefilled - before.tokensPrefilled) - generated;
    const resumedFrom = generatedFrom - reread;
    // A turn without an edit or rewind reads the prompt inside generate: its store hit shows there.
    const fromStore = after.storeHits > before.storeHits;
    if (!outcome) showOutcome(kind, reread, resumedFrom, reread > 0, fromStore);
    demo.last = { kind, resumedFrom, generatedFrom, end: after.historyLength, fromStore };
    showSpeed({ reread, prefillMs: outcome ? t1 - t0 : 0, firstMs, generated, decodeMs: t2 - t1 });
    await ui.save();
    // The state store's records are written after each call returns: wait for them, so that a
    // reload or another tab right after "Done" finds them.
    await demo.model.flushStore();
    ui.setState('done', `Done (${demo.model.info.backend === 'gpu' ? 'WebGPU' : 'CPU'}).`);
  } catch (e) {
    ui.showError(e);
    console.error(e);
  } finally {
    ui.setBusy(false);
    await ui.showStats(after).catch((e) => ui.showError(e));
  }
}
