// In-page CPU decode speed over a long generation: the default model, one session, eight
// generate({ maxTokens: 250 }) calls, tok/s of each (a rate that falls with the tokens already
// decoded is a per-token cost that grows). Run from the repository root after `npm run build:demo`:
//   xvfb-run -a node tools/bench/inpage-decode.mjs [chromium|firefox|webkit] [package dir, www/pkg]
import { serve } from '../../scripts/serve.mjs';
import { launch } from '../../tests/browser/engines.mjs';
const pkg = process.argv[3] ?? 'www/pkg';
const server = await serve('tests/browser', 0, { mounts: { '/pkg/': pkg, '/models/': 'www/models' } });
const base = `http://127.0.0.1:${server.address().port}`;
const b = await launch(process.argv[2] ?? 'webkit');
const { page } = await b.open(base);
const r = await page.evaluate(async () => {
  const { Model } = window.webmamba;
  const model = await Model.fromUrl('/models/shakespeare-mamba-3m/', { backend: 'cpu', cache: false });
  const s = model.newSession(); await s.append('Once upon a time');
  const rates = [];
  for (let k = 0; k < 8; k++) {
    const t0 = performance.now();
    await s.generate({ maxTokens: 250, stopAtEos: false });
    rates.push(Math.round(250 / ((performance.now() - t0) / 1000)));
  }
  return rates;
});
console.log(pkg, 'tok/s per 250-token chunk:', r.join(' '));
await b.close(); server.close();
