// llama.cpp's streaming extras, which its web UI asks for on every request: timings_per_token
// (every chunk carries the task's timings so far) and return_progress (prompt_progress chunks
// while the prompt is read, one per decode step that reads some of it), on /completion,
// /v1/chat/completions and /v1/completions; without the flags, chunks carry neither.
import { describe, before, after, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, model, postJson, readSse } from './lib.js';

const STORIES = model('stories260K.gguf');
const N_BATCH = 32;   // small batches: a prompt of a few hundred tokens takes several steps
const TIMING_KEYS = ['prompt_n', 'prompt_ms', 'prompt_per_token_ms', 'prompt_per_second',
  'predicted_n', 'predicted_ms', 'predicted_per_token_ms', 'predicted_per_second'];

async function stream(url, body) {
  const r = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ ...body, stream: true }) });
  assert.equal(r.status, 200);
  return (await readSse(r)).events;
}

function assertTimings(t, what) {
  assert.ok(t && typeof t === 'object', `${what}: a timings object`);
  for (const k of TIMING_KEYS) {
    assert.equal(typeof t[k], 'number', `${what}: timings.${k}`);
    assert.ok(Number.isFinite(t[k]) && t[k] >= 0, `${what}: timings.${k} = ${t[k]}`);
  }
}

// The progress chunks come first, one per step, reading the prompt to its end.
function assertProgress(events, { total, cache }) {
  const prog = events.filter((e) => e.prompt_progress);
  assert.ok(prog.length > 0, 'prompt_progress chunks');
  const firstOther = events.findIndex((e) => !e.prompt_progress && (e.content || e.choices?.[0]?.delta?.content || e.choices?.[0]?.text));
  assert.ok(firstOther < 0 || events.indexOf(prog.at(-1)) < firstOther, 'progress before the first text');
  let last = { processed: cache, time_ms: 0 };
  for (const { prompt_progress: p } of prog) {
    assert.equal(p.total, total);
    assert.equal(p.cache, cache);
    assert.ok(p.processed > last.processed && p.processed <= total, `processed ${p.processed} after ${last.processed}`);
    assert.ok(p.processed - last.processed <= N_BATCH, `at most one batch a step: ${p.processed - last.processed}`);
    assert.ok(p.time_ms >= last.time_ms, 'time_ms does not go back');
    last = p;
  }
  assert.equal(last.processed, total, 'the last progress chunk is the whole prompt');
  assert.equal(prog.length, Math.ceil((total - cache) / N_BATCH));
  return prog;
}

describe(`stories260K, -b ${N_BATCH}: timings_per_token and return_progress`, () => {
  let srv;
  let client;
  const prompt = 'Once upon a time there was a little girl who liked to play in the park with her dog. '.repeat(8);
  before(async () => {
    srv = await startServer(['-t', '1', '-tb', '1', '-m', STORIES, '-c', '1024', '-np', '1', '-b', String(N_BATCH)]);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
  });
  after(async () => {
    const r = await srv?.stop();
    assert.equal(r?.code, 0, `server exit: ${JSON.stringify(r)}`);
  });

  test('/completion: timings_per_token puts running timings in every chunk', async () => {
    const body = { prompt, n_predict: 12, temperature: 0, cache_prompt: false };
    const plain = await stream(`${srv.url}/completion`, body);
    assert.ok(plain.slice(0, -1).every((e) => !('timings' in e) && !('prompt_progress' in e)), 'no timings or progress without the flags');
    const events = await stream(`${srv.url}/completion`, { ...body, timings_per_token: true });
    assert.equal(events.map((e) => e.content).join(''), plain.map((e) => e.content).join(''));
    const final = events.at(-1);
    assert.equal(final.stop, true);
    let predicted = 0;
    for (const [i, e] of events.entries()) {
      assertTimings(e.timings, `chunk ${i}`);
      assert.equal(e.timings.prompt_n, final.tokens_evaluated, 'the whole prompt was read (no cache)');
      assert.ok(e.timings.predicted_n >= predicted && e.timings.predicted_n >= 1, `predicted_n ${e.timings.predicted_n} after ${predicted}`);
      predicted = e.timings.predicted_n;
    }
    assert.equal(predicted, 12);
    assert.ok(events.length > 2, 'several chunks');
    assert.ok(events[0].timings.predicted_n < 12, 'the first chunks report the tokens so far, not the final count');
  });

  test('/completion: return_progress reports the prompt read batch by batch, then the cached part', async () => {
    const body = { prompt, n_predict: 4, temperature: 0, return_progress: true };
    const events = await stream(`${srv.url}/completion`, { ...body, cache_prompt: false });
    const total = events.at(-1).tokens_evaluated;
    assert.ok(total > 3 * N_BATCH, `a long prompt: ${total} tokens`);
    const prog = assertProgress(events, { total, cache: 0 });
    for (const c of prog) assert.deepEqual([c.content, c.stop, c.index], ['', false, 0]);
    assert.ok(events.filter((e) => !e.prompt_progress).every((e) => !('prompt_progress' in e)));
    // the same prompt again: the cache holds all but the last token, which is read again
    const again = await stream(`${srv.url}/completion`, body);
    assertProgress(again, { total, cache: total - 1 });
    // not streaming: nothing changes
    const r = await postJson(`${srv.url}/completion`, { ...body, timings_per_token: true });
    assert.equal(r.status, 200, r.text);
    assert.ok(!('prompt_progress' in r.json));
    assertTimings(r.json.timings, 'final');
  });

  test('/v1/chat/completions: both flags, with the openai client reading the stream', async () => {
    const messages = [{ role: 'user', content: prompt }];
    const base = { model: 'm', messages, max_tokens: 8, temperature: 0, cache_prompt: false };
    const whole = await client.chat.completions.create(base);
    const events = await stream(`${srv.url}/v1/chat/completions`, { ...base, timings_per_token: true, return_progress: true });
    const total = whole.usage.prompt_tokens;
    const prog = assertProgress(events, { total, cache: 0 });
    for (const c of prog) {
      assert.equal(c.object, 'chat.completion.chunk');
      assert.deepEqual(c.choices, [{ index: 0, delta: {}, logprobs: null, finish_reason: null }]);
    }
    const rest = events.filter((e) => !e.prompt_progress);
    assert.equal(rest.map((e) => e.choices[0]?.delta?.content ?? '').join(''), whole.choices[0].message.content);
    // all but the role chunk (sent before anything is decoded) carry the timings so far
    for (const [i, e] of rest.slice(1).entries()) {
      assertTimings(e.timings, `chat chunk ${i + 1}`);
      assert.equal(e.timings.prompt_n, total);
    }
    assert.equal(rest.at(-1).choices[0].finish_reason, 'length');
    assert.equal(rest.at(-1).timings.predicted_n, 8);
    // without the flags: neither
    const plain = await stream(`${srv.url}/v1/chat/completions`, base);
    assert.ok(plain.every((e) => !('timings' in e) && !('prompt_progress' in e)));
    // the official client takes the progress chunks in its stride
    let text = '';
    const s = await client.chat.completions.create({ ...base, stream: true, return_progress: true, timings_per_token: true });
    for await (const chunk of s) text += chunk.choices[0]?.delta?.content ?? '';
    assert.equal(text, whole.choices[0].message.content);
  });

  test('/v1/completions: progress chunks with an empty text, then timings in every chunk', async () => {
    const events = await stream(`${srv.url}/v1/completions`, { prompt, max_tokens: 5, temperature: 0, cache_prompt: false, return_progress: true, timings_per_token: true });
    const prog = events.filter((e) => e.prompt_progress);
    assert.ok(prog.length >= 3);
    for (const c of prog) assert.deepEqual(c.choices, [{ text: '', index: 0, logprobs: null, finish_reason: null }]);
    for (const e of events.filter((x) => !x.prompt_progress)) assertTimings(e.timings, 'completion chunk');
    assert.equal(events.at(-1).timings.predicted_n, 5);
  });

  test('the flags must be booleans: 400 naming the field', async () => {
    for (const field of ['timings_per_token', 'return_progress']) {
      const r = await postJson(`${srv.url}/completion`, { prompt: 'x', n_predict: 1, stream: true, [field]: 'yes' });
      assert.equal(r.status, 400, r.text);
      assert.match(r.json.error.message, new RegExp(`'${field}'`));
    }
  });
});
