// Generation throughput of llama-server with 1 and with N concurrent streams (not a test; run by
// hand): node bench.js MODEL.gguf [N=4] [TOKENS=128] [extra server args...]
// Each stream asks for TOKENS tokens with ignore_eos; the rate is tokens over the time from the
// first streamed token to the last, per stream and summed over the streams. With speculative
// decoding (-md DRAFT.gguf, --spec-type ngram-simple) the drafts' acceptance rate is printed too.
import OpenAI from 'openai';
import { startServer } from './lib.js';

const [modelPath, nArg, tokArg, ...extra] = process.argv.slice(2);
if (!modelPath) {
  console.error('usage: node bench.js MODEL.gguf [N=4] [TOKENS=128] [server args...]');
  process.exit(2);
}
const N = Number(nArg || 4);
const TOKENS = Number(tokArg || 128);

const srv = await startServer(['-m', modelPath, '-np', String(N), '-c', String(N * (TOKENS + 64)), '--metrics', ...extra]);
const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 600000 });

async function stream(i) {
  const t0 = performance.now();
  let first = 0;
  let n = 0;
  const s = await client.completions.create({
    model: 'm', prompt: `Story number ${i}:`, max_tokens: TOKENS, temperature: 0, stream: true,
    stream_options: { include_usage: true }, ignore_eos: true,
  });
  for await (const c of s) {
    if (c.usage) n = c.usage.completion_tokens;
    else if (!first) first = performance.now();
  }
  return { n, t0, first, last: performance.now() };
}

async function run(k) {
  const t0 = performance.now();
  const rs = await Promise.all(Array.from({ length: k }, (_, i) => stream(i)));
  const wall = (performance.now() - t0) / 1e3;
  const total = rs.reduce((a, r) => a + r.n, 0);
  const per = rs.map((r) => (r.n - 1) / ((r.last - r.first) / 1e3));
  return { k, total, wall, aggregate: total / wall, perStream: per };
}

// Runs alternate between 1 and N streams so that load from other processes hits both alike;
// the best and the median of REPS runs are reported.
const REPS = Number(process.env.BENCH_REPS || 5);
await run(1); // warm-up
const results = { 1: [], [N]: [] };
for (let rep = 0; rep < REPS; ++rep) {
  for (const k of [1, N]) results[k].push(await run(k));
}
for (const k of [1, N]) {
  const agg = results[k].map((r) => r.aggregate).sort((a, b) => a - b);
  const per = results[k].map((r) => r.perStream.reduce((a, b) => a + b, 0) / r.perStream.length).sort((a, b) => a - b);
  console.log(`${k} stream(s) x ${TOKENS} tokens, ${REPS} runs: total ${agg[agg.length >> 1].toFixed(1)} tokens/s median, ` +
    `${agg[agg.length - 1].toFixed(1)} best; per stream ${per[per.length >> 1].toFixed(1)} median, ${per[per.length - 1].toFixed(1)} best`);
}
const metrics = await (await fetch(`${srv.url}/metrics`)).text();
const counter = (name) => Number((metrics.match(new RegExp(`^llamacpp:${name} (\\S+)$`, 'm')) || [])[1] || 0);
const drafted = counter('n_drafted_total');
if (drafted > 0) {
  const accepted = counter('n_drafted_accepted_total');
  console.log(`speculative decoding: ${accepted} of ${drafted} drafted tokens accepted (${(100 * accepted / drafted).toFixed(1)}%)`);
}
await srv.stop();
