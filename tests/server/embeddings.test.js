// llama-server --embedding, driven by the official openai client (embeddings.create) and by plain
// HTTP for llama.cpp's native /embedding. One server per pooling type on the synthetic Qwen3
// model. The pooled vectors are checked against the per-token hidden states the same server
// returns with pooling none: mean is their normalized average, cls the first row, last the last.
import { describe, before, after, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, model, postJson } from './lib.js';

const MODEL = 'synth-qwen3-f16.gguf';
const ARGS = ['-m', model(MODEL), '-c', '512', '--embedding'];
const TEXTS = ['The quick brown fox', 'jumps over the lazy dog', 'A third, longer sentence with several more words in it.'];

const l2 = (v) => v.map((x) => x / Math.sqrt(v.reduce((s, y) => s + y * y, 0)));

function assertClose(a, b, tol, what) {
  assert.equal(a.length, b.length, `${what}: lengths differ`);
  for (let i = 0; i < a.length; ++i) {
    assert.ok(Math.abs(a[i] - b[i]) <= tol, `${what}: element ${i} is ${a[i]}, expected ${b[i]}`);
  }
}

// The per-token hidden states of each text, from a server with pooling none.
const rows = {};

describe('pooling none (/embedding)', () => {
  let srv;
  before(async () => { srv = await startServer([...ARGS, '--pooling', 'none']); });
  after(async () => { assert.equal((await srv?.stop())?.code, 0); });

  test('one unnormalized row per token, the same twice', async () => {
    for (const text of TEXTS) {
      const tok = await postJson(`${srv.url}/tokenize`, { content: text, add_special: true });
      const r = await postJson(`${srv.url}/embedding`, { content: text });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.length, 1);
      assert.equal(r.json[0].embedding.length, tok.json.tokens.length, 'one row per token');
      const again = await postJson(`${srv.url}/embedding`, { content: text });
      assert.deepEqual(again.json, r.json);
      rows[text] = r.json[0].embedding;
    }
  });

  test('/v1/embeddings refuses pooling none with a 400 that says why', async () => {
    const r = await postJson(`${srv.url}/v1/embeddings`, { input: 'hi' });
    assert.equal(r.status, 400);
    assert.match(r.json.error.message, /pooling/);
  });
});

for (const pooling of ['mean', 'cls', 'last']) {
  describe(`pooling ${pooling}`, () => {
    let srv;
    let client;
    before(async () => {
      srv = await startServer([...ARGS, '--pooling', pooling]);
      client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
    });
    after(async () => { assert.equal((await srv?.stop())?.code, 0); });

    test('the pooled vector is what the pooling type defines, normalized', async () => {
      for (const text of TEXTS) {
        const r = await client.embeddings.create({ model: MODEL, input: text, encoding_format: 'float' });
        const v = r.data[0].embedding;
        const h = rows[text];
        assert.ok(h, 'the pooling none suite ran first');
        let expected;
        if (pooling === 'mean') expected = h[0].map((_, k) => h.reduce((s, row) => s + row[k], 0) / h.length);
        else if (pooling === 'cls') expected = h[0];
        else expected = h[h.length - 1];
        assertClose(v, l2(expected), 1e-5, `${pooling} of '${text}'`);
        assertClose([Math.hypot(...v)], [1], 1e-5, 'unit length');
      }
    });

    test('same text twice gives the same vector; a batch equals the singles', async () => {
      const batch = await client.embeddings.create({ model: MODEL, input: TEXTS, encoding_format: 'float' });
      assert.equal(batch.data.length, TEXTS.length);
      assert.equal(batch.object, 'list');
      let tokens = 0;
      for (let i = 0; i < TEXTS.length; ++i) {
        assert.equal(batch.data[i].index, i);
        const a = await client.embeddings.create({ model: MODEL, input: TEXTS[i], encoding_format: 'float' });
        const b = await client.embeddings.create({ model: MODEL, input: TEXTS[i], encoding_format: 'float' });
        assert.deepEqual(a.data[0].embedding, b.data[0].embedding);
        assert.deepEqual(batch.data[i].embedding, a.data[0].embedding);
        tokens += a.usage.prompt_tokens;
      }
      assert.equal(batch.usage.prompt_tokens, tokens);
      assert.equal(batch.usage.total_tokens, tokens);
    });

    test('base64 (the client\'s default) decodes to the float vector', async () => {
      const f = await client.embeddings.create({ model: MODEL, input: TEXTS[0], encoding_format: 'float' });
      // without encoding_format the client asks for base64 and decodes it itself
      const d = await client.embeddings.create({ model: MODEL, input: TEXTS[0] });
      assertClose(d.data[0].embedding, f.data[0].embedding, 1e-7, 'base64');
      const raw = await postJson(`${srv.url}/v1/embeddings`, { input: TEXTS[0], encoding_format: 'base64' });
      assert.equal(typeof raw.json.data[0].embedding, 'string');
      const buf = Buffer.from(raw.json.data[0].embedding, 'base64');
      assert.equal(buf.length, 4 * f.data[0].embedding.length);
      assert.equal(buf.readFloatLE(0), Math.fround(f.data[0].embedding[0]));
    });

    test('/embedding: one row, embd_normalize as llama.cpp defines it', async () => {
      const e2 = await postJson(`${srv.url}/embedding`, { content: TEXTS[1] });
      const raw = await postJson(`${srv.url}/embedding`, { content: TEXTS[1], embd_normalize: -1 });
      const taxi = await postJson(`${srv.url}/embedding`, { content: TEXTS[1], embd_normalize: 1 });
      assert.equal(e2.status, 200, e2.text);
      assert.equal(e2.json[0].embedding.length, 1);
      const v = raw.json[0].embedding[0];
      assertClose(e2.json[0].embedding[0], l2(v), 1e-5, 'euclidean');
      const sum = v.reduce((s, x) => s + Math.abs(x), 0);
      assertClose(taxi.json[0].embedding[0], v.map((x) => x / sum), 1e-5, 'taxicab');
    });
  });
}

describe('embedding requests that are refused', () => {
  let srv;
  before(async () => { srv = await startServer([...ARGS, '--pooling', 'mean']); });
  after(async () => { assert.equal((await srv?.stop())?.code, 0); });

  const cases = [
    [{ input: 'x', dimensions: 8 }, /dimensions/],
    [{ input: 'x', encoding_format: 'int8' }, /encoding_format/],
    [{}, /input/],
    [{ input: [] }, /input/],
    [{ input: 42 }, /input/],
    [{ input: '' }, /empty/],
    [{ input: [999999999] }, /vocabulary/],
  ];
  for (const [body, re] of cases) {
    test(`400 for ${JSON.stringify(body)}`, async () => {
      const r = await postJson(`${srv.url}/v1/embeddings`, body);
      assert.equal(r.status, 400, r.text);
      assert.match(r.json.error.message, re);
    });
  }

  test('completions answer 501 on an embedding server', async () => {
    const r = await postJson(`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(r.status, 501);
    assert.match(r.json.error.message, /--embedding/);
  });
});
