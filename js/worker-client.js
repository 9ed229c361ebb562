// Worker mode (`Model.fromUrl(url, { worker: true })`): the model runs in a dedicated module
// worker (worker.js) and the page holds proxies with the in-page model's methods. Methods that
// compute or read data answer with Promises (`await` works the same on both modes); those that
// only start or stop something (`newSession`, `fork`, `stream`, `stop`, `close`) return at once, as
// in-page, because the worker handles messages in order. Callbacks (onProgress, onToken) and
// AbortSignals cross as events; every call settles — if the worker dies, with an error.
// The worker keys its stand-in AbortControllers `call N` (a load or generate) and `stream N`.

/** Rebuilds the error the worker sent: same name, code, message (and detail) as in-page. */
function rebuild({ name, code, message, detail }) {
  return Object.assign(new Error(message), { name, code }, detail === undefined ? {} : { detail });
}

/** The page's options as a message can carry them: its functions and AbortSignal stay here,
 *  and `relay` tells the worker to stand in for them. Anything else goes as it is, so the wasm
 *  module judges it as in-page (`onProgress: 5` is InvalidInput there, too). */
function portable(options) {
  if (options === undefined || options === null || typeof options !== 'object') return options;
  const out = { ...options };
  delete out.worker;
  const relay = {};
  for (const [name, flag] of [['onProgress', 'progress'], ['onToken', 'token']]) {
    if (typeof options[name] === 'function') {
      delete out[name];
      relay[flag] = true;
    }
  }
  if (options.signal instanceof AbortSignal) {
    delete out.signal;
    relay.signal = true;
  }
  out.relay = relay;
  return out;
}

/** How long an aborted load's worker may take to stop before it is ended anyway. */
const GRACE_MS = 2000;

/** `promise`, or — as soon as `signal` fires — a rejection with the in-page abort error. */
function settledOrAborted(promise, signal) {
  if (!(signal instanceof AbortSignal)) return promise;
  let onAbort;
  const aborted = new Promise((_, reject) => {
    onAbort = () => reject(Object.assign(new Error('aborted: the load was stopped by its AbortSignal'),
      { name: 'AbortError', code: 'Aborted' }));
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  return Promise.race([promise, aborted]).finally(() => signal.removeEventListener('abort', onAbort));
}

/** An error as the wasm module gives it: name WebMambaError and a `code`. */
function webMambaError(code, message) {
  return Object.assign(new Error(message), { name: 'WebMambaError', code });
}

/** One worker and its calls in flight. */
class Channel {
  constructor(worker) {
    this.worker = worker;
    this.calls = 0;
    this.ids = 0; // session and stream ids; 0 is the model
    this.pending = new Map(); // call -> { resolve, reject, options }
    this.dead = null;
    worker.onmessage = ({ data }) => this.receive(data);
    const fail = (what) => (e) => this.kill(
      webMambaError('Worker', `the webmamba worker ${what}: ${e?.message ?? 'no details (see the console)'}`));
    worker.onerror = fail('failed');
    worker.onmessageerror = fail('sent a message that could not be read');
  }

  receive({ call, ok, value, error, event, text, id, thinking, progress }) {
    const p = this.pending.get(call);
    if (!p) return;
    if (event === 'progress') {
      try {
        p.options?.onProgress?.(progress);
      } catch (e) {
        console.error('webmamba: onProgress threw:', e); // as in-page: the load goes on
      }
      return;
    }
    if (event === 'token') {
      try {
        p.options?.onToken?.(text, id, thinking);
      } catch (e) {
        console.error('webmamba: onToken threw:', e); // as in-page: the generation stops there
        this.post({ op: 'stop', id: p.session });
      }
      return;
    }
    this.pending.delete(call);
    p.unlisten?.();
    if (ok) p.resolve(value);
    else p.reject(rebuild(error));
  }

  /** Posts a message without waiting for an answer. */
  post(message) {
    if (!this.dead) this.worker.postMessage({ call: ++this.calls, ...message });
  }

  /** Posts a call; resolves to its answer. `options` (the page's) get their events; their
   *  signal aborts the call until it settles. */
  request(message, options, session) {
    if (this.dead) return Promise.reject(this.dead);
    const call = ++this.calls;
    return new Promise((resolve, reject) => {
      const p = { resolve, reject, options, session };
      try {
        this.worker.postMessage({ call, ...message });
      } catch (e) { // an argument a message cannot carry (a function, a DOM node...)
        reject(webMambaError('InvalidInput', `an argument cannot be sent to the worker: ${e?.message ?? e}`));
        return;
      }
      this.pending.set(call, p);
      p.unlisten = this.forward(options?.signal, `call ${call}`);
    });
  }

  /** Forwards `signal`'s abort to the worker's controller `key`; returns the unsubscriber. */
  forward(signal, key) {
    if (!(signal instanceof AbortSignal)) return () => {};
    const onAbort = () => this.post({ abort: key });
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    return () => signal.removeEventListener('abort', onAbort);
  }

  /** The worker is gone: every call in flight and every later one rejects with `error`. */
  kill(error) {
    this.dead = error;
    this.worker.terminate();
    for (const p of this.pending.values()) p.reject(error);
    this.pending.clear();
  }
}

/** A model in a worker: `Model`'s methods; the data ones resolve asynchronously. */
export class WorkerModel {
  /** Starts a worker and loads the model in it with loader `op` ('fromUrl' | 'fromFiles' |
   *  'load'); resolves once it is loaded. */
  static async open(op, args, options) {
    const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module', name: 'webmamba' });
    const channel = new Channel(worker);
    // The signal reaches the worker as a message (request() forwards it), which stops the
    // downloads there; the page's promise does not wait for that: it rejects at once, as
    // in-page, and the worker is ended once it has answered (or after GRACE_MS at the latest).
    const loaded = channel.request({ op, args: [...args, portable(options)] }, options);
    try {
      const info = await settledOrAborted(loaded, options?.signal);
      return new WorkerModel(channel, info, await channel.request({ op: 'chatInfo', id: 0 }));
    } catch (e) {
      if (e?.name === 'AbortError') {
        const end = () => channel.dead || channel.kill(e);
        loaded.then(end, end);
        setTimeout(end, GRACE_MS);
      } else {
        channel.kill(e);
      }
      throw e;
    }
  }

  constructor(channel, info, chat) {
    this.channel = channel;
    /** Where the model runs and its sizes (a plain object). */
    this.info = info;
    /** The checkpoint's chat template, end-of-turn ids, sampling defaults and tool-call tags (see Model). */
    this.chatTemplate = chat.chatTemplate;
    this.endTokens = chat.endTokens;
    this.generationDefaults = chat.generationDefaults;
    this.toolCallFormat = chat.toolCallFormat;
  }

  renderChat(request) { return this.channel.request({ op: 'renderChat', id: 0, args: [request] }); }

  encode(text) { return this.channel.request({ op: 'encode', id: 0, args: [text] }); }
  decode(ids) { return this.channel.request({ op: 'decode', id: 0, args: [ids] }); }
  savedSessions() { return this.channel.request({ op: 'savedSessions', id: 0 }); }
  clearStore() { return this.channel.request({ op: 'clearStore', id: 0 }); }
  flushStore() { return this.channel.request({ op: 'flushStore', id: 0 }); }
  deleteSession(name) { return this.channel.request({ op: 'deleteSession', id: 0, args: [name] }); }
  cacheStats() { return this.channel.request({ op: 'cacheStats', id: 0 }); }

  newSession() {
    const into = ++this.channel.ids;
    // Answered in order before any call on the session; a failure shows on its first call.
    this.channel.request({ op: 'newSession', into }).catch(() => {});
    return new WorkerSession(this.channel, into);
  }

  async restoreSession(name) {
    const into = ++this.channel.ids;
    await this.channel.request({ op: 'restoreSession', into, args: [name] });
    return new WorkerSession(this.channel, into);
  }

  /** Ends the worker (and the model, its sessions and their GPU memory). */
  free() {
    this.channel.kill(webMambaError('NoSession', 'this model was freed'));
  }
}

/** A session in a worker: `Session`'s methods. */
export class WorkerSession {
  constructor(channel, id) {
    this.channel = channel;
    this.id = id;
  }

  call(op, ...args) { return this.channel.request({ op, id: this.id, args }); }

  append(text) { return this.call('append', text); }
  appendTokens(ids) { return this.call('appendTokens', ids); }
  edit(text) { return this.call('edit', text); }
  rewind(length) { return this.call('rewind', length); }
  tokens() { return this.call('tokens'); }
  text() { return this.call('text'); }
  logits() { return this.call('logits'); }
  stats() { return this.call('stats'); }
  exportState() { return this.call('exportState'); }
  importState(bytes) { return this.call('importState', bytes); }
  save(name) { return this.call('save', name); }
  stop() { this.channel.post({ op: 'stop', id: this.id }); }

  fork() {
    const into = ++this.channel.ids;
    // Like newSession: answered in order before any call on the fork; a failure shows there.
    this.channel.request({ op: 'fork', id: this.id, into }).catch(() => {});
    return new WorkerSession(this.channel, into);
  }
  close() { this.channel.post({ op: 'close', id: this.id }); }

  generate(options, onToken) { return this.generating('generate', options, onToken); }
  chat(request, onToken) { return this.generating('chat', request, onToken); }

  generating(op, options, onToken) {
    // onToken as the 2nd argument wins over options.onToken, as in-page; anything else that is
    // not a function goes on to be judged by the wasm module.
    const plain = options === undefined || options === null || (typeof options === 'object' && !Array.isArray(options));
    if (typeof onToken === 'function' && plain) {
      options = { ...options, onToken };
      onToken = undefined;
    }
    return this.channel.request({ op, id: this.id, args: [portable(options), onToken] }, options, this.id);
  }

  /** An async iterator of { text, id }: one round trip to the worker per token. */
  stream(options) {
    const { channel } = this;
    const into = ++channel.ids;
    const message = { op: 'stream', id: this.id, into, args: [portable(options)] };
    const made = channel.request(message);
    made.catch(() => {}); // its error is the first next()'s
    // The signal outlives the call that made the stream: it ends the stream whenever it fires.
    const unlisten = channel.forward(options?.signal, `stream ${into}`);
    let done = false;
    const step = async (op) => {
      try {
        await made;
        if (done) return { done: true, value: undefined };
        const r = await channel.request({ op, id: into });
        done ||= r.done;
        return r;
      } catch (e) {
        done = true;
        throw e;
      } finally {
        if (done) unlisten();
      }
    };
    return {
      next: () => step('next'),
      return: () => step('return'),
      [Symbol.asyncIterator]() { return this; },
    };
  }
}
