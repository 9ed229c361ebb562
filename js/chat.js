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

/** An OpenAI message as chat templates read it: a tool call's arguments as an object (OpenAI
 *  sends the JSON text; templates write them with tojson), no content as ''. */
function templateMessage(m) {
  if (m === null || typeof m !== 'object') return m;
  const out = m.content === null ? { ...m, content: '' } : m;
  if (!Array.isArray(m.tool_calls)) return out;
  const parse = (a) => { try { return typeof a === 'string' ? JSON.parse(a) : a; } catch { return a; } };
  return {
    ...out,
    tool_calls: m.tool_calls.map((c) => (c?.function ? { ...c, function: { ...c.function, arguments: parse(c.function.arguments) } } : c)),
  };
}

/** Where `text` may be shown up to while `tag` could be beginning at its end: its length less
 *  the longest end of it (after `from`) that begins `tag`; the next piece decides the rest. */
function beforePartialTag(text, tag, from = 0) {
  for (let k = Math.min(tag.length - 1, text.length - from); k > 0; k--) {
    if (tag.startsWith(text.slice(text.length - k))) return text.length - k;
  }
  return text.length;
}

let callCounter = 0;

/** OpenAI's tool_calls for a turn's calls (ids made here). */
function toolCalls(turn) {
  return (turn.toolCalls ?? []).map((c) => ({
    id: `call_${Date.now().toString(36)}${(++callCounter).toString(36)}`,
    type: 'function',
    function: { name: c.name, arguments: c.arguments },
  }));
}

/** The session.chat request for an OpenAI-shaped one. */
function turnRequest(model, r) {
  if (r === null || typeof r !== 'object' || Array.isArray(r)) throw invalid('chat.completions.create needs a request object');
  const defaults = model.generationDefaults ?? {};
  const sampled = defaults.do_sample !== false;
  const pick = (value, fallback) => (value === undefined || value === null ? fallback : value);
  const request = {
    messages: Array.isArray(r.messages) ? r.messages.map(templateMessage) : r.messages,
    maxTokens: pick(r.max_completion_tokens, pick(r.max_tokens, defaults.max_new_tokens ?? 256)),
    temperature: pick(r.temperature, sampled ? (defaults.temperature ?? 1) : 0),
    topP: pick(r.top_p, sampled ? (defaults.top_p ?? 1) : 1),
  };
  if (sampled && defaults.top_k !== undefined && (r.temperature === undefined || r.temperature === null)) request.topK = defaults.top_k;
  if (defaults.repetition_penalty !== undefined) request.repetitionPenalty = defaults.repetition_penalty;
  if (r.seed !== undefined && r.seed !== null) request.seed = r.seed;
  if (r.stop !== undefined && r.stop !== null) request.stop = typeof r.stop === 'string' ? [r.stop] : r.stop;
  if (r.tools !== undefined) request.tools = r.tools;
  if (r.tool_choice !== undefined && r.tool_choice !== null) request.toolChoice = r.tool_choice;
  if (r.parallel_tool_calls !== undefined && r.parallel_tool_calls !== null) request.parallelToolCalls = r.parallel_tool_calls;
  if (r.signal !== undefined) request.signal = r.signal;
  // vLLM's and SGLang's name for the template's variables (enable_thinking …).
  if (r.chat_template_kwargs !== undefined && r.chat_template_kwargs !== null) request.templateArgs = r.chat_template_kwargs;
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
    const calls = toolCalls(turn);
    const message = { role: 'assistant', content: calls.length > 0 && turn.content === '' ? null : turn.content };
    // A thinking template's reply: its reasoning apart (as OpenAI-compatible servers return it,
    // and as the template reads it back from the message).
    if (turn.reasoning !== undefined) message.reasoning_content = turn.reasoning;
    if (calls.length > 0) message.tool_calls = calls;
    return {
      id, object: 'chat.completion', created, model: name,
      choices: [{ index: 0, message, finish_reason: turn.finishReason, logprobs: null }],
      usage: usage(turn),
    };
  }
  // Pieces arrive through onToken while the turn runs; the iterator hands them out as chunks
  // and ends with the finish reason and the usage.
  // With tools, text from a call's opening tag on is held back (a prefix of the tag too, until
  // the next piece decides): the calls come as delta.tool_calls when the turn ends.
  const open = request.tools?.length && request.toolChoice !== 'none' ? model.toolCallFormat?.open : undefined;
  const pieces = [];
  let text = '';
  let shown = 0;
  let held = false;
  const reveal = (piece) => {
    if (!open) return piece;
    text += piece;
    if (held) return '';
    let end = text.indexOf(open, shown);
    if (end >= 0) held = true;
    else end = beforePartialTag(text, open, shown);
    const out = text.slice(shown, end);
    shown = end;
    return out;
  };
  // A reply that begins inside a think block (onToken's third argument) streams its reasoning
  // as delta.reasoning_content up to `</think>` (trimmed as the turn's `reasoning` is: leading
  // whitespace dropped, trailing whitespace and a prefix of the tag held until more comes),
  // then its answer as delta.content (leading newlines dropped, as the turn's `content`).
  const CLOSE = '</think>';
  let thinking;
  let thought = '';
  let thoughtShown = 0;
  let answerStarted = false;
  const reasoningPieces = [];
  const think = (piece) => {
    thought += piece;
    const at = thought.indexOf(CLOSE);
    const visible = thought.slice(0, at >= 0 ? at : beforePartialTag(thought, CLOSE)).trim();
    if (visible.length > thoughtShown) reasoningPieces.push(visible.slice(thoughtShown));
    thoughtShown = visible.length;
    if (at < 0) return '';
    thinking = false;
    return thought.slice(at + CLOSE.length);
  };
  const onToken = (piece, _id, opened) => {
    if (thinking === undefined) {
      thinking = opened === true;
      answerStarted = !thinking;
    }
    if (thinking) piece = think(piece);
    if (!answerStarted) {
      piece = piece.replace(/^\n+/, '');
      answerStarted = piece !== '';
    }
    const out = piece === '' ? '' : reveal(piece);
    if (out) pieces.push(out);
    if (out || reasoningPieces.length > 0) notify();
  };
  let wake = null;
  let finished = null;
  const notify = () => { wake?.(); wake = null; };
  const turn = s.chat({ ...request, onToken });
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
        if (pieces.length > 0 || reasoningPieces.length > 0) {
          const delta = {};
          if (reasoningPieces.length > 0) delta.reasoning_content = reasoningPieces.splice(0).join('');
          if (pieces.length > 0) delta.content = pieces.splice(0).join('');
          if (first) delta.role = 'assistant';
          first = false;
          return { done: false, value: chunk(delta, null) };
        }
        if (finished) {
          if (finished.error) { done = true; throw finished.error; }
          const t = finished.turn;
          if (t.reasoning !== undefined && t.reasoning.length > thoughtShown) {
            // What was held back of the reasoning (a reply cut short inside the block).
            reasoningPieces.push(t.reasoning.slice(thoughtShown));
            thoughtShown = t.reasoning.length;
            continue;
          }
          if (open && !finished.calls) {
            // What was held back: the content after the calls, then the calls.
            finished.calls = toolCalls(t);
            const said = text.slice(0, shown);
            const rest = t.content.startsWith(said) ? t.content.slice(said.length) : '';
            const delta = rest !== '' ? { content: rest } : {};
            if (finished.calls.length > 0) delta.tool_calls = finished.calls.map((c, index) => ({ index, ...c }));
            if (rest !== '' || finished.calls.length > 0) {
              if (first) delta.role = 'assistant';
              first = false;
              return { done: false, value: chunk(delta, null) };
            }
          }
          done = true;
          const delta = first ? { role: 'assistant', content: '' } : {};
          return { done: false, value: chunk(delta, t.finishReason, { usage: usage(t) }) };
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
