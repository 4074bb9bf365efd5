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

  test('a grammar too ambiguous to follow fails that request with a 400; the others go on', async () => {
    const url = `${srv.url}/v1/chat/completions`;
    const messages = [{ role: 'user', content: 'hi' }];
    // too many parses before the first character: refused when the request is read
    assertError(await postJson(url, { messages, grammar: 'root ::= ("a"?){20000}' }), 400, /'grammar'.*too ambiguous/);
    // the first 20 characters must be 'a', and each one doubles the parses (b or c to close):
    // the matcher gives up mid-generation, while a request beside it completes
    const doubling = 'root ::= p\np ::= "a" p "b" | "a" p "c" | "a"{20}\n';
    const t0 = Date.now();
    const [bad, good] = await Promise.all([
      postJson(url, { messages, grammar: doubling, max_tokens: 60, seed: 1 }),
      postJson(url, { messages: [{ role: 'user', content: 'a date?' }], grammar: DATE, max_tokens: 40, seed: 2 }),
    ]);
    assertError(bad, 400, /grammar.*too ambiguous to follow/);
    assert.equal(good.status, 200, good.text);
    assert.match(good.json.choices[0].message.content, /^[12][0-9]{3}-(0[1-9]|1[0-2])-([0-2][0-9]|3[01])$/);
    assert.ok(Date.now() - t0 < 20000, `took ${Date.now() - t0} ms`);
    // streamed: the error arrives as the stream's error event
    const res = await fetch(url, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages, grammar: doubling, max_tokens: 60, seed: 3, stream: true }),
    });
    const text = await res.text();
    assert.match(text, /too ambiguous to follow/, text);
    // the slot is free again for the next request
    const after = await postJson(url, { messages: [{ role: 'user', content: 'a date?' }], grammar: DATE, max_tokens: 40, seed: 4 });
    assert.equal(after.status, 200, after.text);
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

const PERSON = {
  $defs: {
    address: {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 12 }, zip: { type: 'string', pattern: '^[0-9]{5}$' } },
      required: ['city', 'zip'],
      additionalProperties: false,
    },
  },
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 16 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    role: { enum: ['admin', 'user', 'guest'] },
    home: { $ref: '#/$defs/address' },
    tags: { type: 'array', items: { type: 'string', maxLength: 8 }, minItems: 1, maxItems: 3 },
    scores: { type: 'array', items: { type: 'number' }, maxItems: 2 },
    meta: {
      type: 'object',
      properties: { active: { type: 'boolean' }, note: { anyOf: [{ type: 'null' }, { type: 'string', maxLength: 10 }] } },
      required: ['active'],
      additionalProperties: false,
    },
  },
  required: ['name', 'age', 'role', 'home', 'tags', 'meta'],
  additionalProperties: false,
};

describe('JSON schemas', () => {
  let srv;
  let client;
  let validate;
  before(async () => {
    const { default: Ajv } = await import('ajv');
    validate = new Ajv({ allErrors: true, strict: true }).compile(PERSON);
    srv = await startServer([...T1, '-m', SYNTH, '-c', '4096', '-np', '4', '--temp', '1.2']);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
  });
  after(async () => {
    const r = await srv?.stop();
    assert.equal(r?.code, 0, `server exit: ${JSON.stringify(r)}`);
  });

  test('response_format json_schema: 20 random-model replies validate with ajv', async () => {
    const replies = [];
    // the n choices of one request use seeds seed..seed+3
    for (let seed = 10; seed <= 50; seed += 10) {
      const r = await client.chat.completions.create({
        model: 'x', messages: [{ role: 'user', content: 'a person, as JSON' }], max_tokens: 1000, seed, n: 4,
        response_format: { type: 'json_schema', json_schema: { name: 'person', schema: PERSON, strict: true } },
      });
      for (const c of r.choices) {
        assert.equal(c.finish_reason, 'stop', `reply ${replies.length} was cut: ${c.message.content}`);
        replies.push(c.message.content);
      }
    }
    assert.equal(replies.length, 20);
    for (const text of replies) {
      const doc = JSON.parse(text);
      assert.ok(validate(doc), `${text}\n${JSON.stringify(validate.errors)}`);
    }
    // random weights rarely repeat themselves: the replies differ
    assert.ok(new Set(replies).size >= 15, `replies repeat: ${new Set(replies).size} distinct`);
  });

  test('the native json_schema field and response_format json_object', async () => {
    const native = await postJson(`${srv.url}/completion`, { prompt: 'json:', n_predict: 1000, seed: 3, json_schema: PERSON });
    assert.equal(native.status, 200, native.text);
    assert.ok(validate(JSON.parse(native.json.content)), native.json.content);
    const small = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false };
    const r = await client.chat.completions.create({
      model: 'x', messages: [{ role: 'user', content: 'ok?' }], max_tokens: 100, seed: 2,
      response_format: { type: 'json_object', schema: small },
    });
    assert.match(r.choices[0].message.content, /^\{\s*"ok"\s*:\s*(true|false)\s*\}\s*$/);
    const any = await client.chat.completions.create({
      model: 'x', messages: [{ role: 'user', content: 'json?' }], max_tokens: 8, seed: 2, response_format: { type: 'json_object' },
    });
    assert.match(any.choices[0].message.content, /^\{/);
  });

  test('bad schemas and conflicting constraints are 400s naming the field', async () => {
    const url = `${srv.url}/v1/chat/completions`;
    const messages = [{ role: 'user', content: 'hi' }];
    const rf = (schema) => ({ type: 'json_schema', json_schema: { name: 'x', schema } });
    assertError(await postJson(url, { messages, response_format: rf({ type: 'tuple' }) }), 400, /response_format\.json_schema\.schema.*unknown type 'tuple'/);
    assertError(await postJson(url, { messages, response_format: rf({ type: 'string', pattern: '^(a)\\1$' }) }), 400, /back-references/);
    assertError(await postJson(url, { messages, response_format: rf({ $ref: 'http://example.com/s.json' }) }), 400, /outside this schema/);
    assertError(await postJson(url, { messages, response_format: { type: 'json_schema' } }), 400, /json_schema' must be an object/);
    assertError(await postJson(url, { messages, response_format: { type: 'xml' } }), 400, /response_format\.type/);
    assertError(await postJson(url, { messages, json_schema: 'object' }), 400, /'json_schema' must be a JSON schema/);
    assertError(await postJson(url, { messages, grammar: 'root ::= "a"', json_schema: {} }), 400, /'grammar' and 'json_schema' cannot be used together/);
  });
});
