#!/usr/bin/env node
// The JavaScript API as a page uses it, in every browser engine (Chromium, Firefox, WebKit:
// engines.mjs) through the npm package's entry (www/pkg/index.js, built by `npm run
// build:demo`), with the embedded default model. The model runs in the page and in a Web Worker
// (`worker: true`), on the CPU backend everywhere and on WebGPU where the engine has an adapter
// (Chromium's SwiftShader); a worker must give the same tokens as the page, and every engine
// the same greedy text. Where there is no adapter, backend "gpu" is NoAdapter and "auto" falls
// back to the CPU. Checked on each:
//   - plain-object options; `session.stream()` yields one { text, id } per token and its text
//     adds up to what `generate` returns;
//   - an AbortSignal fired after 8 pieces ends the stream there; `generate` then continues to
//     exactly the tokens of an uninterrupted greedy run (also after `break`, and after a
//     generate rejected with AbortError mid-way);
//   - the same seed with topK/topP/repetitionPenalty gives the same text, another seed other
//     text; stop strings end the text where they begin; a negative temperature is a typed error;
//   - decoding in the page yields to the event loop through one MessageChannel, not one per
//     token (WebKit keeps each one made and each costs more: decoding went quadratic there); a
//     yield's message that the engine loses pauses the generation instead of hanging it;
//   - sessions that survive a reload: save → reload → restoreSession → append prefills only the
//     new tokens and generation continues as if the page had never reloaded; another model's
//     session is StateMismatch; a full quota is a Storage error (in the page); savedSessions and
//     deleteSession;
//   - chat (in the page and in a worker): the embedded model with a ChatML template added
//     (Qwen2.5-Instruct's, tests/fixtures/chat; written next to a copy of the model at test
//     time as tokenizer_config.json, which the loader reads): model.chatTemplate, endTokens
//     (generation_config's and the eos token's ids), renderChat byte-identical to HF
//     transformers' rendering (references.json) in every engine; three session.chat turns, each
//     prefilling only its message and the template's glue, the reply the uncached run's;
//     chat.completions.create with and without stream: true (chunks adding up to the text, the
//     last with finish_reason and usage whose cached_tokens counts the reused prompt), and with
//     response_format json_schema (seeded samples that parse and follow the schema); tools:
//     tool_choice "required" gives a valid call in tool_calls, which sent back with the tool's
//     result prefills only glue and result; a named call streamed as one delta.tool_calls;
//     Qwen3.5's template on the same model: a required call in its XML format (thinking off
//     by chat_template_kwargs) reads back and, sent back, prefills only glue and result; with
//     thinking on, a reply cut inside the think block is all reasoning_content, streamed too,
//     and a JSON-constrained turn cut while thinking continues (generate) as thinking;
//     constrained text runs in free text's loop: aborted mid-way it rejects with the same
//     name, code and message, and a stop string ends it where it begins.
import { readFileSync } from 'node:fs';
import { serve } from '../../scripts/serve.mjs';
import { runEngines } from './harness.mjs';
import { writeChatModel } from './chat-model.mjs';

/** The current engine's check (runEngines gives each engine its own counts). */
let check;

/** HF transformers' greedy ids for the embedded model after 'Once upon a time' (recorded at
 *  training time): every engine's greedy run must give their first 24. */
const HF = JSON.parse(readFileSync('www/models/shakespeare-mamba-3m/hf_reference.json', 'utf8'));

/** Where the engine has no WebGPU adapter: backend "gpu" is a typed NoAdapter, "auto" falls back
 *  to the CPU and says why — in the page and in a worker. */
async function noAdapter(page) {
  for (const worker of [false, true]) {
    const r = await page.evaluate(async ({ worker }) => {
      const { Model } = window.webmamba;
      let gpu;
      try { (await Model.fromUrl('/models/shakespeare-mamba-3m/', { backend: 'gpu', cache: false, worker })).free(); gpu = 'accepted'; } catch (e) { gpu = `${e.name}:${e.code}`; }
      const auto = await Model.fromUrl('/models/shakespeare-mamba-3m/', { cache: false, worker });
      const info = auto.info;
      auto.free();
      return { gpu, auto: info.backend, adapter: info.adapter };
    }, { worker });
    const w = worker ? ' (worker)' : '';
    check(r.gpu === 'WebMambaError:NoAdapter', `no WebGPU adapter${w}: backend "gpu" is ${r.gpu}`);
    check(r.auto === 'cpu', `no WebGPU adapter${w}: backend "auto" runs on the CPU (${r.adapter})`);
  }
}

/** Every check of the API on `backend`, in the page or (`worker`) in a Web Worker. Written with
 *  `await` on every call, which works the same on both. */
async function run(page, backend, worker) {
  return page.evaluate(async ({ backend, worker }) => {
    const { Model, WorkerModel } = window.webmamba;
    const model = await Model.fromUrl('/models/shakespeare-mamba-3m/', { backend, cache: false, worker });
    const prompt = 'Once upon a time';
    const fresh = async () => { const s = model.newSession(); await s.append(prompt); return s; };
    const after = async (s, n) => Array.from(await s.tokens()).slice(n);
    const r = { backend: model.info.backend, proxy: model instanceof WorkerModel, isModel: model instanceof Model };

    // The uninterrupted greedy run.
    const whole = await fresh();
    const p = (await whole.tokens()).length;
    r.wantText = await whole.generate({ maxTokens: 24, stopAtEos: false });
    const want = await after(whole, p);
    r.wantIds = want;
    // From here on, every MessageChannel made in the page is counted: decoding yields to the
    // event loop through one channel kept for the page's life (WebKit keeps every channel made,
    // and each new one costs more: one per token made decoding quadratic there).
    const Channel = globalThis.MessageChannel;
    r.channels = 0;
    globalThis.MessageChannel = class extends Channel { constructor() { super(); r.channels += 1; } };

    // A stream, to the end: one piece per token, the same text and tokens.
    const streamed = await fresh();
    const all = [];
    for await (const piece of streamed.stream({ maxTokens: 24, stopAtEos: false })) all.push(piece);
    r.streamPieces = all.length;
    r.streamText = all.map((x) => x.text).join('');
    r.streamIds = JSON.stringify(all.map((x) => x.id)) === JSON.stringify(want);

    // Aborted after 8 pieces, then generate continues.
    const aborted = await fresh();
    const ac = new AbortController();
    const pieces = [];
    for await (const piece of aborted.stream({ maxTokens: 24, stopAtEos: false, signal: ac.signal })) {
      pieces.push(piece);
      if (pieces.length === 8) ac.abort();
    }
    r.abortedPieces = pieces.length;
    r.abortedHistory = (await after(aborted, p)).length;
    await aborted.generate({ maxTokens: 16, stopAtEos: false });
    r.abortedContinues = JSON.stringify(await after(aborted, p)) === JSON.stringify(want);

    // `break` out of a stream, then generate continues.
    const broken = await fresh();
    let n = 0;
    for await (const piece of broken.stream({ maxTokens: 24, stopAtEos: false })) { if (++n === 3) break; }
    await broken.generate({ maxTokens: 21, stopAtEos: false });
    r.breakContinues = JSON.stringify(await after(broken, p)) === JSON.stringify(want);

    // generate with a signal fired mid-way rejects with AbortError; generate again continues.
    const interrupted = await fresh();
    const ac2 = new AbortController();
    let seen = 0;
    try {
      await interrupted.generate({ maxTokens: 24, stopAtEos: false, signal: ac2.signal,
        onToken: () => { if (++seen === 5) ac2.abort(); } });
      r.abortError = 'resolved';
    } catch (e) {
      r.abortError = e.name;
    }
    const kept = (await after(interrupted, p)).length;
    await interrupted.generate({ maxTokens: 24 - kept, stopAtEos: false });
    r.interruptedContinues = JSON.stringify(await after(interrupted, p)) === JSON.stringify(want);

    // Seeds with top-k / top-p / repetition penalty.
    const sample = async (seed) => (await fresh()).generate({ maxTokens: 40, temperature: 0.9, topK: 20,
      topP: 0.9, repetitionPenalty: 1.2, seed, stopAtEos: false });
    r.seedA = await sample(3);
    r.seedAgain = await sample(3);
    r.seedB = await sample(4);

    // fork(): two branches with their own seeds each give the uncached run's text; the parent
    // goes on as if it had not been forked, and nothing is read again.
    const parent = await fresh();
    const [forkA, forkB] = [parent.fork(), parent.fork()];
    r.forkHistory = JSON.stringify(Array.from(await forkA.tokens())) === JSON.stringify(Array.from(await parent.tokens()));
    r.forkA = await forkA.generate({ maxTokens: 40, temperature: 0.9, topK: 20, topP: 0.9, repetitionPenalty: 1.2, seed: 3, stopAtEos: false });
    r.forkB = await forkB.generate({ maxTokens: 40, temperature: 0.9, topK: 20, topP: 0.9, repetitionPenalty: 1.2, seed: 4, stopAtEos: false });
    r.forkPrefilled = (await forkA.stats()).tokensPrefilled;
    r.parentRead = (await parent.append('')).prefilled;
    r.parentText = await parent.generate({ maxTokens: 24, stopAtEos: false });

    // Stop strings: the text ends where the first one begins.
    const stop = r.wantText.slice(12, 15);
    r.stop = stop;
    r.stopped = await (await fresh()).generate({ maxTokens: 24, stopAtEos: false, stop: ['§§', stop] });
    r.stopWant = r.wantText.slice(0, r.wantText.indexOf(stop));

    try { await (await fresh()).generate({ temperature: -1 }); r.negative = 'accepted'; } catch (e) { r.negative = `${e.name}:${e.code}`; }
    globalThis.MessageChannel = Channel;
    // A message the engine loses between tokens (Safari has been seen to) pauses the generation
    // for a second; it does not hang it. Here the page's MessagePorts drop the third message.
    if (!worker) {
      const post = MessagePort.prototype.postMessage;
      let sent = 0;
      r.dropped = 0;
      MessagePort.prototype.postMessage = function (...args) {
        if (++sent === 3) { r.dropped += 1; return undefined; }
        return post.apply(this, args);
      };
      try {
        const s = await fresh();
        await s.generate({ maxTokens: 6, stopAtEos: false });
        r.lostMessage = JSON.stringify(await after(s, p)) === JSON.stringify(want.slice(0, 6));
      } finally {
        MessagePort.prototype.postMessage = post;
      }
    }
    model.free();
    return r;
  }, { backend, worker });
}

/** Worker mode's own cases: the page keeps running during a long CPU prefill in the worker
 *  (compared side by side with the same prefill in the page), errors cross typed, concurrent
 *  calls are Busy as in the page, and a freed model's calls reject instead of hanging. */
async function workerEdges(page) {
  const r = await page.evaluate(async () => {
    const { Model } = window.webmamba;
    const code = async (p) => { try { await p; return 'accepted'; } catch (e) { return `${e.name}:${e.code}`; } };
    const out = {};
    // The longest gap between the page's timer ticks while `work` runs, and its duration.
    const gaps = async (work) => {
      let last = performance.now(), longest = 0, ticking = true;
      const tick = () => { const now = performance.now(); longest = Math.max(longest, now - last); last = now; if (ticking) setTimeout(tick, 0); };
      setTimeout(tick, 0);
      const t0 = performance.now();
      await work();
      ticking = false;
      longest = Math.max(longest, performance.now() - last); // a pause still going on counts
      return { longest: Math.round(longest), total: Math.round(performance.now() - t0) };
    };
    // A page's timer lands between tokens: stop() from a setTimeout ends a long generation early.
    for (const worker of [false, true]) {
      const model = await Model.fromUrl('/models/shakespeare-mamba-3m/', { backend: 'cpu', cache: false, worker });
      const s = model.newSession();
      await s.append('Once');
      setTimeout(() => s.stop(), 30);
      await s.generate({ maxTokens: 3000, stopAtEos: false });
      out[worker ? 'timerStopWorker' : 'timerStop'] = (await s.tokens()).length;
      model.free();
    }
    const text = 'Now is the winter of our discontent made glorious summer by this sun of York. '.repeat(24);
    for (const worker of [false, true]) {
      const model = await Model.fromUrl('/models/shakespeare-mamba-3m/', { backend: 'cpu', cache: false, worker });
      const s = model.newSession();
      out[worker ? 'worker' : 'page'] = await gaps(() => s.append(text));
      model.free();
    }
    out.missing = await code(Model.fromUrl('/nowhere/', { cache: false, worker: true }));
    out.missingInPage = await code(Model.fromUrl('/nowhere/', { cache: false }));
    const RealWorker = window.Worker; // a worker script that cannot load (a CDN outage, a CSP)
    window.Worker = class extends RealWorker { constructor(url, o) { super('/no-such-worker.js', o); } };
    try { out.deadWorker = await code(Model.fromUrl('/models/shakespeare-mamba-3m/', { worker: true })); } finally { window.Worker = RealWorker; }
    // A callback that throws is the page's bug: logged; the load goes on, the generation stops.
    const model = await Model.fromUrl('/models/shakespeare-mamba-3m/', { cache: false, worker: true,
      onProgress: () => { throw new Error('a broken progress bar'); } });
    const s = model.newSession();
    await s.append('Once');
    out.throwingOnToken = (await s.generate({ maxTokens: 20, stopAtEos: false, onToken: () => { throw new Error('x'); } })).length > 0;
    const first = s.generate({ maxTokens: 8 });
    out.busy = await code(s.generate({ maxTokens: 8 }));
    await first;
    out.closed = (s.close(), await code(s.text()));
    const t = model.newSession();
    const pending = t.append('Once upon a time');
    model.free();
    out.freed = [await code(pending), await code(t.generate()), await code(model.encode('x'))];
    return out;
  });
  check(r.worker.longest < r.page.longest / 2,
    `worker: during a CPU prefill of 400+ tokens the page's longest pause is ${r.worker.longest} ms of ${r.worker.total} (in the page: ${r.page.longest} ms of ${r.page.total})`);
  check(r.timerStop < 3000 && r.timerStopWorker < 3000,
    `stop() from a page timer 30 ms into a 3,000-token generation ends it between tokens (in the page at ${r.timerStop} tokens, in a worker at ${r.timerStopWorker})`);
  check(r.missing === r.missingInPage && r.missing.endsWith(':Io'), `worker: a folder that is not there is ${r.missing}, as in the page`);
  check(r.deadWorker === 'WebMambaError:Worker', `worker: a worker that cannot start rejects the load with ${r.deadWorker}`);
  check(r.throwingOnToken, 'worker: a throwing onProgress does not stop the load, a throwing onToken ends the generation with its text');
  check(r.busy === 'WebMambaError:Busy', `worker: a second call while one runs is ${r.busy}, as in the page`);
  check(r.closed === 'WebMambaError:NoSession', `worker: a closed session's calls are ${r.closed}`);
  check(r.freed.every((c) => c === 'WebMambaError:NoSession'), `worker: after free(), the call in flight and later ones reject: ${r.freed}`);
}

/** save in one page, restore after a reload (the model in the page, or in a worker). */
async function saved(page, worker) {
  const before = await page.evaluate(async ({ worker }) => {
    const { Model } = window.webmamba;
    const model = await Model.fromUrl('/models/shakespeare-mamba-3m/', { cache: false, worker });
    for (const n of await model.savedSessions()) await model.deleteSession(n);
    const s = model.newSession();
    await s.append('Once upon a time');
    await s.generate({ maxTokens: 6, stopAtEos: false });
    await s.save('chat');
    // What the page would have done without a reload: continue the same session.
    await s.append(' and then');
    await s.generate({ maxTokens: 8, stopAtEos: false });
    let quota = 'not tried';
    if (!worker) { // the worker's IndexedDB is out of this page's reach
      const put = IDBObjectStore.prototype.put;
      IDBObjectStore.prototype.put = () => { throw new DOMException('the quota is full (simulated)', 'QuotaExceededError'); };
      try { await s.save('other'); quota = 'accepted'; } catch (e) { quota = `${e.code}: ${e.message}`; } finally { IDBObjectStore.prototype.put = put; }
    }
    const r = { tokens: Array.from(await s.tokens()), names: await model.savedSessions(), quota };
    model.free();
    return r;
  }, { worker });
  await page.reload();
  const after = await page.evaluate(async ({ worker }) => {
    const { Model } = window.webmamba;
    const model = await Model.fromUrl('/models/shakespeare-mamba-3m/', { cache: false, worker });
    const r = await model.restoreSession('chat');
    const restored = (await r.tokens()).length;
    const outcome = await r.append(' and then');
    const added = (await model.encode(' and then')).length;
    await r.generate({ maxTokens: 8, stopAtEos: false });
    const code = async (f) => { try { await f(); return 'accepted'; } catch (e) { return e.code; } };
    const other = await Model.fromUrl('/fixtures/tiny-f32/', { cache: false, worker });
    const result = { tokens: Array.from(await r.tokens()), restored, prefilled: outcome.prefilled, added,
      foreign: await code(() => other.restoreSession('chat')), missing: await code(() => model.restoreSession('nope')),
      deleted: await model.deleteSession('chat'), names: await model.savedSessions() };
    model.free();
    other.free();
    return result;
  }, { worker });
  const w = worker ? ' (worker)' : '';
  check(JSON.stringify(before.names) === '["chat"]', `save${w}: savedSessions() lists ${JSON.stringify(before.names)}`);
  if (!worker) check(/^Storage: .*QuotaExceededError/.test(before.quota), `save into a full quota: ${before.quota}`);
  check(after.prefilled === after.added && after.added > 0,
    `after a reload${w}, restoreSession(${after.restored} tokens) then append prefills only the ${after.added} new tokens (${after.prefilled})`);
  check(JSON.stringify(after.tokens) === JSON.stringify(before.tokens), `and generation continues as if the page had not reloaded${w}`);
  check(after.foreign === 'StateMismatch' && after.missing === 'InvalidInput', `another model's session${w}: ${after.foreign}; a name never saved: ${after.missing}`);
  check(after.deleted === true && after.names.length === 0, `deleteSession forgets it${w}`);
}

/** Chat through the package, in the page or in a worker (see the header). */
async function chat(page, worker) {
  const refs = JSON.parse(readFileSync('tests/fixtures/chat/references.json', 'utf8'))
    .cases.filter((c) => c.template === 'chatml-qwen2.5-instruct' && c.rendered)
    .map((c) => ({ ...c, context: JSON.stringify(c.context) }));
  const r = await page.evaluate(async ({ worker, refs }) => {
    const { Model } = window.webmamba;
    // Where this section is, for a run that stops here (the harness reads it).
    const step = (what) => { window.__step = `chat${worker ? ' (worker)' : ''}: ${what}`; };
    step('load');
    const model = await Model.fromUrl('/chat-model/', { backend: 'cpu', cache: false, worker });
    step('renderChat');
    const out = { template: (model.chatTemplate ?? '').startsWith('{%- if tools %}'), endTokens: Array.from(model.endTokens) };
    // renderChat: HF's renderings (its contexts' special tokens go in as template variables).
    out.rendered = [];
    // The contexts cross into the page as JSON text: a WebDriver engine's argument passing may
    // reorder object keys (Firefox's does), and tojson prints them in order.
    for (const { case: name, context: text, rendered } of refs) {
      const { messages, tools, documents, add_generation_prompt: addGenerationPrompt, ...templateArgs } = JSON.parse(text);
      const got = await model.renderChat({ messages, tools, documents, addGenerationPrompt, templateArgs });
      let at = 0;
      while (at < got.length && got[at] === rendered[at]) at += 1;
      out.rendered.push([name, got === rendered, got === rendered ? '' : `at ${at}: ${JSON.stringify(got.slice(at - 20, at + 40))} vs HF ${JSON.stringify(rendered.slice(at - 20, at + 40))}`]);
    }
    // Three turns on one session; the glue and message of each turn counted from the format.
    const s = model.newSession();
    const messages = [{ role: 'system', content: 'You are a player.' }];
    out.turns = [];
    for (const text of ['Good morrow.', 'What news?', 'Farewell.']) {
      messages.push({ role: 'user', content: text });
      step(`turn ${out.turns.length + 1}`);
      const before = (await s.tokens()).length;
      const turn = await s.chat({ messages, maxTokens: 6 });
      const glue = (await model.encode(`<|im_end|>\n<|im_start|>user\n${text}<|im_end|>\n<|im_start|>assistant\n`)).length;
      // Uncached: a fresh session fed the same history generates the same reply.
      const fresh = model.newSession();
      await fresh.appendTokens(Array.from(await s.tokens()).slice(0, turn.promptTokens));
      const again = await fresh.generate({ maxTokens: 6 });
      fresh.close();
      out.turns.push({ ...(turn.toJSON?.() ?? turn), before, glue, again });
      messages.push({ role: 'assistant', content: turn.text });
    }
    // OpenAI-shaped: a new conversation, then its continuation streamed.
    const ask = [{ role: 'system', content: 'You are a player.' }, { role: 'user', content: 'Speak.' }];
    step('chat.completions.create');
    const done = await model.chat.completions.create({ messages: ask, max_tokens: 6, temperature: 0 });
    out.completion = { object: done.object, content: done.choices[0].message.content, finish: done.choices[0].finish_reason, usage: done.usage };
    const chunks = [];
    const next = [...ask, { role: 'assistant', content: done.choices[0].message.content }, { role: 'user', content: 'Again.' }];
    for await (const c of await model.chat.completions.create({ messages: next, max_tokens: 6, temperature: 0, stream: true })) chunks.push(c);
    out.chunks = chunks.map((c) => ({ object: c.object, delta: c.choices[0].delta, finish: c.choices[0].finish_reason, usage: c.usage }));
    // Structured output: three seeded samples under a JSON schema parse and follow it.
    const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer', minimum: 0, maximum: 99 } },
      required: ['name', 'age'], additionalProperties: false };
    out.json = [];
    for (const seed of [1, 2, 3]) {
      step(`response_format, seed ${seed}`);
      const r = await model.chat.completions.create({ messages: ask, max_tokens: 80, temperature: 1, seed,
        response_format: { type: 'json_schema', json_schema: { name: 'player', schema } } });
      out.json.push(r.choices[0].message.content);
    }
    // A constrained generate stopped by maxTokens inside the JSON, then continued by a generate
    // with the same format; the same after a chat turn.
    const rf = { type: 'json_schema', json_schema: { schema } };
    step('responseFormat continued');
    const g = model.newSession();
    await g.append('The record of the player:');
    const part = await g.generate({ maxTokens: 4, temperature: 1, seed: 9, responseFormat: rf });
    out.continued = [part, part + await g.generate({ maxTokens: 120, temperature: 1, responseFormat: rf })];
    const t1 = await g.chat({ messages: ask, maxTokens: 4, temperature: 1, seed: 2, responseFormat: rf });
    out.chatContinued = [t1.text, t1.text + await g.generate({ maxTokens: 120, temperature: 1, responseFormat: rf }), t1.finishReason];
    g.close();
    // One loop for free and constrained text: a constrained generate aborted mid-way rejects as
    // a free one does (one name, code and message), and a stop string ends a constrained text
    // where it first begins, as it ends free text.
    step('responseFormat aborted, and stopped by a stop string');
    const aborted = async (extra) => {
      const s = model.newSession();
      await s.append('The record of the player:');
      const ac = new AbortController();
      let seen = 0;
      try {
        await s.generate({ maxTokens: 40, temperature: 1, seed: 9, signal: ac.signal, ...extra,
          onToken: () => { if (++seen === 3) ac.abort(); } });
        return 'resolved';
      } catch (e) {
        return `${e.name}/${e.code}: ${e.message}`;
      } finally {
        s.close();
      }
    };
    out.abortFree = await aborted({});
    out.abortConstrained = await aborted({ responseFormat: rf });
    const sg = model.newSession();
    await sg.append('The record of the player:');
    const p0 = (await sg.tokens()).length;
    const whole = await sg.generate({ maxTokens: 120, temperature: 1, seed: 5, responseFormat: rf });
    const mid = Math.floor(whole.length / 2);
    const stopAt = whole.slice(mid, mid + 3);
    await sg.rewind(p0);
    const cut = await sg.generate({ maxTokens: 120, temperature: 1, seed: 5, responseFormat: rf, stop: [stopAt] });
    out.constrainedStop = { whole, stopAt, cut };
    sg.close();
    // Tools: a required call in the template's format, sent back with the tool's result (only
    // the glue and the result are prefilled: the call re-renders as the model wrote it), a
    // named call streamed, and the requests that cannot be met.
    const tools = [{ type: 'function', function: { name: 'get_weather', description: 'The weather in a city.',
      parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'], additionalProperties: false } } },
    { type: 'function', function: { name: 'add', parameters: { type: 'object', properties: { a: { type: 'integer' } } } } }];
    const q = [{ role: 'user', content: 'What is the weather in Verona?' }];
    step('tools');
    const called = await model.chat.completions.create({ messages: q, tools, tool_choice: 'required', parallel_tool_calls: false, max_tokens: 160, temperature: 1, seed: 5 });
    const m = called.choices[0].message;
    out.tools = { finish: called.choices[0].finish_reason, message: m, format: model.toolCallFormat };
    const back = [...q, m, { role: 'tool', tool_call_id: m.tool_calls?.[0]?.id, content: '{"temperature": 21}' }];
    const after = await model.chat.completions.create({ messages: back, tools, max_tokens: 4, temperature: 0 });
    out.tools.back = { usage: after.usage, glue: (await model.encode('<|im_end|>\n<|im_start|>user\n<tool_response>\n{"temperature": 21}\n</tool_response><|im_end|>\n<|im_start|>assistant\n')).length };
    const streamed = [];
    for await (const c of await model.chat.completions.create({ messages: q, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } },
      parallel_tool_calls: false, max_tokens: 160, temperature: 1, seed: 6, stream: true })) streamed.push({ delta: c.choices[0].delta, finish: c.choices[0].finish_reason });
    out.tools.streamed = streamed;
    const code = async (f) => { try { await f(); return 'accepted'; } catch (e) { return e.code; } };
    step('refusals');
    out.tools.refused = [await code(() => model.chat.completions.create({ messages: q, tool_choice: 'required' })),
      await code(() => model.chat.completions.create({ messages: q, tools, tool_choice: 'required', response_format: { type: 'json_object' } })),
      await code(() => model.chat.completions.create({ messages: q, tools, tool_choice: { type: 'function', function: { name: 'nope' } } }))];
    // Qwen3.5's template on the same model: XML-style calls, and thinking (on by default).
    step('qwen3.5');
    const qm = await Model.fromUrl('/chat-model-qwen35/', { backend: 'cpu', cache: false, worker });
    const off = { enable_thinking: false };
    const q35 = await qm.chat.completions.create({ messages: q, tools, tool_choice: 'required', parallel_tool_calls: false, max_tokens: 160, temperature: 1, seed: 5, chat_template_kwargs: off });
    const m35 = q35.choices[0].message;
    out.qwen35 = { format: qm.toolCallFormat, finish: q35.choices[0].finish_reason, message: m35 };
    const back35 = [...q, m35, { role: 'tool', tool_call_id: m35.tool_calls?.[0]?.id, content: '{"temperature": 21}' }];
    const after35 = await qm.chat.completions.create({ messages: back35, tools, max_tokens: 4, temperature: 0, chat_template_kwargs: off });
    out.qwen35.back = { usage: after35.usage,
      glue: (await qm.encode('<|im_end|>\n<|im_start|>user\n<tool_response>\n{"temperature": 21}\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n')).length };
    // Thinking on: this model never closes the block, so 12 tokens are all reasoning.
    const thought = await qm.chat.completions.create({ messages: q, max_tokens: 12, temperature: 1, seed: 7 });
    out.qwen35.thought = { message: thought.choices[0].message, finish: thought.choices[0].finish_reason };
    const parts = [];
    for await (const c of await qm.chat.completions.create({ messages: q, max_tokens: 12, temperature: 1, seed: 7, stream: true })) parts.push(c.choices[0].delta);
    out.qwen35.streamed = parts;
    // A constrained turn cut inside its thinking, continued by generate with the same
    // responseFormat: it goes on as thinking (the JSON comes after </think>), not as JSON.
    const sq = qm.newSession();
    const cutTurn = await sq.chat({ messages: q, responseFormat: { type: 'json_object' }, maxTokens: 4, temperature: 1, seed: 3 });
    const more = await sq.generate({ responseFormat: { type: 'json_object' }, maxTokens: 6, temperature: 1, seed: 4 });
    out.qwen35.continued = { reasoning: cutTurn.reasoning, finish: cutTurn.finishReason, more };
    sq.close();
    qm.free();
    try { await model.chat.completions.create({ messages: ask, response_format: { type: 'xml' } }); out.format = 'accepted'; } catch (e) { out.format = e.code; }
    try { await s.chat({ messages: [], chatTemplate: '{{ raise_exception("no") }}' }); out.raised = 'accepted'; } catch (e) { out.raised = `${e.code}: ${e.message}`; }
    model.free();
    step('done');
    return out;
  }, { worker, refs });
  const w = worker ? ' (worker)' : '';
  check(r.template && JSON.stringify(r.endTokens) === '[0]', `chat${w}: the loader read tokenizer_config.json's template and the end tokens (${JSON.stringify(r.endTokens)})`);
  check(r.rendered.length >= 9 && r.rendered.every(([, ok]) => ok), `chat${w}: renderChat is HF's rendering for ${r.rendered.length} conversations (${r.rendered.filter(([, ok]) => !ok).map(([n, , why]) => `${n} ${why}`).join('; ') || 'all equal'})`);
  r.turns.forEach((t, k) => {
    check(t.prefilled === (k === 0 ? t.promptTokens : t.glue) && t.cachedTokens === t.promptTokens - t.prefilled && t.before === (k === 0 ? 0 : t.promptTokens - t.glue),
      `chat${w}: turn ${k + 1} prefills ${t.prefilled} of ${t.promptTokens} prompt tokens (${k === 0 ? 'all' : `its message and glue: ${t.glue}`})`);
    check(t.text === t.again && t.completionTokens <= 6 && t.finishReason === (t.completionTokens === 6 ? 'length' : 'stop'),
      `chat${w}: turn ${k + 1}'s reply is the uncached run's (${JSON.stringify(t.text)}, ${t.completionTokens} tokens, ${t.finishReason})`);
  });
  const c = r.completion;
  const n = c.usage.completion_tokens;
  check(c.object === 'chat.completion' && c.finish === (n === 6 ? 'length' : 'stop') && n <= 6
    && c.usage.total_tokens === c.usage.prompt_tokens + n, `chat.completions.create${w}: ${JSON.stringify(c.content)}, usage ${JSON.stringify(c.usage)}`);
  const text = r.chunks.map((x) => x.delta.content ?? '').join('');
  const last = r.chunks.at(-1);
  check(r.chunks.every((x) => x.object === 'chat.completion.chunk') && r.chunks[0].delta.role === 'assistant' && last.finish !== null
    && r.chunks.slice(0, -1).every((x) => x.finish === null && !x.usage), `chat.completions.create stream${w}: ${r.chunks.length} chunks, the last with finish_reason ${last.finish}`);
  check(last.usage.completion_tokens <= 6 && last.usage.prompt_tokens_details.cached_tokens >= c.usage.prompt_tokens + n,
    `chat.completions.create stream${w}: ${JSON.stringify(text)}; the continuation reuses the first conversation's ${last.usage.prompt_tokens_details.cached_tokens} prompt tokens (of ${last.usage.prompt_tokens})`);
  const follows = (text) => {
    try {
      const v = JSON.parse(text);
      return JSON.stringify(Object.keys(v)) === '["name","age"]' && typeof v.name === 'string' && v.name.length <= 10
        && Number.isInteger(v.age) && v.age >= 0 && v.age <= 99;
    } catch { return false; }
  };
  check(r.json.length === 3 && r.json.every(follows), `chat.completions.create${w}: response_format json_schema: ${JSON.stringify(r.json)}`);
  check(r.format === 'InvalidInput', `chat.completions.create${w}: response_format { type: "xml" } is ${r.format}`);
  const unfinished = (text) => { try { JSON.parse(text); return false; } catch { return true; } };
  check(unfinished(r.continued[0]) && follows(r.continued[1]),
    `session.generate${w}: responseFormat stopped inside the JSON (${JSON.stringify(r.continued[0])}) and continued: ${JSON.stringify(r.continued[1])}`);
  check(unfinished(r.chatContinued[0]) && r.chatContinued[2] === 'length' && follows(r.chatContinued[1]),
    `session.chat${w}: a constrained turn stopped by maxTokens (${JSON.stringify(r.chatContinued[0])}), continued by generate: ${JSON.stringify(r.chatContinued[1])}`);
  check(r.abortFree.startsWith('AbortError/Aborted: ') && r.abortConstrained === r.abortFree,
    `session.generate${w}: aborted mid-way, constrained (${r.abortConstrained}) as free (${r.abortFree})`);
  const cs = r.constrainedStop;
  check(follows(cs.whole) && cs.stopAt.length === 3 && cs.cut === cs.whole.slice(0, cs.whole.indexOf(cs.stopAt)),
    `session.generate${w}: a stop string ${JSON.stringify(cs.stopAt)} ends constrained text ${JSON.stringify(cs.whole)} where it begins: ${JSON.stringify(cs.cut)}`);
  const t = r.tools;
  const call = t.message.tool_calls?.[0];
  const weather = (c) => {
    try {
      const a = JSON.parse(c.function.arguments);
      return c.type === 'function' && c.id.startsWith('call_') && c.function.name === 'get_weather'
        && JSON.stringify(Object.keys(a)) === '["city"]' && typeof a.city === 'string' && a.city.length <= 12;
    } catch { return false; }
  };
  check(t.format?.open === '<tool_call>' && t.format?.close === '</tool_call>' && t.finish === 'tool_calls' && t.message.content === null
    && t.message.tool_calls.length === 1 && weather(call), `chat.completions.create${w}: tool_choice "required" calls ${JSON.stringify(t.message.tool_calls)} (${t.finish})`);
  const u = t.back.usage;
  check(u.prompt_tokens - u.prompt_tokens_details.cached_tokens === t.back.glue,
    `chat.completions.create${w}: the call sent back with the tool's result prefills only ${u.prompt_tokens - u.prompt_tokens_details.cached_tokens} tokens (glue and result: ${t.back.glue}) of ${u.prompt_tokens}`);
  const withCalls = t.streamed.filter((c) => c.delta.tool_calls);
  check(t.streamed.every((c) => !c.delta.content) && withCalls.length === 1 && withCalls[0].delta.tool_calls.length === 1
    && withCalls[0].delta.tool_calls[0].index === 0 && weather(withCalls[0].delta.tool_calls[0]) && t.streamed.at(-1).finish === 'tool_calls',
  `chat.completions.create stream${w}: a named tool call comes as one delta.tool_calls, no content (${JSON.stringify(withCalls.map((c) => c.delta.tool_calls))})`);
  check(JSON.stringify(t.refused) === '["InvalidInput","InvalidInput","InvalidInput"]',
    `chat.completions.create${w}: tool_choice without tools, with response_format, naming no tool: ${t.refused}`);
  const added = (c) => {
    try {
      const a = JSON.parse(c.function.arguments);
      return c.type === 'function' && c.function.name === 'add' && Object.keys(a).every((k) => k === 'a') && (a.a === undefined || Number.isInteger(a.a));
    } catch { return false; }
  };
  const qw = r.qwen35;
  const c35 = qw.message.tool_calls?.[0];
  check(qw.format?.arguments === 'xml' && qw.finish === 'tool_calls' && qw.message.content === null && qw.message.reasoning_content === undefined
    && qw.message.tool_calls.length === 1 && (weather(c35) || added(c35)),
  `chat.completions.create${w}: Qwen3.5's template (thinking off by chat_template_kwargs): a required call in its XML format reads back as ${JSON.stringify(qw.message.tool_calls)} (${qw.finish})`);
  const u35 = qw.back.usage;
  check(u35.prompt_tokens - u35.prompt_tokens_details.cached_tokens === qw.back.glue,
    `chat.completions.create${w}: Qwen3.5's XML call sent back with the result prefills only ${u35.prompt_tokens - u35.prompt_tokens_details.cached_tokens} tokens (glue and result: ${qw.back.glue}) of ${u35.prompt_tokens}`);
  const tm = qw.thought.message;
  const streamedReasoning = qw.streamed.map((d) => d.reasoning_content ?? '').join('');
  check(qw.thought.finish === 'length' && tm.content === '' && typeof tm.reasoning_content === 'string' && tm.reasoning_content.length > 0
    && tm.reasoning_content === tm.reasoning_content.trim(),
  `chat.completions.create${w}: Qwen3.5 thinking (its default): a reply cut inside the think block is all reasoning_content (${JSON.stringify(tm.reasoning_content)}), content ''`);
  check(streamedReasoning === tm.reasoning_content && qw.streamed.every((d) => !d.content),
    `chat.completions.create stream${w}: the same reply streams as delta.reasoning_content (${qw.streamed.filter((d) => d.reasoning_content).length} deltas), no content`);
  const qc = qw.continued;
  check(qc.finish === 'length' && qc.reasoning.length > 0 && qc.more.length > 0 && !qc.more.trimStart().startsWith('{'),
    `session.chat + generate${w}: a Qwen3.5 turn constrained to JSON, cut inside its thinking (${JSON.stringify(qc.reasoning)}), continues as thinking: ${JSON.stringify(qc.more)}`);
  check(r.raised.startsWith('Template: ') && r.raised.includes('no'), `chat${w}: the template's raise_exception is a Template error (${r.raised})`);
}

const server = await serve('tests/browser', 0,
  { mounts: { '/pkg/': process.env.WEBMAMBA_PKG ?? 'www/pkg', '/models/': 'www/models', '/fixtures/': 'tests/fixtures', '/chat-model/': writeChatModel(),
    '/chat-model-qwen35/': writeChatModel('chat-model-qwen35', 'qwen3.5') } });
const base = `http://127.0.0.1:${server.address().port}`;
try {
  await runEngines('api', base, async ({ page, webgpu, check: engineCheck }) => {
    check = engineCheck;
    if (process.env.WEBMAMBA_API_ONLY === 'chat') { // the chat checks alone, while working on them
      await chat(page, false);
      await chat(page, true);
      return { worker: true, sessionStore: 'not checked (WEBMAMBA_API_ONLY=chat)' };
    }
    // WebGPU where the engine offers it; the CPU backend in the page and in a worker everywhere.
    const variants = webgpu ? [['gpu', false], ['cpu', false], ['gpu', true], ['cpu', true]] : [['cpu', false], ['cpu', true]];
    const runs = {};
    for (const [backend, worker] of variants) {
      const r = await run(page, backend, worker);
      const b = `${backend} (${r.backend}${worker ? ', worker' : ''})`;
      runs[`${backend}${worker ? ' worker' : ''}`] = r;
      check(r.backend === backend, `${b}: runs where asked`);
      check(r.proxy === worker && r.isModel, `${b}: ${worker ? 'a WorkerModel' : 'an in-page model'}, and instanceof Model`);
      check(r.streamPieces === 24 && r.streamIds && r.streamText === r.wantText,
        `${b}: stream yields 24 pieces whose ids and text equal generate's (${JSON.stringify(r.wantText)})`);
      check(r.abortedPieces === 8 && r.abortedHistory === 8, `${b}: an AbortSignal fired after 8 pieces ends the stream there (${r.abortedPieces} pieces, ${r.abortedHistory} tokens fed)`);
      check(r.abortedContinues, `${b}: generate after the abort continues to the uninterrupted run's tokens`);
      check(r.breakContinues, `${b}: generate after a break continues to the uninterrupted run's tokens`);
      check(r.abortError === 'AbortError' && r.interruptedContinues, `${b}: generate aborted mid-way rejects with ${r.abortError}, and continues exactly`);
      check(r.seedA === r.seedAgain && r.seedA !== r.seedB, `${b}: seed 3 twice gives the same text (${JSON.stringify(r.seedA.slice(0, 40))}…), seed 4 another`);
      check(r.forkHistory && r.forkA === r.seedA && r.forkB === r.seedB && r.forkPrefilled === 40,
        `${b}: two forks with seeds 3 and 4 give the uncached runs' texts, each reading only its own 40 tokens (${r.forkPrefilled})`);
      check(r.parentRead === 0 && r.parentText === r.wantText, `${b}: the forked session reads nothing again and goes on as the uninterrupted run`);
      check(r.stopped === r.stopWant, `${b}: stop ${JSON.stringify(r.stop)} ends the text where it begins (${JSON.stringify(r.stopped)})`);
      check(r.negative === 'WebMambaError:InvalidInput', `${b}: a negative temperature is ${r.negative}`);
      if (!worker) check(r.dropped === 1 && r.lostMessage, `${b}: a yield's message lost between tokens pauses the generation, which ends with the uninterrupted run's tokens (${r.dropped} dropped)`);
      if (!worker) check(r.channels === 0, `${b}: the 340 tokens decoded after the first generate made no new MessageChannel (${r.channels})`);
    }
    for (const [name, r] of Object.entries(runs).filter(([k]) => k.endsWith(' worker'))) {
      const inPage = runs[name.replace(' worker', '')];
      check(JSON.stringify(r.wantIds) === JSON.stringify(inPage.wantIds) && r.wantText === inPage.wantText,
        `worker: true gives the same greedy tokens as the in-page model (${name})`);
      check(r.seedA === inPage.seedA, `worker: true gives the same seeded text as the in-page model (${name})`);
    }
    if (runs.gpu) check(runs.gpu.seedA === runs.cpu.seedA, 'the same seed gives the same sampled text on WebGPU and on the CPU');
    else await noAdapter(page);
    for (const [name, r] of Object.entries(runs)) {
      check(HF.prompt === 'Once upon a time' && JSON.stringify(r.wantIds) === JSON.stringify(HF.greedy_ids.slice(0, 24)),
        `${name}: greedy ids are HF transformers' (${JSON.stringify(r.wantIds)})`);
    }
    await workerEdges(page);
    await chat(page, false);
    await chat(page, true);
    await saved(page, false);
    await saved(page, true);
    return { worker: true, sessionStore: true };
  });
} finally {
  server.close();
}
