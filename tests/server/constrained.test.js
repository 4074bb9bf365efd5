// Constrained generation through llama-server on the random-weight synthetic Qwen3 model: a
// GBNF "grammar" field (and --grammar), JSON schemas and response_format. Random weights would
// never write valid output by chance, so every valid reply shows the constraint at work; the
// replies are checked here by recognisers independent of the server (regular expressions,
// JSON.parse, the ajv JSON-schema validator).
import { describe, before, after, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, model, postJson } from './lib.js';

const SYNTH = model('synth-qwen3-Q8_0.gguf');
const T1 = ['-t', '1', '-tb', '1'];

function assertError(res, status, messagePattern) {
  assert.equal(res.status, status, res.text);
  assert.ok(res.json && res.json.error, `an OpenAI error object: ${res.text}`);
  if (messagePattern) assert.match(res.json.error.message, messagePattern);
}

describe('grammar', () => {
  let srv;
  let client;
  before(async () => {
    srv = await startServer([...T1, '-m', SYNTH, '-c', '2048', '-np', '2', '--temp', '1.5']);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
  });
  after(async () => {
    const r = await srv?.stop();
    assert.equal(r?.code, 0, `server exit: ${JSON.stringify(r)}`);
  });

  const DATE = 'root ::= year "-" month "-" day\nyear ::= [12] [0-9]{3}\nmonth ::= "0" [1-9] | "1" [0-2]\nday ::= [0-2] [0-9] | "3" [01]\n';

  test('a GBNF grammar field constrains chat, completions and /completion', async () => {
    const re = /^[12][0-9]{3}-(0[1-9]|1[0-2])-([0-2][0-9]|3[01])$/;
    for (let seed = 1; seed <= 3; ++seed) {
      const chat = await client.chat.completions.create({
        model: 'x', messages: [{ role: 'user', content: 'a date?' }], max_tokens: 40, seed, grammar: DATE,
      });
      assert.match(chat.choices[0].message.content, re);
      assert.equal(chat.choices[0].finish_reason, 'stop');
    }
    const cmpl = await client.completions.create({ model: 'x', prompt: 'date:', max_tokens: 40, seed: 4, grammar: DATE });
    assert.match(cmpl.choices[0].text, re);
    const native = await postJson(`${srv.url}/completion`, { prompt: 'date:', n_predict: 40, seed: 5, grammar: DATE });
    assert.equal(native.status, 200, native.text);
    assert.match(native.json.content, re);
  });

  test('streamed constrained output concatenates to a match', async () => {
    const stream = await client.chat.completions.create({
      model: 'x', messages: [{ role: 'user', content: 'a date?' }], max_tokens: 40, seed: 9, grammar: DATE, stream: true,
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    assert.match(text, /^[12][0-9]{3}-(0[1-9]|1[0-2])-([0-2][0-9]|3[01])$/);
  });

  test('a bad grammar is a 400 naming the field, line and column', async () => {
    const url = `${srv.url}/v1/chat/completions`;
    const messages = [{ role: 'user', content: 'hi' }];
    assertError(await postJson(url, { messages, grammar: 'root ::= "a"\nx ::= [b-' }), 400, /'grammar'.*line 2, column 7/);
    assertError(await postJson(url, { messages, grammar: 'root ::= undefined-rule' }), 400, /undefined rule 'undefined-rule'/);
    assertError(await postJson(url, { messages, grammar: 'start ::= "a"' }), 400, /no rule named 'root'/);
    assertError(await postJson(url, { messages, grammar: 42 }), 400, /'grammar' must be a string/);
    assertError(await postJson(`${srv.url}/completion`, { prompt: 'x', grammar: 'root ::= root "a"' }), 400, /left recursion/);
  });
});

describe('--grammar as the server default', () => {
  let srv;
  before(async () => {
    srv = await startServer([...T1, '-m', SYNTH, '-c', '1024', '--grammar', 'root ::= ("yes" | "no") "."']);
  });
  after(async () => { await srv?.stop(); });

  test('requests without a grammar follow the flag; a request grammar replaces it', async () => {
    for (let seed = 1; seed <= 3; ++seed) {
      const r = await postJson(`${srv.url}/completion`, { prompt: 'ok?', n_predict: 20, seed, temperature: 1.5 });
      assert.equal(r.status, 200, r.text);
      assert.match(r.json.content, /^(yes|no)\.$/);
    }
    const r = await postJson(`${srv.url}/completion`, { prompt: 'ok?', n_predict: 20, seed: 1, grammar: 'root ::= "maybe"' });
    assert.equal(r.json.content, 'maybe');
  });
});
