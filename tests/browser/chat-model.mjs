// A model folder with a chat template, for the chat checks (api.mjs, scripts/demo-smoke.mjs):
// the embedded model copied with a tokenizer_config.json holding Qwen2.5-Instruct's ChatML
// template (tests/fixtures/chat, sources in SOURCES.md). Written at test time.
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';

/** Writes the folder (target/browser-test/chat-model) and returns its path. */
export function writeChatModel() {
  const dir = 'target/browser-test/chat-model';
  mkdirSync(dir, { recursive: true });
  for (const f of ['config.json', 'model.safetensors', 'tokenizer.json', 'generation_config.json']) {
    copyFileSync(`www/models/shakespeare-mamba-3m/${f}`, `${dir}/${f}`);
  }
  const template = readFileSync('tests/fixtures/chat/chatml-qwen2.5-instruct.jinja', 'utf8');
  writeFileSync(`${dir}/tokenizer_config.json`, JSON.stringify({ chat_template: template, eos_token: '<|endoftext|>' }));
  return dir;
}
