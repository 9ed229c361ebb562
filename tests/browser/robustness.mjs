#!/usr/bin/env node
// The malformed-input matrix in every browser engine (Chromium, Firefox, WebKit: engines.mjs),
// through the npm package (www/pkg, built by `npm run build:demo`), on the CPU backend in the
// page and in a Web Worker (`worker: true`), and on WebGPU (page and worker) where the engine has
// an adapter (Chromium's SwiftShader):
//   - every API entry (chat's too) called with wrong-typed and out-of-range arguments (the
//     `integrity` option's malformed values among them), damaged model folders
//     (written here from the tiny-f32 fixture) and damaged or foreign exported states;
//   - each case must fail with a WebMambaError of the expected `code` — not a TypeError from the
//     bindings, not a silent coercion, not a trap, and within 60 s (no promise left unsettled);
//   - after each case, a session that worked before still generates the same tokens (rewound
//     to its prompt, greedy);
//   - a model whose finite weights overflow at run time (written here): NonFiniteOutput from
//     generate and logits(), and a rewind before the overflow generates again;
//   - a tokenizer whose text cannot be streamed (written here): generate and a stream both end
//     with a Tokenizer error, the tokens generated staying in the history, the stream done after;
//   - a lost GPU device (the page destroys the model's GPUDevice): every call is DeviceLost, and
//     the documented recovery — load the model again, importState the exported bytes —
//     continues with the uninterrupted run's tokens;
//   - chat templates that grow a string, list or map without end (tests/fixtures/chat/
//     memory-bombs.json, issue 54), through chat() and renderChat(): each a Template error naming
//     the memory limit within 5 s, and the session's next chat turn works.
//   - structured-output grammar errors (a recursive or dangling $ref, a bad pattern or regex, an
//     unsupported keyword, strict: true on an open object, a tool's bad parameters): InvalidInput
//     in one line under 300 characters saying what and where, no engine state, `detail` kept.
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { serve } from '../../scripts/serve.mjs';
import { runEngines } from './harness.mjs';

/** Damaged copies of tests/fixtures/tiny-f32 under `root`, one folder per case. */
function writeDamagedFolders(root) {
  rmSync(root, { recursive: true, force: true });
  const src = 'tests/fixtures/tiny-f32';
  const weights = readFileSync(`${src}/model.safetensors`);
  const headerLen = Number(weights.readBigUInt64LE(0));
  const header = JSON.parse(weights.subarray(8, 8 + headerLen).toString());
  const folder = (name, edit) => {
    const dir = `${root}/${name}`;
    mkdirSync(dir, { recursive: true });
    for (const f of ['config.json', 'tokenizer.json', 'model.safetensors']) copyFileSync(`${src}/${f}`, `${dir}/${f}`);
    edit(dir);
  };
  const withHeader = (edit) => {
    const h = structuredClone(header);
    edit(h);
    const json = Buffer.from(JSON.stringify(h).padEnd(headerLen));
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(json.length));
    return Buffer.concat([len, json, weights.subarray(8 + headerLen)]);
  };
  folder('bad-config', (d) => writeFileSync(`${d}/config.json`, 'not json'));
  folder('wrong-width', (d) => {
    const c = JSON.parse(readFileSync(`${src}/config.json`, 'utf8'));
    writeFileSync(`${d}/config.json`, JSON.stringify({ ...c, hidden_size: 24 }));
  });
  folder('bad-tokenizer', (d) => writeFileSync(`${d}/tokenizer.json`, '{"model": 5}'));
  // The newer kinds' bad configs, on copies of their fixtures (Qwen3.5's Gated DeltaNet, LFM2).
  for (const [name, fixture, edit] of [
    ['deltanet-zero-heads', 'qwen35-text-f32', { linear_num_value_heads: 0 }],
    ['deltanet-key-heads', 'qwen35-text-f32', { linear_num_key_heads: 3 }],
    ['deltanet-no-taps', 'qwen35-text-f32', { linear_conv_kernel_dim: 0 }],
    ['qwen-unknown-layer', 'qwen35-text-f32', { layer_types: ['linear_attention', 'mamba2', 'linear_attention', 'full_attention'] }],
    ['lfm2-no-taps', 'lfm2-f32', { conv_L_cache: 0 }],
    ['lfm2-unknown-layer', 'lfm2-f32', { layer_types: ['conv', 'mamba', 'full_attention', 'conv', 'full_attention'] }],
  ]) {
    const dir = `${root}/${name}`;
    mkdirSync(dir, { recursive: true });
    const from = `tests/fixtures/${fixture}`;
    for (const f of ['tokenizer.json', 'model.safetensors']) copyFileSync(`${from}/${f}`, `${dir}/${f}`);
    const c = JSON.parse(readFileSync(`${from}/config.json`, 'utf8'));
    writeFileSync(`${dir}/config.json`, JSON.stringify({ ...c, ...edit }));
  }
  folder('truncated', (d) => writeFileSync(`${d}/model.safetensors`, weights.subarray(0, weights.length - 100)));
  folder('huge-header', (d) => {
    const w = Buffer.from(weights);
    w.writeBigUInt64LE(2n ** 62n);
    writeFileSync(`${d}/model.safetensors`, w);
  });
  folder('nan-weight', (d) => {
    const w = Buffer.from(weights);
    w.writeFloatLE(NaN, 8 + headerLen + 4 * 7);
    writeFileSync(`${d}/model.safetensors`, w);
  });
  // Finite weights that overflow at run time, from token 7 on only (tests/non_finite.rs builds
  // the same model in Rust): layer 0's norm gain is 1e30 at coordinate 0, and only token 7's
  // embedding is non-zero there (±10 elsewhere in its row), so 0·1e30 = 0 for every other token.
  folder('overflow', (d) => {
    const w = Buffer.from(weights);
    const at = (name) => 8 + headerLen + header[name].data_offsets[0];
    const [rows, cols] = header['backbone.embeddings.weight'].shape;
    const emb = at('backbone.embeddings.weight');
    for (let r = 0; r < rows; r++) w.writeFloatLE(0, emb + 4 * r * cols);
    for (let c = 1; c < cols; c++) {
      const v = w.readFloatLE(emb + 4 * (7 * cols + c));
      w.writeFloatLE(v < 0 ? -10 : 10, emb + 4 * (7 * cols + c));
    }
    w.writeFloatLE(10, emb + 4 * 7 * cols);
    w.writeFloatLE(1e30, at('backbone.layers.0.norm.weight'));
    writeFileSync(`${d}/model.safetensors`, w);
  });
  // A decoder whose text is no prefix of its text one token later (every character but the
  // last becomes §: tests/generation.rs builds the same), on a fixture whose greedy run after
  // the prompt below is text: streaming its second token's text fails (InvalidPrefix).
  const streamless = `${root}/unstreamable-tokenizer`;
  const textual = 'tests/fixtures/bias-untied-bf16';
  mkdirSync(streamless, { recursive: true });
  for (const f of ['config.json', 'model.safetensors']) copyFileSync(`${textual}/${f}`, `${streamless}/${f}`);
  const tokenizer = JSON.parse(readFileSync(`${textual}/tokenizer.json`, 'utf8'));
  const replace = { type: 'Replace', pattern: { Regex: '[\\s\\S](?=[\\s\\S])' }, content: '§' };
  tokenizer.decoder = { type: 'Sequence', decoders: [tokenizer.decoder, { type: 'Fuse' }, replace] };
  writeFileSync(`${streamless}/tokenizer.json`, JSON.stringify(tokenizer));
  folder('missing-tensor', (d) => writeFileSync(`${d}/model.safetensors`, withHeader((h) => {
    const name = Object.keys(h).find((k) => k.endsWith('norm_f.weight'));
    h[name.replace('norm_f', 'norm_g')] = h[name];
    delete h[name];
  })));
  folder('index-escapes', (d) => {
    rmSync(`${d}/model.safetensors`);
    const map = Object.fromEntries(Object.keys(header).filter((k) => k !== '__metadata__')
      .map((k) => [k, '../tiny-f32/model.safetensors']));
    writeFileSync(`${d}/model.safetensors.index.json`, JSON.stringify({ weight_map: map }));
  });
}

/** In the page: loads the working model (in the page, or in a Web Worker with `worker`: then
 *  every loader case loads in a worker too), then runs every case; returns one result per case.
 *  Every call is awaited, which works the same in both modes. */
async function matrix(page, base, backend, worker) {
  return page.evaluate(async ({ base, backend, worker }) => {
    const { Model } = window.webmamba;
    const url = `${base}/fixtures/tiny-f32/`;
    const opts = { backend, cache: false, worker };
    const w = { worker }; // for the loader cases whose options are otherwise wrong
    const model = await Model.fromUrl(url, opts);
    const s = model.newSession();
    const prompt = [5, 17, 3, 99, 42, 7, 7, 64, 1, 250, 12];
    await s.appendTokens(prompt);
    const greedy = { maxTokens: 8, stopAtEos: false };
    await s.generate(greedy);
    const want = Array.from(await s.tokens()).slice(prompt.length);
    const saved = await s.exportState();
    const flipped = saved.slice();
    flipped[40] ^= 1;
    const foreign = await (await Model.fromUrl(`${base}/fixtures/bias-untied-bf16/`, opts)).newSession();
    await foreign.appendTokens([1, 2, 3]);
    const foreignState = await foreign.exportState();
    const closed = model.newSession();
    closed.close();
    const empty = model.newSession();
    const damaged = (name) => Model.fromUrl(`${base}/damaged/${name}/`, opts);
    const ZERO = `sha256-${'A'.repeat(43)}=`; // valid SRI: 32 zero bytes
    const integrity = (i) => ({ ...w, integrity: i });

    const cases = [
      // Model.fromUrl / fromFiles / load / clearCache
      ['fromUrl(42)', () => Model.fromUrl(42), 'InvalidInput'],
      ['fromUrl()', () => Model.fromUrl(), 'InvalidInput'],
      ['fromUrl(url, "gpu")', () => Model.fromUrl(url, 'gpu'), 'InvalidInput'],
      ['fromUrl(url, [])', () => Model.fromUrl(url, []), 'InvalidInput'],
      ['fromUrl backend: 7', () => Model.fromUrl(url, { ...w, backend: 7 }), 'InvalidInput'],
      ['fromUrl maxContext: 0', () => Model.fromUrl(url, { ...w, maxContext: 0 }), 'InvalidInput'],
      ['fromUrl maxContext: 1.5', () => Model.fromUrl(url, { ...w, maxContext: 1.5 }), 'InvalidInput'],
      ['fromUrl maxContext: "long"', () => Model.fromUrl(url, { ...w, maxContext: 'long' }), 'InvalidInput'],
      ['fromUrl kvFormat: "f8"', () => Model.fromUrl(url, { ...w, kvFormat: 'f8' }), 'InvalidInput'],
      ['fromUrl backend: "tpu"', () => Model.fromUrl(url, { ...w, backend: 'tpu' }), 'InvalidInput'],
      ['fromUrl weights: "int4"', () => Model.fromUrl(url, { ...w, weights: 'int4' }), 'InvalidInput'],
      ['fromUrl maxTokens: -1', () => Model.fromUrl(url, { ...w, maxTokens: -1 }), 'InvalidInput'],
      ['fromUrl maxTokens: 1.5', () => Model.fromUrl(url, { ...w, maxTokens: 1.5 }), 'InvalidInput'],
      ['fromUrl blockSize: NaN', () => Model.fromUrl(url, { ...w, blockSize: NaN }), 'InvalidInput'],
      ['fromUrl budgetBytes: "lots"', () => Model.fromUrl(url, { ...w, budgetBytes: 'lots' }), 'InvalidInput'],
      ['fromUrl cache: "yes"', () => Model.fromUrl(url, { ...w, cache: 'yes' }), 'InvalidInput'],
      ['fromUrl onProgress: 5', () => Model.fromUrl(url, { ...w, onProgress: 5 }), 'InvalidInput'],
      ['fromUrl store: "yes"', () => Model.fromUrl(url, { ...w, store: 'yes' }), 'InvalidInput'],
      ['fromUrl store: { sparseEvery: 0 }', () => Model.fromUrl(url, { ...w, store: { sparseEvery: 0 } }), 'InvalidInput'],
      ['fromUrl store: { budgetBytes: -1 }', () => Model.fromUrl(url, { ...w, store: { budgetBytes: -1 } }), 'InvalidInput'],
      ['fromUrl of a missing folder', () => Model.fromUrl(`${base}/fixtures/nothing-here/`, opts), 'Io'],
      // The integrity option: the value's shape at once, a name the load does not read once the
      // headers tell, a wrong digest as the bytes stream (a valid SRI of 32 zero bytes).
      ['fromUrl integrity: "sha256-…"', () => Model.fromUrl(url, { ...w, integrity: ZERO }), 'InvalidInput'],
      ['fromUrl integrity: [sri]', () => Model.fromUrl(url, { ...w, integrity: [ZERO] }), 'InvalidInput'],
      ['fromUrl integrity: a Map', () => Model.fromUrl(url, { ...w, integrity: new Map([['model.safetensors', ZERO]]) }), 'InvalidInput'],
      ['fromUrl integrity value 5', () => Model.fromUrl(url, integrity({ 'model.safetensors': 5 })), 'InvalidInput'],
      ['fromUrl integrity md5-…', () => Model.fromUrl(url, integrity({ 'model.safetensors': 'md5-1B2M2Y8AsgTpgAmY7PhCfg==' })), 'InvalidInput'],
      ['fromUrl integrity sha1-…', () => Model.fromUrl(url, integrity({ 'model.safetensors': 'sha1-2jmj7l5rSw0yVb/vlWAYkK/YBwk=' })), 'InvalidInput'],
      ['fromUrl integrity not base64', () => Model.fromUrl(url, integrity({ 'model.safetensors': 'sha256-%%%%' })), 'InvalidInput'],
      ['fromUrl integrity a short digest', () => Model.fromUrl(url, integrity({ 'model.safetensors': 'sha256-AAAA' })), 'InvalidInput'],
      ['fromUrl integrity no algorithm', () => Model.fromUrl(url, integrity({ 'model.safetensors': ZERO.slice(7) })), 'InvalidInput'],
      ['fromUrl integrity SRI options', () => Model.fromUrl(url, integrity({ 'model.safetensors': `${ZERO}?ct=x` })), 'InvalidInput'],
      ['fromUrl integrity ""', () => Model.fromUrl(url, integrity({ 'model.safetensors': '' })), 'InvalidInput'],
      ['fromUrl integrity key a path', () => Model.fromUrl(url, integrity({ '../model.safetensors': ZERO })), 'InvalidInput'],
      ['fromUrl integrity names a file not read', () => Model.fromUrl(url, { ...opts, integrity: { 'model.safetensor': ZERO } }), 'InvalidInput'],
      ['fromUrl integrity a wrong digest', () => Model.fromUrl(url, { ...opts, integrity: { 'model.safetensors': ZERO } }), 'Integrity'],
      ['load integrity names tokenizer.json, not given', () => Model.load(new Uint8Array(3), new Uint8Array(3), undefined, { ...opts, integrity: { 'tokenizer.json': ZERO } }), 'InvalidInput'],
      ['load integrity a wrong digest', () => Model.load(new Uint8Array(3), new Uint8Array(3), undefined, { ...opts, integrity: { 'config.json': ZERO } }), 'Integrity'],
      ...(worker ? [] : [['fromUrl integrity a getter that throws', () => Model.fromUrl(url, integrity({ get 'model.safetensors'() { throw new Error('no'); } })), 'InvalidInput']]),
      ['fromFiles("x")', () => Model.fromFiles('x', w), 'InvalidInput'],
      ['fromFiles([1, 2])', () => Model.fromFiles([1, 2], w), 'InvalidInput'],
      ['fromFiles([])', () => Model.fromFiles([], opts), 'InvalidInput'],
      ['clearCache(5)', () => Model.clearCache(5), 'InvalidInput'],
      ['load("a", "b")', () => Model.load('a', 'b', undefined, w), 'InvalidInput'],
      ['load(bytes, bytes, 7)', () => Model.load(new Uint8Array(2), new Uint8Array(2), 7, w), 'InvalidInput'],
      ['load of junk bytes', () => Model.load(new Uint8Array(3), new Uint8Array(3), undefined, opts), 'Config'],
      // Damaged model folders
      ['config.json not JSON', () => damaged('bad-config'), 'Config'],
      ['config.json of another width', () => damaged('wrong-width'), 'ShapeMismatch'],
      ['tokenizer.json damaged', () => damaged('bad-tokenizer'), 'Tokenizer'],
      ['Gated DeltaNet with 0 value heads', () => damaged('deltanet-zero-heads'), 'Config'],
      ['Gated DeltaNet key heads not dividing value heads', () => damaged('deltanet-key-heads'), 'Config'],
      ['Gated DeltaNet with 0 conv taps', () => damaged('deltanet-no-taps'), 'Config'],
      ['Qwen3.5 with an unknown layer type', () => damaged('qwen-unknown-layer'), 'UnsupportedModel'],
      ['LFM2 with 0 conv taps', () => damaged('lfm2-no-taps'), 'Config'],
      ['LFM2 with an unknown layer type', () => damaged('lfm2-unknown-layer'), 'UnsupportedModel'],
      ['safetensors truncated', () => damaged('truncated'), 'Safetensors'],
      ['safetensors header length 2^62', () => damaged('huge-header'), 'Safetensors'],
      ['a NaN weight', () => damaged('nan-weight'), 'NonFiniteWeight'],
      ['a tensor missing', () => damaged('missing-tensor'), 'MissingTensor'],
      ['an index naming ../', () => damaged('index-escapes'), 'Safetensors'],
      // model.encode / decode (synchronous in the page: they throw)
      ['encode(5)', () => model.encode(5), 'InvalidInput'],
      ['decode("abc")', () => model.decode('abc'), 'InvalidInput'],
      ['decode([1.5])', () => model.decode([1.5]), 'InvalidInput'],
      ['decode([-1])', () => model.decode([-1]), 'InvalidInput'],
      ['decode([2 ** 40])', () => model.decode([2 ** 40]), 'InvalidInput'],
      // Session entries
      ['append(5)', () => s.append(5), 'InvalidInput'],
      ['append(null)', () => s.append(null), 'InvalidInput'],
      ['edit({})', () => s.edit({}), 'InvalidInput'],
      ['appendTokens("abc")', () => s.appendTokens('abc'), 'InvalidInput'],
      ['appendTokens([1, "x"])', () => s.appendTokens([1, 'x']), 'InvalidInput'],
      ['appendTokens([1e12])', () => s.appendTokens([1e12]), 'InvalidInput'],
      ['appendTokens(id outside the vocabulary)', () => s.appendTokens([300]), 'InvalidInput'],
      ['appendTokens([2^32 − 1])', () => s.appendTokens(new Uint32Array([2 ** 32 - 1])), 'InvalidInput'],
      ['generate("x")', () => s.generate('x'), 'InvalidInput'],
      ['generate maxTokens: -5', () => s.generate({ maxTokens: -5 }), 'InvalidInput'],
      ['generate maxTokens: Infinity', () => s.generate({ maxTokens: Infinity }), 'InvalidInput'],
      ['generate temperature: -1', () => s.generate({ temperature: -1 }), 'InvalidInput'],
      ['generate temperature: NaN', () => s.generate({ temperature: NaN }), 'InvalidInput'],
      ['generate seed: 1.5', () => s.generate({ seed: 1.5 }), 'InvalidInput'],
      ['generate topK: -1', () => s.generate({ topK: -1 }), 'InvalidInput'],
      ['generate topP: 0', () => s.generate({ topP: 0 }), 'InvalidInput'],
      ['generate topP: 1.5', () => s.generate({ topP: 1.5 }), 'InvalidInput'],
      ['generate repetitionPenalty: 0', () => s.generate({ repetitionPenalty: 0 }), 'InvalidInput'],
      ['generate stop: 5', () => s.generate({ stop: 5 }), 'InvalidInput'],
      ['generate stop: [""]', () => s.generate({ stop: [''] }), 'InvalidInput'],
      ['generate stop: ["a", 1]', () => s.generate({ stop: ['a', 1] }), 'InvalidInput'],
      ['generate stopAtEos: "no"', () => s.generate({ stopAtEos: 'no' }), 'InvalidInput'],
      ['generate({}, 42)', () => s.generate({}, 42), 'InvalidInput'],
      ['generate onToken: "x"', () => s.generate({ onToken: 'x' }), 'InvalidInput'],
      ['generate signal: 5', () => s.generate({ signal: 5 }), 'InvalidInput'],
      ['stream("x")', () => s.stream('x').next(), 'InvalidInput'],
      ['stream topP: -1', () => s.stream({ topP: -1 }).next(), 'InvalidInput'],
      ['stream signal: {}', () => s.stream({ signal: {} }).next(), 'InvalidInput'],
      ['generate on an empty session', () => empty.generate(greedy), 'InvalidInput'],
      ['rewind("x")', () => s.rewind('x'), 'InvalidInput'],
      ['rewind(-1)', () => s.rewind(-1), 'InvalidInput'],
      ['rewind(1.5)', () => s.rewind(1.5), 'InvalidInput'],
      ['rewind past the history', () => s.rewind(1e9), 'InvalidInput'],
      ['importState("x")', () => empty.importState('x'), 'InvalidInput'],
      ['importState(10 zero bytes)', () => empty.importState(new Uint8Array(10)), 'CorruptState'],
      ['importState(a flipped bit)', () => empty.importState(flipped), 'CorruptState'],
      ['importState(another model\'s state)', () => empty.importState(foreignState), 'StateMismatch'],
      ['a closed session', () => closed.appendTokens([1]), 'NoSession'],
      ['save(5)', () => s.save(5), 'InvalidInput'],
      ['restoreSession(5)', () => model.restoreSession(5), 'InvalidInput'],
      ['restoreSession of a name never saved', () => model.restoreSession('never-saved'), 'InvalidInput'],
      ['deleteSession(null)', () => model.deleteSession(null), 'InvalidInput'],
      ['append(a function)', () => s.append(() => 'x'), 'InvalidInput'],
      ['generate({ stop: [a function] })', () => s.generate({ stop: [() => 'x'] }), 'InvalidInput'],
      // Chat (this model has no chat template: a request's chatTemplate gives one)
      ['chat(5)', () => s.chat(5), 'InvalidInput'],
      ['chat({})', () => s.chat({}), 'InvalidInput'],
      ['chat({ messages: "x" })', () => s.chat({ messages: 'x' }), 'InvalidInput'],
      ['chat without a template', () => s.chat({ messages: [{ role: 'user', content: 'a' }] }), 'Template'],
      ['chat chatTemplate: 5', () => s.chat({ messages: [], chatTemplate: 5 }), 'InvalidInput'],
      ['chat with a template that does not parse', () => s.chat({ messages: [], chatTemplate: '{% for m in messages %}' }), 'Template'],
      ['chat with a template that raises', () => s.chat({ messages: [], chatTemplate: "{{ raise_exception('no') }}" }), 'Template'],
      ['chat maxTokens: -1', () => s.chat({ messages: [], chatTemplate: 'x', maxTokens: -1 }), 'InvalidInput'],
      ['chat tools: 5', () => s.chat({ messages: [], chatTemplate: 'x', tools: 5 }), 'InvalidInput'],
      ['chat templateArgs: [1]', () => s.chat({ messages: [], chatTemplate: 'x', templateArgs: [1] }), 'InvalidInput'],
      ['chat with a cyclic message', () => { const m = { role: 'user' }; m.self = m; return s.chat({ messages: [m], chatTemplate: 'x' }); }, 'InvalidInput'],
      ['chat responseFormat: { type: "xml" }', () => s.chat({ messages: [], chatTemplate: 'x', responseFormat: { type: 'xml' } }), 'InvalidInput'],
      ['chat responseFormat json_schema without a schema', () => s.chat({ messages: [], chatTemplate: 'x', responseFormat: { type: 'json_schema' } }), 'InvalidInput'],
      ['chat responseFormat regex that does not parse', () => s.chat({ messages: [], chatTemplate: 'x', responseFormat: { type: 'regex', regex: '(' } }), 'InvalidInput'],
      ['chat toolChoice: "always"', () => s.chat({ messages: [], chatTemplate: 'x', tools: [{}], toolChoice: 'always' }), 'InvalidInput'],
      ['chat toolChoice "required" without tools', () => s.chat({ messages: [], chatTemplate: 'x', toolChoice: 'required' }), 'InvalidInput'],
      ['chat toolChoice "required" with a template that writes no calls', () => s.chat({ messages: [], chatTemplate: 'x', tools: [{}], toolChoice: 'required' }), 'InvalidInput'],
      ['generate responseFormat: { type: "xml" }', () => s.generate({ responseFormat: { type: 'xml' } }), 'InvalidInput'],
      ['stream with responseFormat', async () => { for await (const _ of s.stream({ responseFormat: { type: 'json_object' } })) break; }, 'InvalidInput'],
      ['renderChat(5)', () => model.renderChat(5), 'InvalidInput'],
      ['renderChat addGenerationPrompt: "yes"', () => model.renderChat({ messages: [], chatTemplate: 'x', addGenerationPrompt: 'yes' }), 'InvalidInput'],
      ['Busy: a second call while generating', async () => {
        const first = s.generate({ maxTokens: 2, stopAtEos: false });
        try { await s.appendTokens([1]); } finally { await first; }
      }, 'Busy'],
    ];
    if (backend === 'gpu') {
      cases.push(
        ['fromUrl maxTokens beyond the dispatch limit', () => Model.fromUrl(url, { ...opts, maxTokens: 70000 }), 'LimitExceeded'],
      );
    }

    const results = [];
    const timeout = (ms) => new Promise((_, reject) => setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms));
    for (const [label, call, code] of cases) {
      const r = { label, want: code };
      try {
        await Promise.race([Promise.resolve().then(call), timeout(60000)]);
        r.got = 'accepted';
      } catch (e) {
        r.got = e?.name === 'WebMambaError' ? e.code : `${e?.name}: ${e?.message ?? e}`;
        r.message = String(e?.message ?? e);
      }
      // The session that worked before still works, exactly.
      try {
        await s.rewind(prompt.length);
        await s.generate(greedy);
        r.after = JSON.stringify(Array.from(await s.tokens()).slice(prompt.length)) === JSON.stringify(want);
      } catch (e) {
        r.after = `${e?.name}: ${e?.message ?? e}`;
      }
      results.push(r);
    }
    // And its saved state still imports into a fresh session.
    const again = model.newSession();
    await again.importState(saved);
    results.push({ label: 'the saved state imports afterwards', want: 'ok', got: 'ok',
      after: JSON.stringify(Array.from(await again.tokens())) === JSON.stringify(Array.from(await s.tokens())) });
    const ran = model.info.backend;
    model.free();
    return { backend: ran, results };
  }, { base, backend, worker });
}

/** In the page (or a worker): each memory-bomb template through `chat()` on one session and
 *  through `renderChat()`; the time each took to fail, and a chat turn with a working template
 *  on the same session after each. */
async function templateBombs(page, base, backend, worker, bombs) {
  return page.evaluate(async ({ base, backend, worker, bombs }) => {
    const { Model } = window.webmamba;
    const model = await Model.fromUrl(`${base}/fixtures/tiny-f32/`, { backend, cache: false, worker });
    const s = model.newSession();
    const chatml = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n";
    const messages = [{ role: 'user', content: 'Good morrow.' }];
    // A call that never settles is a failure named here, not a run that waits for ever.
    const timeout = () => new Promise((_, reject) => setTimeout(() => reject(new Error('no answer in 60 s')), 60000));
    const outcome = async (f) => {
      const t0 = performance.now();
      try { await Promise.race([f(), timeout()]); return { got: 'accepted', ms: performance.now() - t0 }; } catch (e) {
        return { got: e?.name === 'WebMambaError' ? e.code : `${e?.name}`, message: String(e?.message ?? e), ms: performance.now() - t0 };
      }
    };
    const results = [];
    for (const bomb of bombs) {
      window.__step = `template bomb: ${bomb.name}`;
      const chat = await outcome(() => s.chat({ messages, chatTemplate: bomb.template, maxTokens: 2 }));
      const render = await outcome(() => model.renderChat({ messages, chatTemplate: bomb.template }));
      const next = await outcome(() => s.chat({ messages, chatTemplate: chatml, maxTokens: 2, temperature: 0 }));
      results.push({ name: bomb.name, chat, render, next });
    }
    model.free();
    return results;
  }, { base, backend, worker, bombs });
}

/** In the page (or a worker): the model that overflows from token 7 on. Generation reaches 7
 *  and rejects with NonFiniteOutput at its position; logits() refuses; a rewind before it goes
 *  on exactly; feeding 7 again refuses again. */
async function nonFinite(page, base, backend, worker) {
  return page.evaluate(async ({ base, backend, worker }) => {
    const { Model } = window.webmamba;
    const code = async (f) => { try { await f(); return 'accepted'; } catch (e) { return `${e.code}: ${e.message}`; } };
    const model = await Model.fromUrl(`${base}/damaged/overflow/`, { backend, cache: false, worker });
    const s = model.newSession();
    await s.appendTokens([125, 142, 159, 176, 193, 210]);
    const seen = [];
    const generate = await code(() => s.generate({ maxTokens: 20, stopAtEos: false }, (_, id) => { seen.push(id); }));
    const length = (await s.tokens()).length;
    const logits = await code(() => s.logits());
    const rewound = await s.rewind(6);
    await s.generate({ maxTokens: 2, stopAtEos: false });
    const after = Array.from(await s.tokens()).slice(6);
    const finite = Array.from(await s.logits()).every(Number.isFinite);
    const again = await code(() => s.appendTokens([7]));
    model.free();
    return { generate, seen, length, logits, prefilled: rewound.prefilled, after, finite, again };
  }, { base, backend, worker });
}

/** In the page (or a worker): the tokenizer whose text cannot be streamed. `generate` rejects
 *  with Tokenizer, keeping the tokens it generated (and its end: a checkpoint there); a stream
 *  of the same tokens yields the ones before, rejects with Tokenizer, then is done. */
async function unstreamable(page, base, backend, worker) {
  return page.evaluate(async ({ base, backend, worker }) => {
    const { Model } = window.webmamba;
    const code = async (f) => { try { await f(); return 'accepted'; } catch (e) { return `${e.code}: ${e.message}`; } };
    const model = await Model.fromUrl(`${base}/damaged/unstreamable-tokenizer/`, { backend, cache: false, worker });
    const s = model.newSession();
    const prompt = [5, 17, 3, 99, 42, 7, 7, 64, 1, 250, 12];
    await s.appendTokens(prompt);
    const options = { maxTokens: 24, stopAtEos: false };
    const generate = await code(() => s.generate(options));
    const generated = Array.from(await s.tokens()).slice(prompt.length);
    const end = Array.from((await s.stats()).checkpoints).includes(prompt.length + generated.length);
    await s.rewind(prompt.length);
    const stream = s.stream(options);
    const pulled = [];
    const streamed = await code(async () => {
      for (let r = await stream.next(); !r.done; r = await stream.next()) pulled.push(r.value.id);
    });
    const after = await stream.next();
    const history = Array.from(await s.tokens()).slice(prompt.length);
    model.free();
    return { generate, generated, end, streamed, pulled, afterDone: after.done, history };
  }, { base, backend, worker });
}

/** In the page: a model's device is destroyed under it; then the recovery. */
async function deviceLoss(page, base) {
  return page.evaluate(async ({ base }) => {
    const { Model } = window.webmamba;
    const url = `${base}/fixtures/tiny-f32/`;
    const opts = { backend: 'gpu', cache: false };
    const devices = [];
    const requestDevice = GPUAdapter.prototype.requestDevice;
    GPUAdapter.prototype.requestDevice = async function (...a) {
      const d = await requestDevice.apply(this, a);
      devices.push(d);
      return d;
    };
    let model;
    try { model = await Model.fromUrl(url, opts); } finally { GPUAdapter.prototype.requestDevice = requestDevice; }
    const prompt = [5, 17, 3, 99, 42, 7, 7, 64, 1, 250, 12];
    const whole = model.newSession();
    await whole.appendTokens(prompt);
    await whole.generate({ maxTokens: 10, stopAtEos: false });
    const want = Array.from(whole.tokens()).slice(prompt.length);
    const s = model.newSession();
    await s.appendTokens(prompt);
    await s.generate({ maxTokens: 4, stopAtEos: false });
    const saved = await s.exportState();

    devices.at(-1).destroy();
    const lost = await devices.at(-1).lost;
    const codes = {};
    for (const [label, call] of [['generate', () => s.generate({ maxTokens: 3, stopAtEos: false })],
      ['appendTokens', () => s.appendTokens([1, 2])], ['exportState', () => s.exportState()],
      ['rewind', () => s.rewind(3)]]) {
      try { await call(); codes[label] = 'accepted'; } catch (e) { codes[label] = e?.name === 'WebMambaError' ? e.code : `${e?.name}: ${e?.message}`; }
    }
    const historyKept = s.tokens().length === prompt.length + 4;

    const again = await Model.fromUrl(url, opts);
    const r = again.newSession();
    await r.importState(saved);
    await r.generate({ maxTokens: 6, stopAtEos: false });
    const recovered = JSON.stringify(Array.from(r.tokens()).slice(prompt.length)) === JSON.stringify(want);
    return { reason: lost.reason, codes, historyKept, recovered };
  }, { base });
}

// ---- Grammar errors (issue 54 item 2) -------------------------------------------------------
/** In the page (or a worker): structured-output formats the grammar engine refuses, or that no
 *  finite text matches, through generate and chat (a response format, a tool's parameters).
 *  Each must be an InvalidInput WebMambaError whose message is one line under 300 characters
 *  naming what and where, never the engine's state dump (its own text, where kept, is
 *  `error.detail`); after each, a session that worked before generates the same tokens. */
async function grammarErrors(page, base, backend, worker) {
  return page.evaluate(async ({ base, backend, worker }) => {
    const { Model } = window.webmamba;
    const model = await Model.fromUrl(`${base}/fixtures/tiny-f32/`, { backend, cache: false, worker });
    const s = model.newSession();
    const prompt = [5, 17, 3, 99, 42, 7, 7, 64, 1, 250, 12];
    await s.appendTokens(prompt);
    const greedy = { maxTokens: 8, stopAtEos: false };
    await s.generate(greedy);
    const want = JSON.stringify(Array.from(await s.tokens()).slice(prompt.length));
    const qwen = await (await fetch(`${base}/fixtures/chat/chatml-qwen2.5-instruct.jinja`)).text();
    const schema = (schema, strict) => ({ responseFormat: { type: 'json_schema', json_schema: strict === undefined ? { schema } : { schema, strict } } });
    const gen = (format) => () => s.generate({ maxTokens: 4, ...format });
    const tool = (parameters) => () => s.chat({ messages: [{ role: 'user', content: 'a' }], chatTemplate: qwen, maxTokens: 4,
      tools: [{ type: 'function', function: { name: 'lookup', parameters } }], toolChoice: 'required' });
    const cases = [
      // [label, call, what the message must say, whether the engine's text is kept in detail]
      ['a $ref to the root, recursive without a base case', gen(schema({ $ref: '#' })), '`$ref` "#" is recursive without a base case (at the root)', false],
      ['a required property whose $ref comes back', gen(schema({ type: 'object', properties: { a: { $ref: '#/$defs/x' } }, required: ['a'],
        $defs: { x: { type: 'object', properties: { y: { $ref: '#/$defs/x' } }, required: ['y'] } } })), 'is recursive without a base case (at /properties/a)', false],
      ['a $ref to nothing', gen(schema({ type: 'object', properties: { a: { $ref: '#/definitions/nope' } } })), '`$ref` "#/definitions/nope" points to nothing in the schema (at /properties/a)', true],
      ['a pattern that is no regex', gen(schema({ properties: { a: { type: 'string', pattern: '(ab' } } })), '`pattern` is not a valid regex: unclosed group at `(` (at /properties/a)', true],
      ['a regex that does not parse', gen({ responseFormat: { type: 'regex', regex: 'a{5,2}' } }), 'the regex cannot be used: invalid repetition count range', true],
      ['a schema that is not an object', gen(schema(5)), 'json_schema needs { schema: {...} }', false],
      ['an unsupported keyword', gen(schema({ properties: { a: { not: { type: 'string' } } } })), 'it uses `not`, which structured output does not support (at /properties/a)', true],
      ['an unknown type', gen(schema({ properties: { a: { type: 'text' } } })), '`type` "text" is not a JSON Schema type (at /properties/a)', true],
      ['strict: true on an open object', gen(schema({ type: 'object', properties: { m: { type: 'object', additionalProperties: true } } }, true)),
        'cannot be used with strict: true: the object at /properties/m allows properties it does not name', false],
      ['strict: "yes"', gen(schema({ type: 'object' }, 'yes')), 'json_schema.strict must be true or false', false],
      ['a tool\'s parameters with an unknown type', tool({ type: 'object', properties: { q: { type: 'str' } } }),
        'tools: lookup\'s parameters cannot be used: `type` "str" is not a JSON Schema type (at /properties/q)', true],
      ['a tool\'s parameters recursive without a base case', tool({ type: 'object', properties: { q: { $ref: '#' } }, required: ['q'] }),
        'tools: lookup\'s parameters cannot be used: `$ref` "#" is recursive', false],
      ['chat with a recursive response_format', () => s.chat({ messages: [{ role: 'user', content: 'a' }], chatTemplate: qwen, maxTokens: 4,
        responseFormat: { type: 'json_schema', json_schema: { name: 'x', schema: { $ref: '#' }, strict: true } } }), 'is recursive without a base case', false],
    ];
    const results = [];
    for (const [label, call, says, kept] of cases) {
      const r = { label, says, kept };
      try {
        await call();
        r.got = 'accepted';
      } catch (e) {
        r.got = e?.name === 'WebMambaError' ? e.code : `${e?.name}: ${e?.message ?? e}`;
        r.message = String(e?.message ?? e);
        r.detail = e?.detail ?? null; // (WebDriver returns undefined as null)
      }
      try {
        await s.rewind(prompt.length);
        await s.generate(greedy);
        r.after = JSON.stringify(Array.from(await s.tokens()).slice(prompt.length)) === want;
      } catch (e) {
        r.after = `${e?.name}: ${e?.message ?? e}`;
      }
      results.push(r);
    }
    model.free();
    return results;
  }, { base, backend, worker });
}

/** The checks on {@link grammarErrors}' results. */
function checkGrammarErrors(results, b, check) {
  const internal = /\n|Parser:|Tokens:|compute_time|<state>|grm_prefix|NoExtension|Stop:/;
  for (const r of results) {
    const m = r.message ?? '';
    check(r.got === 'InvalidInput' && m.length < 300 && !internal.test(m) && m.includes(r.says),
      `${b}: grammar error, ${r.label}: wanted InvalidInput saying ${JSON.stringify(r.says)} in one line under 300 characters, got ${r.got}: ${JSON.stringify(m)} (${m.length} characters)`);
    check(r.kept ? typeof r.detail === 'string' && r.detail.length > 0 && !r.detail.includes('<state>') : r.detail === null,
      `${b}: grammar error, ${r.label}: error.detail ${r.kept ? 'keeps the engine\'s text' : 'is absent'}: ${JSON.stringify(r.detail)}`);
    check(r.after === true, `${b}: after the grammar error "${r.label}" the working session generates the same tokens: ${r.after}`);
  }
  console.log(`robustness: ${b}: ${results.length} grammar errors, each InvalidInput in one line under 300 characters, the session intact after each`);
}
// ---- end of grammar errors ------------------------------------------------------------------

const BOMBS = JSON.parse(readFileSync('tests/fixtures/chat/memory-bombs.json', 'utf8')).bombs;
writeDamagedFolders('target/browser-test/damaged');
const server = await serve('tests/browser', 0, {
  mounts: { '/pkg/': process.env.WEBMAMBA_PKG ?? 'www/pkg', '/fixtures/': 'tests/fixtures', '/damaged/': 'target/browser-test/damaged' },
});
const base = `http://127.0.0.1:${server.address().port}`;
try {
  await runEngines('robustness', base, async ({ page, webgpu, check }) => {
    // WebGPU where the engine offers it; the CPU backend in the page and in a worker everywhere.
    const variants = webgpu ? [['gpu', false], ['cpu', false], ['gpu', true], ['cpu', true]] : [['cpu', false], ['cpu', true]];
    for (const [backend, worker] of variants) {
      const { backend: ran, results } = await matrix(page, base, backend, worker);
      const b = worker ? `${backend} (worker)` : backend;
      check(ran === backend, `${b}: the model runs on ${ran}`);
      for (const r of results) {
        check(r.got === r.want, `${b}: ${r.label}: wanted ${r.want}, got ${r.got}${r.message ? ` (${r.message})` : ''}`);
        check(r.after === true, `${b}: after "${r.label}" the working session generates the same tokens: ${r.after}`);
      }
      console.log(`robustness: ${b}: ${results.length} cases, each a typed error with its code, the session intact after each`);
      const nf = await nonFinite(page, base, backend, worker);
      check(/^NonFiniteOutput: .*after position 8\b/.test(nf.generate) && JSON.stringify(nf.seen) === '[210,28,7]' && nf.length === 9,
        `${b}: a model whose finite weights overflow at token 7: generate rejects with ${nf.generate} after feeding ${JSON.stringify(nf.seen)}`);
      check(/^NonFiniteOutput/.test(nf.logits), `${b}: logits() then refuses: ${nf.logits}`);
      check(nf.prefilled === 0 && JSON.stringify(nf.after) === '[210,28]' && nf.finite,
        `${b}: rewind(6) resumes from its checkpoint (prefilled ${nf.prefilled}) and generates ${JSON.stringify(nf.after)} with finite logits`);
      check(/^NonFiniteOutput/.test(nf.again), `${b}: feeding token 7 again: ${nf.again}`);
      if (backend === 'cpu') {
        const bombs = await templateBombs(page, base, backend, worker, BOMBS);
        for (const r of bombs) {
          for (const [call, o] of [['chat', r.chat], ['renderChat', r.render]]) {
            check(o.got === 'Template' && /template memory limit of \d+ bytes/.test(o.message) && o.ms < 5000,
              `${b}: template "${r.name}" through ${call}: ${o.got} in ${Math.round(o.ms)} ms (${o.message})`);
          }
          check(r.next.got === 'accepted', `${b}: after template "${r.name}" the session's next chat turn works: ${r.next.got} ${r.next.message ?? ''}`);
        }
        const slowest = Math.max(...bombs.flatMap((r) => [r.chat.ms, r.render.ms]));
        console.log(`robustness: ${b}: ${bombs.length} memory-bomb templates, each a Template error (slowest ${Math.round(slowest)} ms), the next turn working`);
      }
      const u = await unstreamable(page, base, backend, worker);
      const same = (x, y) => JSON.stringify(x) === JSON.stringify(y);
      check(/^Tokenizer: /.test(u.generate) && u.generated.length > 0 && u.end,
        `${b}: an unstreamable tokenizer: generate rejects with ${u.generate}, keeping ${JSON.stringify(u.generated)} and its end (${u.end})`);
      check(/^Tokenizer: /.test(u.streamed) && same(u.pulled, u.generated.slice(0, -1)) && u.afterDone && same(u.history, u.generated),
        `${b}: an unstreamable tokenizer: a stream yields ${JSON.stringify(u.pulled)}, rejects with ${u.streamed}, then is done (${u.afterDone}), keeping ${JSON.stringify(u.history)}`);
      checkGrammarErrors(await grammarErrors(page, base, backend, worker), b, check); // issue 54 item 2
    }
    if (!webgpu) return { worker: true };
    const lost = await deviceLoss(page, base);
    for (const [call, code] of Object.entries(lost.codes)) {
      check(code === 'DeviceLost', `device lost (${lost.reason}): ${call} is DeviceLost, got ${code}`);
    }
    check(lost.historyKept, 'device lost: the session keeps its history');
    check(lost.recovered, 'device lost: a new model + importState continues with the uninterrupted run\'s tokens');
    console.log(`robustness: device lost (${lost.reason}): ${JSON.stringify(lost.codes)}, recovered: ${lost.recovered}`);
    return { worker: true };
  }, { quiet: true });
} finally {
  server.close();
}
