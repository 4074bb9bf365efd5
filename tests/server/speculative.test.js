// Speculative decoding: greedy output is identical with and without drafts, whoever drafts; a
// draft model equal to the main model has every draft accepted; the counts reach timings and
// /metrics; a draft model with another vocabulary is refused at start.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, postJson, model, waitFor } from './lib.js';

const MAIN = ['-m', model('synth-qwen3-f16.gguf'), '-t', '1', '-c', '512'];
const SAMPLED = { temperature: 0.9, seed: 1234, top_k: 0, top_p: 1, min_p: 0 };
const PROMPTS = ['Once upon a time', 'The quick brown fox jumps over the lazy dog. The quick brown'];

// greedy, or sampled with a fixed seed: drafts change neither (a token is sampled once per
// position, in order, whether it was drafted or not)
async function greedy(srv, prompt, n = 48, extra = { temperature: 0 }) {
  const r = await postJson(`${srv.url}/completion`, { prompt, n_predict: n, ignore_eos: true, n_probs: 1, ...extra });
  assert.equal(r.status, 200, r.text);
  return r.json;
}

async function reference() {
  const srv = await startServer(MAIN);
  try {
    const out = [];
    for (const p of PROMPTS) out.push(await greedy(srv, p));
    out.push(await greedy(srv, PROMPTS[1], 48, SAMPLED));
    assert.equal(out[0].timings.draft_n, undefined, 'no draft counts without speculative decoding');
    return out;
  } finally {
    assert.equal((await srv.stop()).code, 0);
  }
}

let refs;
test('the reference: greedy output without drafts', async () => {
  refs = await reference();
});

async function withDrafts(args, check) {
  const srv = await startServer([...MAIN, ...args, '--metrics']);
  try {
    let drafted = 0, accepted = 0;
    for (let i = 0; i < PROMPTS.length; ++i) {
      const r = await greedy(srv, PROMPTS[i]);
      assert.deepEqual(r.tokens, refs[i].tokens, `prompt ${i}: the same tokens as without drafts`);
      assert.equal(r.content, refs[i].content);
      drafted += r.timings.draft_n;
      accepted += r.timings.draft_n_accepted;
      check(r);
    }
    const sampled = await greedy(srv, PROMPTS[1], 48, SAMPLED);
    assert.deepEqual(sampled.tokens, refs[PROMPTS.length].tokens, 'seeded sampling: the same tokens as without drafts');
    drafted += sampled.timings.draft_n ?? 0;
    accepted += sampled.timings.draft_n_accepted ?? 0;
    // the counters move at the end of the step that sent the last token: wait for it
    const want = [new RegExp(`llamacpp:n_drafted_total ${drafted}\\n`), new RegExp(`llamacpp:n_drafted_accepted_total ${accepted}\\n`)];
    const metrics = await waitFor(async () => {
      const text = await (await fetch(`${srv.url}/metrics`)).text();
      return want.every((re) => re.test(text)) ? text : null;
    }, 5000);
    assert.ok(metrics, `the draft counts of /metrics are the sums of the timings (${drafted}, ${accepted})`);
    return { drafted, accepted };
  } finally {
    assert.equal((await srv.stop()).code, 0);
  }
}

test('a draft model equal to the main model: every draft accepted, identical text', async () => {
  const { drafted, accepted } = await withDrafts(['-md', model('synth-qwen3-f16.gguf'), '--draft-max', '6', '--draft-p-min', '0'], (r) => {
    assert.ok(r.timings.draft_n > 0);
    assert.equal(r.timings.draft_n_accepted, r.timings.draft_n);
  });
  // the seeded sampled run keeps only the greedy drafts its samples agree with
  assert.ok(accepted > 0 && accepted <= drafted);
});

test('a different draft model (another quantization): identical text', async () => {
  const { drafted } = await withDrafts(['-md', model('synth-qwen3-Q4_K_M.gguf'), '--draft-max', '4', '--draft-p-min', '0'], (r) => {
    assert.ok(r.timings.draft_n_accepted <= r.timings.draft_n);
  });
  assert.ok(drafted > 0);
});

test('n-gram drafts from the prompt and history: identical text', async () => {
  const { drafted } = await withDrafts(['--spec-type', 'ngram-simple', '--draft-max', '8'], () => {});
  assert.ok(drafted > 0, 'the repeated prompt gives n-gram drafts');
});

test('a draft model with another vocabulary is refused at start', async () => {
  await assert.rejects(
    startServer([...MAIN, '-md', model('stories260K.gguf')], { timeoutMs: 20000 }),
    /draft model .* cannot draft for .*(tokens|token \d+|tokenizer type)/,
  );
  await assert.rejects(startServer([...MAIN, '--spec-type', 'ngram-mod'], { timeoutMs: 20000 }), /--spec-type.*ngram-simple/);
});
