#!/usr/bin/env node
// The README's browser support matrix, made from what the browser tests found: each of
// tests/browser/{api,loading,robustness,faults,store,threads}.mjs writes target/support/<name>.json (per
// engine: version, WebGPU adapter or why not, checks passed/failed, what was covered).
//   node scripts/support-matrix.mjs          prints the table
//   node scripts/support-matrix.mjs --check  fails when the README's table says otherwise
//                                             (the test command runs this last)
//   node scripts/support-matrix.mjs --write  rewrites the README's table
// The version and check-count columns are what the last full run found; a different version or
// count here is reported, not a failure (Debian updates its browsers; WEBMAMBA_BIG adds checks,
// and WebKit's flaky cancel is a note, not a check), so the check holds what each engine can do:
// WebGPU, the CPU backend, worker mode, the offline cache, saved sessions, the state store,
// CPU threads —
// and that nothing
// failed.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

const TESTS = ['api', 'loading', 'robustness', 'faults', 'store', 'threads'];
const ENGINES = { chromium: 'Chromium', firefox: 'Firefox ESR', webkit: 'WebKitGTK (MiniBrowser)' };
const START = '<!-- support-matrix:start (scripts/support-matrix.mjs writes this table; npm test checks it) -->';
const END = '<!-- support-matrix:end -->';

const results = Object.fromEntries(TESTS.map((t) => {
  const file = `target/support/${t}.json`;
  return [t, existsSync(file) ? JSON.parse(readFileSync(file, 'utf8')) : {}];
}));

const yes = (ok) => (ok ? 'yes' : 'no');
/** One engine's row: [engine, version, WebGPU, CPU, worker, cache, sessions, store, threads, checks]. */
function row(engine) {
  const runs = TESTS.map((t) => results[t][engine]).filter(Boolean);
  if (runs.length === 0) return null;
  const all = (f) => runs.every(f);
  const passed = (t) => results[t][engine] && results[t][engine].failed === 0;
  const first = runs[0];
  const gpu = first.webgpu ? 'yes' : `no (${first.webgpuNote ?? 'no adapter'})`;
  const checks = TESTS.map((t) => {
    const r = results[t][engine];
    return r ? `${t} ${r.passed}${r.failed ? ` (${r.failed} failed)` : ''}` : `${t} not run`;
  }).join(' · ');
  return [
    ENGINES[engine], first.version, gpu,
    yes(all((r) => r.failed === 0)),
    yes(TESTS.every((t) => !results[t][engine] || (passed(t) && results[t][engine].worker))),
    passed('loading') ? (results.loading[engine]?.cache === 'yes' ? 'yes' : results.loading[engine]?.cache ?? 'no') : 'no',
    yes(passed('api') && results.api[engine]?.sessionStore),
    passed('store') ? (results.store[engine]?.store === true ? 'yes' : results.store[engine]?.store ?? 'no') : 'no',
    passed('threads') ? (results.threads[engine]?.threads === true ? 'yes' : results.threads[engine]?.threads ?? 'no') : 'no',
    checks,
  ];
}

const HEADER = ['Engine', 'Version tested', 'WebGPU here', 'CPU backend', 'Worker mode', 'Offline cache',
  'Saved sessions', 'State store', 'CPU threads', 'Checks passed'];
const rows = Object.keys(ENGINES).map(row).filter(Boolean);
const line = (cells) => `| ${cells.join(' | ')} |`;
const table = [line(HEADER), line(HEADER.map(() => '---')), ...rows.map(line)].join('\n');

const mode = process.argv[2];
if (!mode) {
  console.log(table);
  process.exit(0);
}
const readme = readFileSync('README.md', 'utf8');
const a = readme.indexOf(START);
const b = readme.indexOf(END);
if (a < 0 || b < a) throw new Error('README.md has no support matrix markers');
if (mode === '--write') {
  writeFileSync('README.md', `${readme.slice(0, a + START.length)}\n${table}\n${readme.slice(b)}`);
  console.log('support matrix written to README.md');
  process.exit(0);
}
// --check: every column but the version and the counts must agree.
const documented = readme.slice(a + START.length, b).trim().split('\n').slice(2)
  .map((l) => l.split('|').slice(1, -1).map((c) => c.trim()));
const found = rows.map((r) => r.map((c) => String(c)));
let ok = documented.length === found.length;
for (const [i, r] of found.entries()) {
  const d = documented[i] ?? [];
  if (d[1] !== r[1]) console.log(`support matrix: ${r[0]} tested here is ${r[1]}; the README says ${d[1]}`);
  const last = r.length - 1;
  if (d[last] !== r[last]) console.log(`support matrix: ${r[0]}: checks here ${r[last]}; the README says ${d[last]}`);
  const failed = /failed|not run/.test(r[last]);
  const same = !failed && r.every((c, j) => j === 1 || j === last || c === d[j]);
  if (!same) {
    ok = false;
    console.error(`support matrix: README says\n  ${line(d)}\nthe tests found\n  ${line(r)}`);
  }
}
if (!ok) {
  console.error('support matrix: README.md is out of date: `node scripts/support-matrix.mjs --write` after a full npm test');
  process.exit(1);
}
console.log(`support matrix: README.md agrees with the tests (${found.length} engines)`);
