// Sampler request fields through llama-server: logit_bias in OpenAI's and llama.cpp's forms
// changes which token comes first, DRY breaks a greedy loop, XTC / top-n-sigma / mirostat run,
// bad values are 400s; post_sampling_probs reports the distribution the samplers drew from.
import { describe, before, after, test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, model, postJson } from './lib.js';

const SYNTH = model('synth-qwen3-Q8_0.gguf');

describe('sampler fields', () => {
  let srv;
  const complete = (body) => postJson(`${srv.url}/completion`, { prompt: 'The weather', n_predict: 3, n_probs: 1, ...body });
  before(async () => { srv = await startServer(['-t', '1', '-tb', '1', '-m', SYNTH, '-c', '1024']); });
  after(async () => {
    const r = await srv?.stop();
    assert.equal(r?.code, 0, `server exit: ${JSON.stringify(r)}`);
  });

  test('logit_bias bans and forces tokens (ids and text)', async () => {
    const greedy = await complete({ temperature: 0 });
    assert.equal(greedy.status, 200, greedy.text);
    const first = greedy.json.tokens[0];
    const banned = await complete({ temperature: 0, logit_bias: [[first, false]] });
    assert.notEqual(banned.json.tokens[0], first);
    const oai = await postJson(`${srv.url}/v1/completions`, { prompt: 'The weather', max_tokens: 1, temperature: 0, logit_bias: { [first]: -100 } });
    assert.equal(oai.status, 200, oai.text);
    assert.notEqual(oai.json.choices[0].text, greedy.json.completion_probabilities[0].token);
    const forced = await complete({ temperature: 1.0, seed: 3, logit_bias: { 1234: 100 } });
    assert.equal(forced.json.tokens[0], 1234);
    const tok = await postJson(`${srv.url}/tokenize`, { content: ' zebra' });
    const forcedText = await complete({ temperature: 0, logit_bias: [[' zebra', 100]] });
    assert.ok(tok.json.tokens.includes(forcedText.json.tokens[0]), JSON.stringify([tok.json, forcedText.json.tokens]));
  });

  test('DRY breaks the greedy loop of a random model', async () => {
    const longestRun = (toks) => {
      let best = 0;
      let run = 0;
      toks.forEach((t, i) => { run = i > 0 && toks[i - 1] === t ? run + 1 : 1; best = Math.max(best, run); });
      return best;
    };
    const plain = await complete({ temperature: 0, n_predict: 30 });
    assert.ok(longestRun(plain.json.tokens) >= 20, `the baseline repeats one token: ${plain.json.tokens}`);
    const dry = await complete({ temperature: 0, n_predict: 30, dry_multiplier: 3, dry_base: 1.75, dry_allowed_length: 2, dry_sequence_breakers: ['\n'] });
    assert.equal(dry.status, 200, dry.text);
    assert.ok(longestRun(dry.json.tokens) < 10, `DRY output still loops: ${dry.json.tokens}`);
    assert.ok(new Set(dry.json.tokens).size >= 4, `${dry.json.tokens}`);
  });

  test('samplers order, XTC, top-n-sigma and mirostat run', async () => {
    for (const extra of [{ samplers: ['min_p', 'temperature'] }, { samplers: 'top_k;top_p;temp' }, { xtc_probability: 1, xtc_threshold: 0.01 }, { top_n_sigma: 1.5 }, { mirostat: 1 }, { mirostat: 2, mirostat_tau: 3, mirostat_eta: 0.2 }]) {
      const r = await complete({ temperature: 1, seed: 1, ...extra });
      assert.equal(r.status, 200, `${JSON.stringify(extra)}: ${r.text}`);
      assert.equal(r.json.tokens.length, 3);
    }
  });

  test('bad sampler values are 400s naming the field', async () => {
    const bad = async (body, re) => {
      const r = await complete(body);
      assert.equal(r.status, 400, r.text);
      assert.match(r.json.error.message, re);
    };
    await bad({ mirostat: 3 }, /'mirostat' must be 0, 1 or 2/);
    await bad({ dry_multiplier: -1 }, /'dry_multiplier'/);
    await bad({ samplers: ['top_k', 'magic'] }, /unknown sampler 'magic'/);
    await bad({ samplers: 5 }, /'samplers' must be a list/);
    await bad({ dry_allowed_length: 0 }, /'dry_allowed_length' must be an integer of at least 1/);
    await bad({ dry_sequence_breakers: '\n' }, /'dry_sequence_breakers' must be a list/);
    await bad({ xtc_probability: 2 }, /'xtc_probability'/);
    await bad({ top_n_sigma: 'x' }, /'top_n_sigma'/);
    await bad({ logit_bias: 5 }, /'logit_bias' must be/);
    await bad({ logit_bias: { 99999999: 1 } }, /outside the vocabulary/);
    await bad({ logit_bias: [[1, 'big']] }, /logit_bias\[0\]' must be a number or false/);
    await bad({ logit_bias: [[1]] }, /logit_bias\[0\]' must be \[token id or text, bias\]/);
  });
});

describe('post_sampling_probs', () => {
  let srv;
  before(async () => { srv = await startServer(['-t', '1', '-tb', '1', '-m', SYNTH, '-c', '1024']); });
  after(async () => {
    const r = await srv?.stop();
    assert.equal(r?.code, 0, `server exit: ${JSON.stringify(r)}`);
  });

  const near = (a, b) => Math.abs(a - b) < 1e-4;

  test('/completion: probabilities of the distribution the samplers drew from', async () => {
    // top_k 3 keeps three candidates: all of them are listed, they sum to 1, the chosen one is among them
    const r = await postJson(`${srv.url}/completion`, {
      prompt: 'The weather', n_predict: 6, n_probs: 5, top_k: 3, top_p: 1, min_p: 0, temperature: 1.5, seed: 4, post_sampling_probs: true,
    });
    assert.equal(r.status, 200, r.text);
    const probs = r.json.completion_probabilities;
    assert.equal(probs.length, 6);
    probs.forEach((p, i) => {
      assert.equal(p.id, r.json.tokens[i]);
      assert.equal(p.logprob, undefined);
      assert.equal(p.top_logprobs, undefined);
      assert.equal(p.top_probs.length, 3, JSON.stringify(p));
      const sum = p.top_probs.reduce((s, t) => s + t.prob, 0);
      assert.ok(near(sum, 1), `sum ${sum}`);
      for (let j = 1; j < 3; ++j) assert.ok(p.top_probs[j - 1].prob >= p.top_probs[j].prob);
      const mine = p.top_probs.find((t) => t.id === p.id);
      assert.ok(mine, 'the chosen token is a candidate');
      assert.ok(near(mine.prob, p.prob));
      assert.deepEqual(p.bytes, [...Buffer.from(p.token)]);
    });
    // one candidate left: it is certain
    const one = await postJson(`${srv.url}/completion`, { prompt: 'The weather', n_predict: 2, n_probs: 3, top_k: 1, post_sampling_probs: true });
    for (const p of one.json.completion_probabilities) {
      assert.equal(p.prob, 1);
      assert.equal(p.top_probs.length, 1);
    }
    // without the flag: the model's log-probabilities, as before
    const plain = await postJson(`${srv.url}/completion`, { prompt: 'The weather', n_predict: 2, n_probs: 3, top_k: 1 });
    const p0 = plain.json.completion_probabilities[0];
    assert.ok(p0.logprob < 0 && p0.top_logprobs.length === 3 && p0.prob === undefined, JSON.stringify(p0));
  });

  test('chat: logprobs.content in the same shape; streamed chunks carry it too', async () => {
    const body = {
      messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, logprobs: true, top_logprobs: 2, top_k: 2, top_p: 1, min_p: 0, temperature: 1, seed: 2,
      post_sampling_probs: true,
    };
    const r = await postJson(`${srv.url}/v1/chat/completions`, body);
    assert.equal(r.status, 200, r.text);
    const content = r.json.choices[0].logprobs.content;
    assert.ok(content.length >= 1);
    for (const c of content) {
      assert.ok(c.prob > 0 && c.prob <= 1, JSON.stringify(c));
      assert.equal(c.top_probs.length, 2);
      assert.ok(near(c.top_probs[0].prob + c.top_probs[1].prob, 1));
    }
    const s = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ ...body, stream: true }) });
    const text = await s.text();
    const chunks = text.split('\n\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)));
    const streamed = chunks.flatMap((c) => c.choices?.[0]?.logprobs?.content ?? []);
    assert.deepEqual(streamed.map((c) => [c.id, c.prob]), content.map((c) => [c.id, c.prob]));
  });
});
