// Types of webmamba's JavaScript API (index.js). Self-contained on purpose: it needs only the
// ES2022 and DOM libs, so a strict TypeScript app type-checks it without skipLibCheck. The
// wasm-bindgen declarations (webmamba.d.ts) describe the same objects for the wasm module.

/** A loading progress event: monotone per (phase, file), the last one has loaded == total.
 *  Every weight file is announced (download, loaded 0) once the headers are read, before the
 *  first weight byte, so the sum of the totals is the whole download from then on. */
export interface LoadProgress {
  phase: 'download' | 'upload' | 'compile';
  file: string;
  loaded: number;
  total: number;
  /** Set when something failed without stopping the load (e.g. the offline cache is full). */
  warning?: string;
}

/** Options of Model.fromUrl / fromFiles / load; every field is optional. */
export interface LoadOptions {
  /** 'auto' (the default): WebGPU when the browser has it, else the CPU. */
  backend?: 'auto' | 'gpu' | 'cpu';
  /** How weight matrices are stored on the GPU: 'auto' (= f16), 'f32', 'f16', 'int8' or 'q4'
   * (4.5 bits a weight, GGUF's Q4_1 in groups of 64). The CPU backend keeps the checkpoint's weights as stored. */
  weights?: 'auto' | 'f32' | 'f16' | 'int8' | 'q4';
  /** Keep downloaded files in the Cache API (default true): offline, no second download. */
  cache?: boolean;
  /** Called as files download, weights upload and kernels compile. */
  onProgress?: (event: LoadProgress) => void;
  /** Tokens per GPU forward chunk (default 512). */
  maxTokens?: number;
  /** Tokens per checkpoint block of the state cache (default 64). */
  blockSize?: number;
  /** Hybrids (attention layers): the most tokens of context their key/value caches may hold
   *  (default: what 1 GiB of f32 keys and values holds, at most max_position_embeddings where
   *  the model has RoPE). A call past it fails with code `ContextFull`; nothing is truncated. */
  maxContext?: number;
  /** How the GPU's key/value caches store keys and values: 'f32' (default, exact) or 'f16' (half the memory). */
  kvFormat?: 'f32' | 'f16';
  /** Keep every k-th block checkpoint (0, the default: every one); prompt ends always. */
  sparseEvery?: number;
  /** The state cache's budget in bytes (default 64 MiB, raised to four checkpoints where a model's state is larger, as Mamba-2's are; Infinity is fine). */
  budgetBytes?: number;
  /** Run the model in a dedicated Web Worker (default false): the page stays responsive. */
  worker?: boolean;
  /** The CPU backend's threads, a whole number from 1 to 256 (default: one per core,
   *  `navigator.hardwareConcurrency`). More than one needs `worker: true` in a
   *  cross-origin-isolated page (served with `Cross-Origin-Opener-Policy: same-origin` and
   *  `Cross-Origin-Embedder-Policy: require-corp`): the worker then loads the package's
   *  threaded build and starts that many Web Workers sharing its memory. Elsewhere the model
   *  runs on one thread (a warning in `info.warnings` if more were asked for). Results are
   *  bitwise the same at any count. The GPU backend ignores it. */
  threads?: number;
  /** The persistent state store (default off; the demo turns it on): prompt-end and block
   *  checkpoints (and a hybrid's key/value pages) written to the origin private file system
   *  (folder `webmamba-store`), found again after a reload and by every tab of this origin —
   *  a prompt read once is not read again. Only ever used by the same model computing the same
   *  way; a damaged or foreign record is removed and recomputed. Stays on this device.
   *  `true`: a 1 GiB budget, every block checkpoint; or `{ budgetBytes, sparseEvery }` (store
   *  every k-th block checkpoint; prompt ends always). A store that cannot open or write is a
   *  warning (`info.warnings`, `cacheStats().storeWarnings`): the model works from memory. */
  store?: boolean | { budgetBytes?: number; sparseEvery?: number };
  /** Ends the load: it rejects at once with an `AbortError` (code `Aborted`), its downloads
   *  are stopped and what it had allocated is freed. */
  signal?: AbortSignal;
  /** A download that gets no bytes for this many milliseconds (default 30000; a whole number
   *  from 1 to 2147483647) fails with code `Io`, naming the file, the bytes read of the total
   *  and "stalled". Also bounds the wait for a server's answer. */
  stallTimeoutMs?: number;
  /** What files must hash to, by file name, in Subresource Integrity syntax:
   *  `{ 'model.safetensors': 'sha256-<base64>' }` (sha256, sha384 or sha512; several
   *  space-separated digests: the strongest algorithm's, any one matches). Checked as the bytes
   *  stream (every loader: a URL, picked files, bytes); a file that does not match fails the
   *  load with code `Integrity` and is not kept in the offline cache. A name the load does not
   *  read, an unknown algorithm or a malformed digest is `InvalidInput`. From a URL in the Hub's
   *  layout the host's SHA-256 of each LFS file is checked as well, with or without this. */
  integrity?: Record<string, string>;
  /** `fromUrl` of a folder URL, `fromFiles`: the GGUF file to load, a plain file name in the
   *  folder (`'Model-Q4_K_M.gguf'`; a split set's first part, `…-00001-of-00003.gguf`, brings
   *  the others). Not with `quant`, nor with a URL that ends in `.gguf` (it names the file). */
  file?: string;
  /** `fromUrl` of a folder URL in the Hub's layout, `fromFiles`: load the folder's one GGUF
   *  file of this quantization type (`'Q4_K_M'`, any case), chosen from the Hub's file listing
   *  or the picked files' names. The name must hold it as a whole word (`Q4_0` is not
   *  `Q4_0_4_4`); no match or several is `InvalidInput` listing the candidates. */
  quant?: string;
}

/** Options of Session.generate and Session.stream; every field is optional. */
export interface GenerateOptions {
  /** Most tokens to generate (default 64). */
  maxTokens?: number;
  /** 0 (the default): greedy; otherwise sample from softmax(logits / temperature). */
  temperature?: number;
  /** Sample among the k most likely tokens only (0, the default: all). */
  topK?: number;
  /** Sample among the most likely tokens whose probabilities add up to p (1, the default: all). */
  topP?: number;
  /** Penalise tokens already in the history (CTRL / HF: > 1 discourages repeats; 1: off). */
  repetitionPenalty?: number;
  /** Strings that end the generation (not included in the text). */
  stop?: string[];
  /** Reseed the sampler (otherwise it continues its random stream, so stop + generate again
   *  equals one uninterrupted run). */
  seed?: number;
  /** Stop after the end-of-text token (default true). */
  stopAtEos?: boolean;
  /** Called with each piece of text as it arrives; in a chat turn, `thinking` is true when the
   *  reply begins inside a think block the prompt opened (see ChatTurn.reasoning). */
  onToken?: (text: string, id: number, thinking?: boolean) => void;
  /** Stops between tokens: generate then rejects with an AbortError, a stream just ends; the
   *  session keeps every token fed so far and continues from there. */
  signal?: AbortSignal;
  /** Structured output (generate and chat; not stream): the text is constrained token by token
   *  (llguidance) to JSON valid under a JSON schema (OpenAI's shape), any JSON object, or a
   *  regular expression. A constrained generation that stopped unfinished (stop(), the signal,
   *  maxTokens, a stop string) is continued by the next generate with the same responseFormat
   *  on the same history; stop strings, onToken, stop() and the signal work as in free text. */
  responseFormat?: ResponseFormat;
}

/** One chat message, as chat templates read it (any other field is passed on to the template). */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool' | string;
  content: string;
  [field: string]: unknown;
}

/** A chat turn: the conversation (rendered with the model's chat template, as HF's
 *  `apply_chat_template` renders it) and generate options. */
export interface ChatRequest extends GenerateOptions {
  messages: ChatMessage[];
  /** Tool definitions (JSON schemas, `{ type: 'function', function: { name, description,
   *  parameters } }`), for templates that support them. */
  tools?: object[];
  /** Documents (`{ title, text }`), for templates that support them. */
  documents?: object[];
  /** Other variables the template reads (HF's `**kwargs`, e.g. `{ enable_thinking: false }`). */
  templateArgs?: Record<string, unknown>;
  /** A template to use instead of the model's (Jinja, as in tokenizer_config.json). */
  chatTemplate?: string;
  /** renderChat only: end with the assistant's turn opening (default false there; a chat turn
   *  always has it). */
  addGenerationPrompt?: boolean;
  /** With tools: 'auto' (default: calls in the reply are read back into `toolCalls`), 'none'
   *  (not read), 'required' or one named function (the reply is constrained to calls in the
   *  template's own format, arguments valid under the tool's parameters schema, held to the
   *  function's `strict` as a response_format's schema is). */
  toolChoice?: ToolChoice;
  /** With a required call: several calls in one reply (default true) or exactly one. */
  parallelToolCalls?: boolean;
}

/** OpenAI's tool_choice. */
export type ToolChoice = 'none' | 'auto' | 'required' | { type: 'function'; function: { name: string } };

/** A tool call read from a reply. */
export interface ToolCall {
  name: string;
  /** The arguments as the JSON text the model wrote. */
  arguments: string;
}

/** What a reply must be: free text, JSON (a schema, or any object), or a regex's match. */
export type ResponseFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  /** `strict: true`: OpenAI's contract (every object holds exactly the properties it names, all
   *  required); absent: an object naming properties holds no others; `false`: JSON Schema's
   *  reading (other properties allowed). */
  | { type: 'json_schema'; json_schema: { name?: string; schema: object | boolean; strict?: boolean } }
  | { type: 'regex'; regex: string };

/** What a chat turn did. */
export interface ChatTurn {
  /** The reply (without the end-of-turn token). */
  text: string;
  /** Tokens of the rendered conversation (the history before the reply). */
  promptTokens: number;
  /** Of those, the ones this turn ran through the model. */
  prefilled: number;
  /** Of those, the ones that came from the live state or a cached checkpoint. */
  cachedTokens: number;
  /** Tokens generated (the end-of-turn token included when it came). */
  completionTokens: number;
  /** 'stop' (an end-of-turn token or a stop string), 'length' (maxTokens) or 'tool_calls'. */
  finishReason: 'stop' | 'length' | 'tool_calls';
  /** The reply without its tool calls (the text when it made none), and without its thinking
   *  when there is some (after `</think>`, leading newlines dropped). */
  content: string;
  /** The thinking, when the rendered prompt ends inside an open `<think>` (a thinking
   *  template's generation prompt: Qwen3.5's with `enable_thinking` on, its default): the text
   *  before `</think>`, trimmed (all of it when the reply never closed the block); undefined
   *  otherwise. A required tool call or a responseFormat constrains only what follows the
   *  thinking (free text, then `\n</think>\n\n`), so the model may think first and the
   *  template's rendering of the turn is the model's own tokens. */
  reasoning?: string;
  /** Tool calls read from the reply in the template's format (see ChatRequest.toolChoice). */
  toolCalls: ToolCall[];
}

/** OpenAI's tool call, as create returns it and takes it back in an assistant message. */
export interface ChatCompletionToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** A message as chat.completions.create takes it (OpenAI's shape: an assistant message with
 *  tool_calls may have content null; a tool call's arguments JSON text is parsed for the
 *  template). */
export interface ChatCompletionMessage {
  role: 'system' | 'user' | 'assistant' | 'tool' | string;
  content: string | null;
  tool_calls?: ChatCompletionToolCall[];
  tool_call_id?: string;
  [field: string]: unknown;
}

/** `model.chat.completions.create(request)`: OpenAI's request shape (the fields webmamba
 *  reads; sampling defaults from generation_config.json, else OpenAI's). */
export interface ChatCompletionRequest {
  messages: ChatCompletionMessage[];
  stream?: boolean;
  /** Most tokens to generate (default: generation_config's max_new_tokens, else 256). */
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  temperature?: number | null;
  top_p?: number | null;
  seed?: number | null;
  stop?: string | string[] | null;
  tools?: object[];
  /** See ChatRequest.toolChoice. */
  tool_choice?: ToolChoice | null;
  parallel_tool_calls?: boolean | null;
  /** Variables for the chat template (vLLM's and SGLang's extension; ChatRequest.templateArgs),
   *  e.g. `{ enable_thinking: false }`. */
  chat_template_kwargs?: Record<string, unknown> | null;
  /** JSON valid under a schema, any JSON object, or (webmamba's) a regex's match: enforced on
   *  every token. */
  response_format?: ResponseFormat;
  stream_options?: { include_usage?: boolean } | null;
  /** webmamba's: stops the generation (the stream ends, create rejects with AbortError). */
  signal?: AbortSignal;
}

export interface ChatCompletionUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** cached_tokens: prompt tokens that came from the live state or a cached checkpoint. */
  prompt_tokens_details: { cached_tokens: number };
}

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: {
    index: number;
    /** reasoning_content: the turn's thinking (ChatTurn.reasoning), where there is some; sent
     *  back in the conversation, the template reads it from there. */
    message: { role: 'assistant'; content: string | null; reasoning_content?: string; tool_calls?: ChatCompletionToolCall[] };
    finish_reason: 'stop' | 'length' | 'tool_calls';
    logprobs: null;
  }[];
  usage: ChatCompletionUsage;
}

export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: {
    index: number;
    /** With tools, text from a call's opening tag on is held back; the calls come whole in one
     *  delta before the last chunk. Thinking comes as reasoning_content before the content,
     *  trimmed as ChatTurn.reasoning is. */
    delta: { role?: 'assistant'; content?: string; reasoning_content?: string; tool_calls?: (ChatCompletionToolCall & { index: number })[] };
    finish_reason: 'stop' | 'length' | 'tool_calls' | null;
    logprobs: null;
  }[];
  /** On the last chunk (whatever stream_options says). */
  usage?: ChatCompletionUsage;
}

export interface ChatCompletions {
  completions: {
    create(request: ChatCompletionRequest & { stream: true }): Promise<AsyncIterableIterator<ChatCompletionChunk>>;
    create(request: ChatCompletionRequest & { stream?: false | null }): Promise<ChatCompletion>;
    create(request: ChatCompletionRequest): Promise<ChatCompletion | AsyncIterableIterator<ChatCompletionChunk>>;
  };
}

/** One generated token: its id and the text it completes (may be ''). */
export interface TokenPiece {
  text: string;
  id: number;
}

/** What a loaded model is and where it runs. */
export interface ModelInfo {
  /** 'gpu' or 'cpu'. */
  backend: string;
  /** The GPU adapter ('' on the CPU), and why the CPU was chosen if it was. */
  adapter: string;
  /** config.json's `model_type`: 'mamba', 'falcon_mamba' or 'mamba2'. */
  architecture: string;
  dModel: number;
  layers: number;
  vocab: number;
  /** Bytes of one recurrent state (one checkpoint). */
  stateBytes: number;
  /** 'f32', 'f16', 'int8' or 'q4' on the GPU; on the CPU the checkpoint's dtype. */
  weightFormat: string;
  /** Every format the weight matrices are stored in: on the GPU `weightFormat` and, for a GGUF
   * file, the quantized types computed on as stored ('Q8_0', 'Q4_K', 'Q6_K', …); on the CPU
   * `[weightFormat]`. */
  weightFormats: string[];
  weightBytes: number;
  /** GPU bytes of activation buffers (0 on the CPU). */
  activationBytes: number;
  /** GPU bytes of the working state and the checkpoint-cache slots (0 on the CPU). */
  stateSlotBytes: number;
  /** f16 storage: nonzero weights below f16's normal range (rounded). */
  f16Subnormal: number;
  /** f16 storage: weights beyond ±65504 (clamped). */
  f16Overflow: number;
  /** The most tokens of context (attention layers' key/value caches); Infinity without attention. */
  maxContext: number;
  /** Bytes the key/value caches grow by per token of context (0 without attention). */
  kvBytesPerToken: number;
  /** How the key/value caches store keys and values: 'f32' or 'f16' ('f32' on the CPU). */
  kvFormat: 'f32' | 'f16';
  /** Bytes of one key/value page of the checkpoint cache: `blockSize` positions of every
   *  attention layer's keys and values, shared by every checkpoint after them (0 without
   *  attention). */
  pageBytes: number;
  /** Tokens per checkpoint block of the state cache (block checkpoints sit at its multiples,
   *  prompt-end checkpoints anywhere). */
  blockSize: number;
  /** Threads of the CPU backend's forward pass (1 on the GPU; see the `threads` option). */
  threads: number;
  /** The wasm module that runs: 'relaxed' — the relaxed-SIMD module, chosen where the engine
   *  has relaxed SIMD (Chrome 114+, Firefox 146+): the CPU backend's matrix products use fused
   *  multiply-adds where the CPU has them, so its results may differ in the last bits from
   *  another machine's — or 'simd128' (Safari, or `init(url)` of webmamba_bg.wasm). */
  simd: 'relaxed' | 'simd128';
  /** What went wrong without stopping the load (e.g. the offline cache is full). */
  warnings: string[];
}

/** What an operation did: tokens run through the model and the checkpoint it resumed from. */
export interface Outcome {
  prefilled: number;
  /** Length of the prefix whose cached checkpoint was restored (undefined if none). */
  resumedFrom?: number;
}

/** A session's counters, its checkpoints and the cache's. */
export interface Stats {
  tokensPrefilled: number;
  hits: number;
  /** Operations that resumed from a checkpoint read from the persistent state store. */
  storeHits: number;
  misses: number;
  /** History lengths that have a cached checkpoint. */
  checkpoints: Uint32Array;
  checkpointBytes: number;
  historyLength: number;
  cacheEntries: number;
  cacheBytes: number;
  cacheBudget: number;
  /** Of `cacheBytes`, a hybrid's key/value pages' (each counted once). */
  cachePageBytes: number;
  /** A hybrid's: the blocks of this history (block b: tokens b·blockSize..(b+1)·blockSize)
   *  whose key/value page is cached. */
  kvPages: Uint32Array;
}

/** The checkpoint cache's counters across sessions (`model.cacheStats()`). */
export interface CacheStats {
  /** Checkpoints held. */
  entries: number;
  /** Bytes they take: `stateBytes` + `pageBytes`, within `budgetBytes`. */
  bytesUsed: number;
  /** Of `bytesUsed`, the checkpoints' own: states, prompt-end logits, partial last blocks. */
  stateBytes: number;
  /** Of `bytesUsed`, a hybrid's key/value pages', each counted once however many checkpoints
   *  and sessions share it. */
  pageBytes: number;
  /** Key/value pages held. */
  pages: number;
  budgetBytes: number;
  /** Checkpoints evicted so far. */
  evictions: number;
  /** Whether the persistent state store is on (load option `store`, and it opened). */
  store: boolean;
  /** Bytes of the store's records on disk as this model last counted them (another tab's
   *  writes since are not in it); 0 without a store. */
  storeBytes: number;
  /** Records read from the store and used. */
  storeHits: number;
  /** Records written to the store. */
  storeWrites: number;
  /** Records found unusable (damaged, cut short, another model's): each was removed. */
  storeMisses: number;
  /** Records removed to keep the store within its budget. */
  storeEvictions: number;
  /** The store's latest warnings (a failed write, a full quota, a damaged record removed),
   *  newest last, at most 32; each was also logged with console.warn. */
  storeWarnings: string[];
}

/** Every failure: an Error named 'WebMambaError' (or 'AbortError' for an abort) with a code. */
export interface WebMambaError extends Error {
  name: 'WebMambaError' | 'AbortError';
  code:
    | 'NoAdapter' | 'DeviceRequest' | 'Gpu' | 'DeviceLost' | 'OutOfMemory' | 'LimitExceeded' | 'ContextFull'
    | 'UnsupportedModel' | 'Config' | 'Safetensors' | 'Gguf' | 'MissingTensor' | 'ShapeMismatch'
    | 'UnsupportedDtype' | 'NonFiniteWeight' | 'NonFiniteOutput' | 'Tokenizer' | 'Template' | 'Io' | 'Integrity' | 'CacheBudget'
    | 'StateMismatch' | 'CorruptState' | 'Storage' | 'Busy' | 'NoSession' | 'InvalidInput'
    | 'Readback' | 'Aborted' | 'Worker' | 'Internal';
  /** What the message leaves out, where there is more: a structured-output format the grammar
   *  engine refused (code `InvalidInput`) keeps the engine's own text here, for a bug report. */
  detail?: string;
}

type Bytes = Uint8Array | ArrayBuffer;
type Ids = Uint32Array | number[];

/** Starts the wasm module (optional: the loaders call it); `wasm` overrides where it is fetched. */
export declare function init(wasm?: string | URL | Response | BufferSource | WebAssembly.Module): Promise<unknown>;

/** A model loaded in this page. */
export declare class Model {
  private constructor();
  /** Loads a Hugging Face Mamba folder from a URL (any static host, or the Hub's
   *  `https://huggingface.co/<repo>/resolve/main/`), streamed piece by piece — or a GGUF file:
   *  a URL ending in `.gguf` (split parts are found beside it), or a folder URL with
   *  `options.quant` or `options.file`. */
  static fromUrl(baseUrl: string | URL, options: LoadOptions & { worker: true }): Promise<WorkerModel>;
  static fromUrl(baseUrl: string | URL, options?: LoadOptions & { worker?: false }): Promise<Model>;
  static fromUrl(baseUrl: string | URL, options?: LoadOptions): Promise<Model | WorkerModel>;
  /** Loads a folder the user picked (`<input type="file" webkitdirectory>`) or `File`s: a
   *  Hugging Face folder, or a GGUF file and its split parts (the only GGUF file picked where
   *  there is no config.json, or the one `options.file` / `options.quant` names). */
  static fromFiles(files: FileList | File[], options: LoadOptions & { worker: true }): Promise<WorkerModel>;
  static fromFiles(files: FileList | File[], options?: LoadOptions & { worker?: false }): Promise<Model>;
  static fromFiles(files: FileList | File[], options?: LoadOptions): Promise<Model | WorkerModel>;
  /** Loads from bytes you hold: config.json, model.safetensors, tokenizer.json — or `null`, a
   *  GGUF file's bytes (it holds its own config; `integrity` calls it 'model.gguf') and
   *  optionally a tokenizer.json to use instead of the file's. */
  static load(config: Bytes | null, weights: Bytes, tokenizer: Bytes | undefined, options: LoadOptions & { worker: true }): Promise<WorkerModel>;
  static load(config: Bytes | null, weights: Bytes, tokenizer?: Bytes, options?: LoadOptions & { worker?: false }): Promise<Model>;
  static load(config: Bytes | null, weights: Bytes, tokenizer?: Bytes, options?: LoadOptions): Promise<Model | WorkerModel>;
  /** Deletes the offline copies of the files under `baseUrl` (a `.gguf` URL: that file and
   *  its split set's other parts); resolves to how many. */
  static clearCache(baseUrl: string | URL): Promise<number>;
  /** Removes every record of the persistent state store (every model's, for every tab of this
   *  origin); resolves to how many files went (0 without a store). */
  clearStore(): Promise<number>;
  /** Resolves once every record the calls so far made is in the persistent state store (they
   *  are written after each call returns: a page that hands off to another tab, or closes,
   *  awaits this first); at once without a store. */
  flushStore(): Promise<void>;

  readonly info: ModelInfo;
  /** The checkpoint's chat template (tokenizer_config.json's `chat_template` or
   *  chat_template.jinja), undefined when it has none. */
  readonly chatTemplate: string | undefined;
  /** The token ids that end a generation (`stopAtEos`): generation_config.json's
   *  `eos_token_id` (one or a list), config.json's, the tokenizer's eos token. */
  readonly endTokens: Uint32Array;
  /** generation_config.json's sampling defaults (`temperature`, `top_p`, `top_k`,
   *  `repetition_penalty`, `do_sample`, `max_new_tokens`), as given. */
  readonly generationDefaults: Record<string, number | boolean>;
  /** The conversation rendered with the chat template, as HF's
   *  `apply_chat_template(..., tokenize=False)`. A template error rejects with `Template`. */
  renderChat(request: ChatRequest): string;
  /** The tags around a tool call in the chat template's format and how its arguments are
   *  written: 'json' (one object), 'xml' (Qwen3.5's `<parameter=…>` elements), 'pythonic'
   *  (LFM2's `[f(a=1)]`, which its template does not write from tool_calls: chat() and
   *  renderChat() write an assistant message's tool_calls into its content). Undefined when it
   *  has none webmamba can read. */
  readonly toolCallFormat: { open: string; close: string; arguments: 'json' | 'xml' | 'pythonic' } | undefined;
  /** OpenAI-shaped chat completions (pages written against WebLLM / the OpenAI SDK). */
  readonly chat: ChatCompletions;
  /** Token ids of `text`. */
  encode(text: string): Uint32Array;
  /** Text of `ids`. */
  decode(ids: Ids): string;
  /** An empty history with its own live state. */
  newSession(): Session;
  /** A session saved with `session.save(name)`, here or before a reload: its next `append`
   *  prefills only the new tokens. Another model's session rejects with `StateMismatch`. */
  restoreSession(name: string): Promise<Session>;
  /** The names of the sessions saved in this browser. */
  savedSessions(): Promise<string[]>;
  /** Forgets a saved session; resolves to whether it existed. */
  deleteSession(name: string): Promise<boolean>;
  /** The checkpoint cache's counters across sessions (state bytes and page bytes apart). */
  cacheStats(): CacheStats;
  /** Frees the model's memory now (otherwise when it is garbage-collected). */
  free(): void;
}

/** A conversation: a token history and its live state on the model. */
export declare class Session {
  private constructor();
  append(text: string): Promise<Outcome>;
  appendTokens(ids: Ids): Promise<Outcome>;
  /** Replaces the history with `text`, resuming from its longest cached prefix. */
  edit(text: string): Promise<Outcome>;
  /** Truncates the history to `length` tokens, resuming from the nearest checkpoint. */
  rewind(length: number): Promise<Outcome>;
  generate(options?: GenerateOptions, onToken?: (text: string, id: number) => void): Promise<string>;
  stream(options?: GenerateOptions): AsyncIterableIterator<TokenPiece>;
  /** One chat turn: renders `request.messages` with the chat template and its generation
   *  prompt, feeds only what extends the history (the previous reply is already there, as the
   *  model's own tokens) and generates to an end-of-turn token. */
  chat(request: ChatRequest, onToken?: (text: string, id: number, thinking?: boolean) => void): Promise<ChatTurn>;
  /** Stops a running generate or stream after the current token. */
  stop(): void;
  tokens(): Uint32Array;
  text(): string;
  /** The logits after the last token (undefined before any); throws `NonFiniteOutput` when
   *  the model computed NaN or ±Inf there. */
  logits(): Float32Array | undefined;
  stats(): Stats;
  /** The live state, the history and the model's fingerprint, as bytes. */
  exportState(): Promise<Uint8Array>;
  importState(bytes: Bytes): Promise<void>;
  /** Stores the session in this browser (IndexedDB) under `name`. */
  save(name: string): Promise<void>;
  /** A new session at this one's position (history, logits, state), sharing its checkpoints:
   *  nothing is read again. For branching chats, best-of-n, tree search. */
  fork(): Session;
  /** Releases the session's state; later calls reject with `NoSession`. */
  close(): void;
  free(): void;
}

/** A model running in a Web Worker (`{ worker: true }`): Model's methods; those that read or
 *  compute data resolve asynchronously. */
export declare class WorkerModel {
  private constructor();
  readonly info: ModelInfo;
  /** See Model.chatTemplate. */
  readonly chatTemplate: string | undefined;
  /** See Model.endTokens. */
  readonly endTokens: Uint32Array;
  /** See Model.generationDefaults. */
  readonly generationDefaults: Record<string, number | boolean>;
  /** See Model.renderChat. */
  renderChat(request: ChatRequest): Promise<string>;
  /** See Model.toolCallFormat. */
  readonly toolCallFormat: { open: string; close: string; arguments: 'json' | 'xml' | 'pythonic' } | undefined;
  /** See Model.chat. */
  readonly chat: ChatCompletions;
  encode(text: string): Promise<Uint32Array>;
  decode(ids: Ids): Promise<string>;
  newSession(): WorkerSession;
  restoreSession(name: string): Promise<WorkerSession>;
  savedSessions(): Promise<string[]>;
  /** See Model.clearStore. */
  clearStore(): Promise<number>;
  /** See Model.flushStore. */
  flushStore(): Promise<void>;
  deleteSession(name: string): Promise<boolean>;
  cacheStats(): Promise<CacheStats>;
  /** Ends the worker, and with it the model and its sessions. */
  free(): void;
}

/** A session of a WorkerModel: Session's methods; those that read data resolve asynchronously. */
export declare class WorkerSession {
  private constructor();
  append(text: string): Promise<Outcome>;
  appendTokens(ids: Ids): Promise<Outcome>;
  edit(text: string): Promise<Outcome>;
  rewind(length: number): Promise<Outcome>;
  generate(options?: GenerateOptions, onToken?: (text: string, id: number) => void): Promise<string>;
  stream(options?: GenerateOptions): AsyncIterableIterator<TokenPiece>;
  chat(request: ChatRequest, onToken?: (text: string, id: number, thinking?: boolean) => void): Promise<ChatTurn>;
  stop(): void;
  tokens(): Promise<Uint32Array>;
  text(): Promise<string>;
  logits(): Promise<Float32Array | undefined>;
  stats(): Promise<Stats>;
  exportState(): Promise<Uint8Array>;
  importState(bytes: Bytes): Promise<void>;
  save(name: string): Promise<void>;
  fork(): WorkerSession;
  close(): void;
}
