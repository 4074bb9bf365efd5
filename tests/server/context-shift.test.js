// Context shift: a slot that fills keeps the first n_keep tokens (plus BOS), drops the oldest half
// of the rest, moves the remainder down and goes on; with --no-context-shift, or for a model
// whose memory cannot shift (a recurrent state), the request ends with 'length' at the slot's size.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, postJson, model } from './lib.js';

const CTX = 64;
const ARGS = ['-m', model('stories260K.gguf'), '-t', '1', '-c', String(CTX), '-np', '1'];

async function tokenize(url, text) {
  const r = await postJson(`${url}/tokenize`, { content: text, add_special: true });
  assert.equal(r.status, 200, r.text);
  return r.json.tokens;
}

// greedy, every token reported (n_probs), end of text ignored so the length is the limit's
async function complete(url, prompt, nPredict, extra = {}) {
  const r = await postJson(`${url}/completion`, {
    prompt, n_predict: nPredict, temperature: 0, n_probs: 1, ignore_eos: true, ...extra,
  });
  assert.equal(r.status, 200, r.text);
  return r.json;
}

// That the moved keys are right is tested on the library (test-decode, ContextShift*); here: the
// slot goes past its size, the tokens before the first shift are those of a run without shifts,
// and the shifts are counted.
test('a full slot shifts and goes on', async () => {
  const srv = await startServer([...ARGS, '--metrics']);
  let shifted;
  const prompt = await tokenize(srv.url, 'Once upon a time, there was a little');
  try {
    const props = await (await fetch(`${srv.url}/props`)).json();
    assert.equal(props.context_shift, true);
    shifted = await complete(srv.url, prompt, 100, { n_keep: 4 });
    assert.equal(shifted.tokens_predicted, 100, 'generation went past the slot size');
    assert.equal(shifted.tokens.length, 100);
    assert.equal(shifted.truncated, true);
    assert.equal(shifted.stop_type, 'limit');
    assert.equal(shifted.generation_settings.n_keep, 4);
    // keep 5 (n_keep + BOS) of 64: 29 dropped at the first shift, 29 more tokens fill it again
    const metrics = await (await fetch(`${srv.url}/metrics`)).text();
    assert.match(metrics, /llamacpp:n_context_shifts_total 2\n/);
  } finally {
    assert.equal((await srv.stop()).code, 0);
  }
  const off = await startServer([...ARGS, '--no-context-shift']);
  try {
    const r = await complete(off.url, prompt, 100, { n_keep: 4 });
    // the slot holds CTX tokens; the last sampled one never needs a cell
    assert.equal(r.tokens_predicted, CTX - prompt.length + 1);
    assert.equal(r.truncated, false);
    assert.deepEqual(r.tokens, shifted.tokens.slice(0, r.tokens.length));
  } finally {
    assert.equal((await off.stop()).code, 0);
  }
});

test('a chat longer than the slot goes on with context shift, and stops at the slot with --no-context-shift', async () => {
  const body = { messages: [{ role: 'user', content: 'Tell me a story' }], max_tokens: 120, temperature: 0, ignore_eos: true };
  const on = await startServer(ARGS);
  let promptTokens;
  try {
    const r = await postJson(`${on.url}/v1/chat/completions`, body);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.usage.completion_tokens, 120);
    assert.equal(r.json.choices[0].finish_reason, 'length');
    promptTokens = r.json.usage.prompt_tokens;
  } finally {
    assert.equal((await on.stop()).code, 0);
  }
  const off = await startServer([...ARGS, '--no-context-shift']);
  try {
    const props = await (await fetch(`${off.url}/props`)).json();
    assert.equal(props.context_shift, false);
    const r = await postJson(`${off.url}/v1/chat/completions`, body);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.choices[0].finish_reason, 'length');
    assert.equal(r.json.usage.completion_tokens, CTX - promptTokens + 1);
  } finally {
    assert.equal((await off.stop()).code, 0);
  }
});

test('n_keep is validated', async () => {
  const srv = await startServer(ARGS);
  try {
    const r = await postJson(`${srv.url}/completion`, { prompt: 'Once', n_predict: 2, n_keep: -5 });
    assert.equal(r.status, 400);
    assert.match(r.json.error.message, /n_keep/);
  } finally {
    assert.equal((await srv.stop()).code, 0);
  }
});

test('a model with a recurrent state says it cannot shift and stops with length', async () => {
  const srv = await startServer(['-m', model('synth-qwen35-f16.gguf'), '-t', '1', '-c', '48', '-np', '1']);
  try {
    const props = await (await fetch(`${srv.url}/props`)).json();
    assert.equal(props.context_shift, false);
    assert.match(srv.log(), /context shift is off for this model \(.*recurrent state/);
    const prompt = await tokenize(srv.url, 'Hello there');
    const r = await complete(srv.url, prompt, 100);
    assert.equal(r.stop_type, 'limit');
    assert.equal(r.tokens_predicted, 48 - prompt.length + 1);
    assert.equal(r.truncated, false);
  } finally {
    assert.equal((await srv.stop()).code, 0);
  }
});
