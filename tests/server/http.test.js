// llama-server over plain HTTP: error statuses and OpenAI error objects, the API key, a client
// that disconnects mid-stream, the bounded queue, llama.cpp's native endpoints, logprobs,
// reasoning_content, /metrics, the demo model and prefix reuse on a model with a recurrent state.
import { describe, before, after, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { startServer, model, postJson, readSse, waitFor, sleep } from './lib.js';

const STORIES = model('stories260K.gguf');
// one thread each: these servers are tiny, and the machine may be busy
const T1 = ['-t', '1', '-tb', '1'];

function assertError(res, status, messagePattern) {
  assert.equal(res.status, status, res.text);
  assert.ok(res.json && res.json.error, `an OpenAI error object: ${res.text}`);
  assert.equal(res.json.error.code, status);
  assert.equal(typeof res.json.error.type, 'string');
  if (messagePattern) assert.match(res.json.error.message, messagePattern);
}

describe('stories260K, 2 slots of 512 tokens, --metrics', () => {
  let srv;
  let client;
  before(async () => {
    srv = await startServer([...T1, '-m', STORIES, '-c', '1024', '-np', '2', '--metrics']);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
  });
  after(async () => {
    const r = await srv?.stop();
    assert.equal(r?.code, 0, `server exit: ${JSON.stringify(r)}`);
  });

  test('CORS by default: any origin, no credentials', async () => {
    const r = await fetch(`${srv.url}/v1/models`, { method: 'OPTIONS', headers: { Origin: 'http://x.example' } });
    assert.equal(r.status, 204);
    assert.equal(r.headers.get('access-control-allow-origin'), '*');
    assert.equal(r.headers.get('access-control-allow-credentials'), null);
  });

  test('unknown route: 404 with an error object', async () => {
    const r = await fetch(`${srv.url}/v1/nothing-here`);
    const body = await r.json();
    assert.equal(r.status, 404);
    assert.equal(body.error.code, 404);
    assertError(await postJson(`${srv.url}/v2/chat/completions`, {}), 404);
  });

  test('malformed bodies: 400 naming the problem', async () => {
    const url = `${srv.url}/v1/chat/completions`;
    const user = [{ role: 'user', content: 'hi' }];
    assertError(await postJson(url, '{"messages": [', {}), 400, /not valid JSON/);
    assertError(await postJson(url, ''), 400, /empty/);
    assertError(await postJson(url, `{"messages": ${'['.repeat(100000)}${']'.repeat(100000)}}`), 400, /nests deeper/);
    assertError(await postJson(url, '[1, 2]'), 400, /object/);
    assertError(await postJson(url, {}), 400, /messages/);
    assertError(await postJson(url, { messages: [] }), 400, /messages/);
    assertError(await postJson(url, { messages: 'hi' }), 400, /messages/);
    assertError(await postJson(url, { messages: [{ role: 'wizard', content: 'x' }] }), 400, /role/);
    assertError(await postJson(url, { messages: [{ role: 'user', content: 42 }] }), 400, /content/);
    assertError(await postJson(url, { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: {} }] }] }), 400, /image_url/);
    assertError(await postJson(url, { messages: user, temperature: 'hot' }), 400, /temperature/);
    assertError(await postJson(url, { messages: user, max_tokens: -5 }), 400, /max_tokens/);
    assertError(await postJson(url, { messages: user, max_tokens: 1.5 }), 400, /max_tokens/);
    assertError(await postJson(url, { messages: user, stop: 7 }), 400, /stop/);
    assertError(await postJson(url, { messages: user, top_logprobs: 50, logprobs: true }), 400, /top_logprobs/);
    assertError(await postJson(url, { messages: user, stream: 'yes' }), 400, /stream/);
    const zero = await postJson(url, { messages: user, max_tokens: 0 });
    assert.equal(zero.status, 200);
    assert.equal(zero.json.usage.completion_tokens, 0);
    assert.equal(zero.json.choices[0].finish_reason, 'length');
    assertError(await postJson(`${srv.url}/v1/completions`, { max_tokens: 3 }), 400, /prompt/);
    assertError(await postJson(`${srv.url}/v1/completions`, { prompt: { text: 'x' } }), 400, /prompt/);
    assertError(await postJson(`${srv.url}/v1/completions`, { prompt: [1, 2, 999999] }), 400, /vocabulary/);
    assertError(await postJson(`${srv.url}/tokenize`, { content: 5 }), 400, /content/);
    assertError(await postJson(`${srv.url}/detokenize`, { tokens: [-1] }), 400, /tokens/);
    // the official client raises BadRequestError
    await assert.rejects(client.chat.completions.create({ model: 'm', messages: [] }), (e) => e.status === 400 && e instanceof OpenAI.BadRequestError);
    // and the server is still fine
    assert.equal((await fetch(`${srv.url}/health`)).status, 200);
  });

  test('the fields of features a request does not use are accepted with their off values', async () => {
    const chat = `${srv.url}/v1/chat/completions`;
    const user = [{ role: 'user', content: 'hi' }];
    // what clients send when they do not use a feature is accepted
    const off = {
      grammar: '', logit_bias: {}, mirostat: 0, mirostat_tau: 5, mirostat_eta: 0.1, dry_multiplier: 0, dry_base: 1.75,
      xtc_probability: 0, xtc_threshold: 0.1, id_slot: -1, cache_prompt: true, n_keep: 0, response_format: { type: 'text' },
      post_sampling_probs: false, dynatemp_range: 0, t_max_predict_ms: 0, n_indent: 0, lora: [], image_data: [],
      return_tokens: false, response_fields: [],
    };
    const ok = await postJson(chat, { messages: user, max_tokens: 1, ...off });
    assert.equal(ok.status, 200, ok.text);
    const native = await postJson(`${srv.url}/completion`, { prompt: 'x', n_predict: 1, ...off });
    assert.equal(native.status, 200, native.text);
  });

  test("llama.cpp's fields Kiln does not implement: 400 naming the field when a request asks for them", async () => {
    const asks = {
      dynatemp_range: 0.5, t_max_predict_ms: 1000, n_indent: 4, lora: [{ id: 0, scale: 1 }], image_data: [{ data: 'x', id: 1 }],
      multimodal_data: ['x'], response_fields: ['content'], return_tokens: true, 'speculative.n_max': 8,
    };
    for (const [field, value] of Object.entries(asks)) {
      for (const [url, body] of [[`${srv.url}/completion`, { prompt: 'x', n_predict: 1 }],
        [`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 }]]) {
        const r = await postJson(url, { ...body, [field]: value });
        assert.equal(r.status, 400, `${field} at ${url}: ${r.text}`);
        assert.match(r.json.error.message, new RegExp(`^'${field.replace('.', '\\.')}' is not supported yet`), r.text);
      }
    }
  });

  test('a prompt longer than the slot context: 400 that says so', async () => {
    const long = 'the cat sat on the mat and '.repeat(200);
    const c = await postJson(`${srv.url}/v1/completions`, { prompt: long, max_tokens: 4 });
    assertError(c, 400, /512 tokens/);
    assertError(await postJson(`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: long }] }), 400, /context/);
    await assert.rejects(client.completions.create({ model: 'm', prompt: long }), (e) => e.status === 400);
  });

  test('a client that disconnects mid-stream frees its slot at once', async () => {
    const metrics0 = await (await fetch(`${srv.url}/metrics`)).text();
    const predicted0 = Number(metrics0.match(/^llamacpp:tokens_predicted_total (\S+)$/m)[1]);
    const ac = new AbortController();
    const r = await fetch(`${srv.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'Tell me a long story.' }], max_tokens: 480, ignore_eos: true, stream: true }),
      signal: ac.signal,
    });
    assert.equal(r.status, 200);
    const reader = r.body.getReader();
    let got = 0;
    while (got < 3) {
      const { value, done } = await reader.read();
      if (done) break;
      got += (new TextDecoder().decode(value).match(/data: /g) || []).length;
    }
    ac.abort();
    const idle = await waitFor(async () => {
      const slots = await (await fetch(`${srv.url}/slots`)).json();
      return slots.every((s) => !s.is_processing);
    }, 3000, 10);
    assert.ok(idle, 'every slot is idle shortly after the disconnect');
    const metrics1 = await (await fetch(`${srv.url}/metrics`)).text();
    const predicted1 = Number(metrics1.match(/^llamacpp:tokens_predicted_total (\S+)$/m)[1]);
    assert.ok(predicted1 - predicted0 < 480, `generation stopped early (${predicted1 - predicted0} of 480 tokens)`);
    assert.equal((await fetch(`${srv.url}/health`)).status, 200);
    const after = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, temperature: 0 });
    assert.equal(after.usage.completion_tokens > 0, true);
  });

  test('/tokenize and /detokenize round-trip', async () => {
    const text = 'Once upon a time, there was a cat.';
    const t = await postJson(`${srv.url}/tokenize`, { content: text });
    assert.equal(t.status, 200);
    assert.ok(t.json.tokens.length > 3 && t.json.tokens.every(Number.isInteger));
    const withBos = await postJson(`${srv.url}/tokenize`, { content: text, add_special: true });
    assert.equal(withBos.json.tokens.length, t.json.tokens.length + 1);
    const pieces = await postJson(`${srv.url}/tokenize`, { content: text, with_pieces: true });
    assert.equal(pieces.json.tokens.map((p) => p.piece).join('').trim(), text);
    const d = await postJson(`${srv.url}/detokenize`, { tokens: t.json.tokens });
    assert.equal(d.json.content.trim(), text);
  });

  test('/apply-template renders the messages (ChatML for a model without a template)', async () => {
    const r = await postJson(`${srv.url}/apply-template`, { messages: [{ role: 'system', content: 'S' }, { role: 'user', content: [{ type: 'text', text: 'U' }] }] });
    assert.equal(r.status, 200);
    assert.equal(r.json.prompt, '<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n');
  });

  test('/completion (native): content, timings, streaming without [DONE]', async () => {
    const body = { prompt: 'Once upon a time', n_predict: 16, temperature: 0 };
    const r = await postJson(`${srv.url}/completion`, body);
    assert.equal(r.status, 200);
    assert.equal(r.json.stop, true);
    assert.equal(r.json.tokens_predicted, 16);
    assert.equal(r.json.stop_type, 'limit');
    for (const k of ['prompt_n', 'prompt_ms', 'predicted_n', 'predicted_ms', 'predicted_per_second']) assert.ok(k in r.json.timings, k);
    assert.equal(r.json.timings.predicted_n, 16);
    const s = await fetch(`${srv.url}/completion`, { method: 'POST', body: JSON.stringify({ ...body, stream: true }) });
    const { events, done } = await readSse(s);
    assert.equal(done, false);
    assert.equal(events.map((e) => e.content).join(''), r.json.content);
    assert.equal(events.at(-1).stop, true);
    assert.ok(events.at(-1).timings);
    // a token-id prompt gives the same as its text
    const ids = (await postJson(`${srv.url}/tokenize`, { content: 'Once upon a time', add_special: true })).json.tokens;
    const r2 = await postJson(`${srv.url}/completion`, { ...body, prompt: ids });
    assert.equal(r2.json.content, r.json.content);
  });

  test('logprobs and top_logprobs', async () => {
    const r = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 3 });
    const lp = r.choices[0].logprobs.content;
    assert.equal(lp.length, r.usage.completion_tokens);
    let text = '';
    for (const e of lp) {
      assert.ok(e.logprob <= 0);
      assert.equal(e.top_logprobs.length, 3);
      assert.equal(e.top_logprobs[0].token, e.token, 'greedy picks the most likely token');
      assert.ok(Math.abs(e.top_logprobs[0].logprob - e.logprob) < 1e-6);
      assert.ok(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob && e.top_logprobs[1].logprob >= e.top_logprobs[2].logprob);
      assert.deepEqual(e.bytes, [...Buffer.from(e.token, 'utf8')]);
      text += e.token;
    }
    assert.equal(text, r.choices[0].message.content);
    const c = await client.completions.create({ model: 'm', prompt: 'Once', max_tokens: 4, temperature: 0, logprobs: 2 });
    assert.equal(c.choices[0].logprobs.tokens.length, 4);
    assert.equal(c.choices[0].logprobs.tokens.join(''), c.choices[0].text);
    assert.equal(Object.keys(c.choices[0].logprobs.top_logprobs[0]).length, 2);
  });

  test('/props, /slots and /metrics', async () => {
    const props = await (await fetch(`${srv.url}/props`)).json();
    assert.equal(props.total_slots, 2);
    assert.equal(props.default_generation_settings.n_ctx, 512);
    const slots = await (await fetch(`${srv.url}/slots`)).json();
    assert.equal(slots.length, 2);
    assert.deepEqual(slots.map((s) => s.id), [0, 1]);
    const m = await fetch(`${srv.url}/metrics`);
    assert.equal(m.status, 200);
    const text = await m.text();
    for (const name of ['prompt_tokens_total', 'tokens_predicted_total', 'predicted_tokens_seconds', 'kv_cache_usage_ratio', 'requests_processing']) {
      assert.match(text, new RegExp(`^# TYPE llamacpp:${name} (counter|gauge)$`, 'm'));
    }
    assert.ok(Number(text.match(/^llamacpp:tokens_predicted_total (\S+)$/m)[1]) > 0);
  });

  test('a seed reproduces a sampled reply; the n choices of one request differ', async () => {
    const req = { model: 'm', messages: [{ role: 'user', content: 'Tell me a story.' }], max_tokens: 24, temperature: 1.5, top_k: 0, top_p: 1, min_p: 0, seed: 1234 };
    const a = await client.chat.completions.create(req);
    const b = await client.chat.completions.create(req);
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);
    const two = await client.chat.completions.create({ ...req, n: 2 });
    assert.deepEqual(two.choices.map((c) => c.index), [0, 1]);
    assert.equal(two.choices[0].message.content, a.choices[0].message.content, 'choice 0 uses the seed itself');
    assert.notEqual(two.choices[1].message.content, two.choices[0].message.content);
    assert.equal(two.usage.prompt_tokens, a.usage.prompt_tokens, 'the prompt counts once');
    assert.ok(two.usage.completion_tokens > a.usage.completion_tokens);
  });

  test('reused prompt prefixes come from the cache', async () => {
    const messages = [{ role: 'system', content: 'You are a kind storyteller who likes cats and dogs.' }, { role: 'user', content: 'Tell me a story.' }];
    await client.chat.completions.create({ model: 'm', messages, max_tokens: 2, temperature: 0 });
    const r = await client.chat.completions.create({ model: 'm', messages, max_tokens: 2, temperature: 0 });
    assert.equal(r.usage.prompt_tokens_details.cached_tokens, r.usage.prompt_tokens - 1);
  });
});

describe('--api-key', () => {
  let srv;
  before(async () => {
    srv = await startServer([...T1, '-m', STORIES, '-c', '512', '--api-key', 'sesame', '--cors-origin', 'http://a.example,http://b.example',
      '--threads-http', '4']);
  });
  after(async () => { await srv?.stop(); });

  test('--cors-origin: only the listed origins, never with credentials', async () => {
    const preflight = (origin) => fetch(`${srv.url}/v1/chat/completions`, {
      method: 'OPTIONS', headers: { Origin: origin, 'Access-Control-Request-Method': 'POST' },
    });
    const ok = await preflight('http://b.example');
    assert.equal(ok.status, 204);
    assert.equal(ok.headers.get('access-control-allow-origin'), 'http://b.example');
    assert.match(ok.headers.get('access-control-allow-headers'), /Authorization/);
    assert.equal(ok.headers.get('access-control-allow-credentials'), null);
    const other = await preflight('http://evil.example');
    assert.equal(other.headers.get('access-control-allow-origin'), null);
    assert.equal(other.headers.get('vary'), 'Origin');
    const get = await fetch(`${srv.url}/health`, { headers: { Origin: 'http://a.example' } });
    assert.equal(get.headers.get('access-control-allow-origin'), 'http://a.example');
  });

  test('every endpoint but /health needs the key (401 otherwise)', async () => {
    assert.equal((await fetch(`${srv.url}/health`)).status, 200);
    const none = await fetch(`${srv.url}/v1/models`);
    assert.equal(none.status, 401);
    assert.equal((await none.json()).error.type, 'authentication_error');
    assert.equal((await fetch(`${srv.url}/v1/models`, { headers: { Authorization: 'Bearer wrong' } })).status, 401);
    assertError(await postJson(`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }] }), 401);
    const bad = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(bad.models.list(), (e) => e.status === 401 && e instanceof OpenAI.AuthenticationError);
    const good = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'sesame', maxRetries: 0 });
    const r = await good.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3 });
    assert.equal(r.object, 'chat.completion');
  });
});

describe('bounded queue', () => {
  let srv;
  before(async () => { srv = await startServer([...T1, '-m', STORIES, '-c', '4096', '-np', '1', '--metrics']); });
  after(async () => { await srv?.stop(); });

  test('requests beyond the slot and the queue (16) get 503 at once; cancelled ones leave', async () => {
    // Long generations keep the one slot busy for seconds, so all requests meet a full server.
    const body = JSON.stringify({ prompt: 'Once upon a time', max_tokens: 4000, ignore_eos: true, temperature: 0, stream: true });
    const aborts = Array.from({ length: 24 }, () => new AbortController());
    const responses = await Promise.all(aborts.map((ac) => fetch(`${srv.url}/v1/completions`, { method: 'POST', body, signal: ac.signal })));
    const statuses = responses.map((r) => r.status);
    const busy = responses.filter((r) => r.status === 503);
    assert.equal(statuses.filter((s) => s === 200).length + busy.length, 24, statuses.join(','));
    assert.ok(busy.length >= 7 && busy.length <= 8, `1 running + 16 queued (+1 not yet in the slot), the rest refused: ${statuses.join(',')}`);
    for (const r of busy) {
      const e = await r.json();
      assert.equal(e.error.type, 'unavailable_error');
      assert.equal(e.error.code, 503);
    }
    for (const ac of aborts) ac.abort();
    const idle = await waitFor(async () => (await (await fetch(`${srv.url}/slots`)).json()).every((s) => !s.is_processing), 5000, 20);
    assert.ok(idle, 'the running and the queued requests are dropped when their clients leave');
    const r = await postJson(`${srv.url}/v1/completions`, { prompt: 'Once', max_tokens: 4, temperature: 0 });
    assert.equal(r.status, 200);
  });

  test('a queued request whose client leaves is dropped from the queue', async () => {
    const gauge = async (name) => Number((await (await fetch(`${srv.url}/metrics`)).text()).match(new RegExp(`^llamacpp:${name} (\\S+)$`, 'm'))[1]);
    const body = JSON.stringify({ prompt: 'Once upon a time', max_tokens: 4000, ignore_eos: true, temperature: 0, stream: true });
    const running = new AbortController();
    const first = await fetch(`${srv.url}/v1/completions`, { method: 'POST', body, signal: running.signal });
    assert.equal(first.status, 200);
    const waiting = Array.from({ length: 4 }, () => new AbortController());
    const queued = await Promise.all(waiting.map((ac) => fetch(`${srv.url}/v1/completions`, { method: 'POST', body, signal: ac.signal })));
    assert.deepEqual(queued.map((q) => q.status), [200, 200, 200, 200]);
    assert.equal(await gauge('requests_deferred'), 4);
    for (const ac of waiting) ac.abort();
    assert.ok(await waitFor(async () => (await gauge('requests_deferred')) === 0, 3000, 20), 'the queue empties');
    const slots = await (await fetch(`${srv.url}/slots`)).json();
    assert.ok(slots[0].is_processing, 'the running request goes on');
    running.abort();
    assert.ok(await waitFor(async () => (await gauge('requests_processing')) === 0, 3000, 20));
  });

  test('a non-streamed request whose client leaves is cancelled too', async () => {
    const gauge = async (name) => Number((await (await fetch(`${srv.url}/metrics`)).text()).match(new RegExp(`^llamacpp:${name} (\\S+)$`, 'm'))[1]);
    const predicted0 = await gauge('tokens_predicted_total');
    const ac = new AbortController();
    const pending = fetch(`${srv.url}/v1/completions`, {
      method: 'POST', signal: ac.signal,
      body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 4000, ignore_eos: true, temperature: 0 }),
    }).catch(() => 'aborted');
    assert.ok(await waitFor(async () => (await gauge('requests_processing')) === 1, 3000, 10), 'it started');
    ac.abort();
    assert.equal(await pending, 'aborted');
    assert.ok(await waitFor(async () => (await gauge('requests_processing')) === 0, 3000, 20), 'the slot is freed');
    assert.ok((await gauge('tokens_predicted_total')) - predicted0 < 4000, 'generation stopped early');
  });
});

describe('--reasoning-format', () => {
  // A template whose generation prompt opens a <think> block, as reasoning models' templates do:
  // the whole reply is then reasoning, unless the model closes the block.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-server-test-'));
  const tmplFile = path.join(dir, 'think.jinja');
  fs.writeFileSync(tmplFile, "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant: <think>\n{% endif %}");
  let deepseek;
  let none;
  before(async () => {
    deepseek = await startServer([...T1, '-m', STORIES, '-c', '512', '--reasoning-format', 'deepseek', '--chat-template-file', tmplFile]);
    none = await startServer([...T1, '-m', STORIES, '-c', '512', '--reasoning-format', 'none', '--chat-template-file', tmplFile]);
  });
  after(async () => {
    await deepseek?.stop();
    await none?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('deepseek: the <think> block goes to reasoning_content; none: it stays in content', async () => {
    const req = { messages: [{ role: 'user', content: 'Tell me a story.' }], max_tokens: 20, temperature: 0 };
    const raw = await postJson(`${none.url}/completion`, { prompt: 'user: Tell me a story.\nassistant: <think>\n', n_predict: 20, temperature: 0 });
    const plain = await postJson(`${none.url}/v1/chat/completions`, req);
    assert.equal(plain.json.choices[0].message.content, raw.json.content);
    assert.equal(plain.json.choices[0].message.reasoning_content, undefined);

    const split = await postJson(`${deepseek.url}/v1/chat/completions`, req);
    const msg = split.json.choices[0].message;
    assert.equal(msg.content, '');
    assert.equal(msg.reasoning_content, raw.json.content.replace(/^\s+/, ''));
    const s = await fetch(`${deepseek.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ ...req, stream: true }) });
    const { events } = await readSse(s);
    const reasoning = events.map((e) => e.choices[0]?.delta?.reasoning_content ?? '').join('');
    const content = events.map((e) => e.choices[0]?.delta?.content ?? '').join('');
    assert.equal(reasoning, msg.reasoning_content);
    assert.equal(content, '');
  });
});

describe('demo mode (no -m)', () => {
  let srv;
  before(async () => { srv = await startServer([...T1, '-c', '512']); });
  after(async () => { await srv?.stop(); });

  test('serves a synthesized model and says its weights are random', async () => {
    const list = await (await fetch(`${srv.url}/v1/models`)).json();
    assert.match(list.data[0].owned_by, /random weights/);
    assert.match(srv.log(), /RANDOM WEIGHTS/);
    // synthesizing and loading take a while, and /health said so meanwhile
    assert.ok(srv.sawLoading, '/health answered 503 while the model was loading');
    const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const r = await client.chat.completions.create({ model: list.data[0].id, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4 });
    assert.equal(r.usage.completion_tokens > 0, true);
    await sleep(0);
  });
});

// A model with a recurrent state (synth-qwen35: gated delta-net layers) cannot drop a suffix of
// its memory; prefix reuse resumes from the state checkpoint kept after each prompt piece.
describe('synth-qwen35: prefix reuse from recurrent-state checkpoints', () => {
  const QWEN35 = model('synth-qwen35-f16.gguf');
  const args = [...T1, '-m', QWEN35, '-c', '1024', '-np', '1'];
  let srv;
  let client;
  before(async () => {
    srv = await startServer(args);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
  });
  after(async () => { await srv?.stop(); });

  const first = [{ role: 'system', content: 'You are a careful assistant who answers in one line.' }, { role: 'user', content: 'Name a colour.' }];
  const ask = (c, messages) => c.chat.completions.create({ model: 'm', messages, max_tokens: 8, temperature: 0 });

  test('the same prompt again reuses all but its last token and answers the same', async () => {
    const a = await ask(client, first);
    const b = await ask(client, first);
    assert.equal(a.usage.prompt_tokens_details.cached_tokens, 0);
    assert.equal(b.usage.prompt_tokens_details.cached_tokens, b.usage.prompt_tokens - 1);
    assert.equal(b.choices[0].message.content, a.choices[0].message.content);
  });

  test('a continued conversation resumes from a checkpoint and answers as a cold server does', async () => {
    const a = await ask(client, first);
    const next = [...first, { role: 'assistant', content: a.choices[0].message.content }, { role: 'user', content: 'And another one?' }];
    const warm = await ask(client, next);
    const cached = warm.usage.prompt_tokens_details.cached_tokens;
    assert.ok(cached >= a.usage.prompt_tokens - 1 && cached < warm.usage.prompt_tokens - 1, `cached_tokens ${cached}`);
    const cold = await startServer(args);
    try {
      const c = new OpenAI({ baseURL: `${cold.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
      const r = await ask(c, next);
      assert.equal(r.usage.prompt_tokens_details.cached_tokens, 0);
      assert.equal(warm.choices[0].message.content, r.choices[0].message.content);
    } finally {
      await cold.stop();
    }
  });

  test('without checkpoints the whole prompt is processed again', async () => {
    const none = await startServer([...args, '--ctx-checkpoints', '0']);
    try {
      const c = new OpenAI({ baseURL: `${none.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
      const a = await ask(c, first);
      const b = await ask(c, first);
      assert.equal(b.usage.prompt_tokens_details.cached_tokens, 0);
      assert.equal(b.choices[0].message.content, a.choices[0].message.content);
    } finally {
      await none.stop();
    }
  });
});
