// A model folder with a chat template, for the chat checks (api.mjs, scripts/demo-smoke.mjs):
// the embedded model copied with a tokenizer_config.json holding Qwen2.5-Instruct's ChatML
// template, or another of tests/fixtures/chat (Qwen3.5's for its XML tool calls and thinking;
// sources in SOURCES.md). Written at test time.
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';

/** Writes the folder (target/browser-test/chat-model, or NAME with TEMPLATE: another template
 *  of tests/fixtures/chat) and returns its path. */
export function writeChatModel(name = 'chat-model', template = 'chatml-qwen2.5-instruct') {
  const dir = `target/browser-test/${name}`;
  mkdirSync(dir, { recursive: true });
  for (const f of ['config.json', 'model.safetensors', 'tokenizer.json', 'generation_config.json']) {
    copyFileSync(`www/models/shakespeare-mamba-3m/${f}`, `${dir}/${f}`);
  }
  const text = readFileSync(`tests/fixtures/chat/${template}.jinja`, 'utf8');
  writeFileSync(`${dir}/tokenizer_config.json`, JSON.stringify({ chat_template: text, eos_token: '<|endoftext|>' }));
  return dir;
}
