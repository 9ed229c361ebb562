import { Model } from 'webmamba';
import type { ChatCompletion, ChatCompletionMessage, ChatCompletionToolCall, ChatCompletionUsage } from 'webmamba';
const model = await Model.fromUrl('/models/shakespeare-mamba-3m/', { onProgress: (p) => console.log(p.phase, p.loaded, p.total) });
const session = model.newSession();
await session.append('Once upon a time');
const ac = new AbortController();
for await (const piece of session.stream({ maxTokens: 8, temperature: 0.8, seed: 1, signal: ac.signal })) document.body.append(piece.text);
const text: string = await session.generate({ maxTokens: 4 });

// Beyond the README's example, for the test (tests/package/consumer.mjs): the same greedy text
// in the page and in the package's Web Worker, which Vite must have bundled with its wasm.
const greedy = async (m: { newSession(): { append(t: string): Promise<unknown>; generate(o: { maxTokens: number }): Promise<string> } }) => {
  const s = m.newSession();
  await s.append('Once upon a time');
  return s.generate({ maxTokens: 12 });
};
const inWorker = await Model.fromUrl('/models/shakespeare-mamba-3m/', { worker: true });

// OpenAI-shaped chat (the same model with a ChatML template in its tokenizer_config.json),
// streamed as pages written against WebLLM read it, then the same request not streamed.
const chatModel = await Model.fromUrl('/models/chat-model/');
const request = { messages: [{ role: 'user', content: 'Good morrow.' }], max_tokens: 8, temperature: 0 };
let streamed = '';
let usage: ChatCompletionUsage | undefined;
for await (const chunk of await chatModel.chat.completions.create({ ...request, stream: true })) {
  streamed += chunk.choices[0]?.delta.content ?? '';
  usage = chunk.usage ?? usage;
}
const whole: ChatCompletion = await chatModel.chat.completions.create(request);
// A required tool call, typed, then sent back with the tool's result.
const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 8 } }, required: ['city'], additionalProperties: false } } }];
const called = await chatModel.chat.completions.create({ ...request, tools, tool_choice: 'required', parallel_tool_calls: false, max_tokens: 120 });
const call: ChatCompletionToolCall | undefined = called.choices[0]?.message.tool_calls?.[0];
const history: ChatCompletionMessage[] = [...request.messages, { role: 'assistant', content: null, tool_calls: call ? [call] : [] },
  { role: 'tool', tool_call_id: call?.id, content: 'rain' }];
const answered = await chatModel.chat.completions.create({ messages: history, tools, max_tokens: 4, temperature: 0 });
Object.assign(document.body.dataset, {
  text,
  page: await greedy(model),
  worker: await greedy(inWorker),
  workerBackend: inWorker.info.backend,
  // which wasm module each runs: Chromium has relaxed SIMD, so Vite must have bundled that one
  simd: model.info.simd satisfies 'relaxed' | 'simd128',
  workerSimd: inWorker.info.simd,
  chatStreamed: streamed,
  chatWhole: whole.choices[0]?.message.content ?? '',
  chatUsage: JSON.stringify(usage),
  toolCall: `${call?.function.name} ${call?.function.arguments} ${called.choices[0]?.finish_reason}`,
  toolCached: String(answered.usage.prompt_tokens_details.cached_tokens),
  done: 'true',
});
