// `model.chat.completions.create(request)`: OpenAI's chat-completions shape over `session.chat`,
// for pages written against WebLLM or the OpenAI SDK. Each model keeps one session for it: a
// request whose conversation extends the previous one (its messages, the reply, a new message)
// reads only the new tokens; any other conversation resumes from its longest cached prefix.
// Nothing is decided here but the mapping of names: rendering, caching and generation are the
// wasm module's (`session.chat`), and so are its errors.

const sessions = new WeakMap();

function invalid(message) {
  return Object.assign(new Error(message), { name: 'WebMambaError', code: 'InvalidInput' });
}

/** The session.chat request for an OpenAI-shaped one. */
function turnRequest(model, r) {
  if (r === null || typeof r !== 'object' || Array.isArray(r)) throw invalid('chat.completions.create needs a request object');
  const defaults = model.generationDefaults ?? {};
  const sampled = defaults.do_sample !== false;
  const pick = (value, fallback) => (value === undefined || value === null ? fallback : value);
  const request = {
    messages: r.messages,
    maxTokens: pick(r.max_completion_tokens, pick(r.max_tokens, defaults.max_new_tokens ?? 256)),
    temperature: pick(r.temperature, sampled ? (defaults.temperature ?? 1) : 0),
    topP: pick(r.top_p, sampled ? (defaults.top_p ?? 1) : 1),
  };
  if (sampled && defaults.top_k !== undefined && (r.temperature === undefined || r.temperature === null)) request.topK = defaults.top_k;
  if (defaults.repetition_penalty !== undefined) request.repetitionPenalty = defaults.repetition_penalty;
  if (r.seed !== undefined && r.seed !== null) request.seed = r.seed;
  if (r.stop !== undefined && r.stop !== null) request.stop = typeof r.stop === 'string' ? [r.stop] : r.stop;
  if (r.tools !== undefined) request.tools = r.tools;
  if (r.signal !== undefined) request.signal = r.signal;
  // json_schema, json_object (and webmamba's regex) constrain the tokens: the wasm module
  // judges the shape.
  if (r.response_format !== undefined && r.response_format !== null) request.responseFormat = r.response_format;
  return request;
}

function usage(turn) {
  return {
    prompt_tokens: turn.promptTokens,
    completion_tokens: turn.completionTokens,
    total_tokens: turn.promptTokens + turn.completionTokens,
    prompt_tokens_details: { cached_tokens: turn.cachedTokens },
  };
}

let counter = 0;

function session(model) {
  let s = sessions.get(model);
  if (!s) {
    s = model.newSession();
    sessions.set(model, s);
  }
  return s;
}

async function create(model, r) {
  const request = turnRequest(model, r);
  const s = session(model);
  const id = `chatcmpl-${Date.now().toString(36)}-${++counter}`;
  const created = Math.floor(Date.now() / 1000);
  const name = model.info?.name ?? 'webmamba';
  if (!r.stream) {
    const turn = await s.chat(request);
    return {
      id, object: 'chat.completion', created, model: name,
      choices: [{ index: 0, message: { role: 'assistant', content: turn.text }, finish_reason: turn.finishReason, logprobs: null }],
      usage: usage(turn),
    };
  }
  // Pieces arrive through onToken while the turn runs; the iterator hands them out as chunks
  // and ends with the finish reason and the usage.
  const pieces = [];
  let wake = null;
  let finished = null;
  const notify = () => { wake?.(); wake = null; };
  const turn = s.chat({ ...request, onToken: (text) => { pieces.push(text); notify(); } });
  turn.then((t) => { finished = { turn: t }; notify(); }, (e) => { finished = { error: e }; notify(); });
  const chunk = (delta, finishReason, extra) => ({
    id, object: 'chat.completion.chunk', created, model: name,
    choices: [{ index: 0, delta, finish_reason: finishReason, logprobs: null }], ...extra,
  });
  let first = true;
  let done = false;
  const iterator = {
    async next() {
      while (!done) {
        if (pieces.length > 0) {
          const delta = { content: pieces.splice(0).join('') };
          if (first) delta.role = 'assistant';
          first = false;
          return { done: false, value: chunk(delta, null) };
        }
        if (finished) {
          done = true;
          if (finished.error) throw finished.error;
          const delta = first ? { role: 'assistant', content: '' } : {};
          return { done: false, value: chunk(delta, finished.turn.finishReason, { usage: usage(finished.turn) }) };
        }
        await new Promise((resolve) => { wake = resolve; });
      }
      return { done: true, value: undefined };
    },
    async return() {
      // The consumer stopped reading: stop generating (the session keeps what it made).
      if (!finished) {
        s.stop();
        await turn.catch(() => {});
      }
      done = true;
      return { done: true, value: undefined };
    },
    [Symbol.asyncIterator]() { return this; },
  };
  return iterator;
}

/** Gives `Class.prototype` a `chat` property: `model.chat.completions.create(request)`. */
export function addChatCompletions(Class) {
  Object.defineProperty(Class.prototype, 'chat', {
    configurable: true,
    get() {
      const model = this;
      return { completions: { create: (request) => create(model, request) } };
    },
  });
}
