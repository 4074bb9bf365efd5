// Reasoning through llama-server: the per-request "reasoning_format" (none / deepseek /
// deepseek-legacy / auto) over the server's --reasoning-format, the same split in a stream and
// in a whole reply, and thinking turned off through the template: --reasoning-budget 0,
// --chat-template-kwargs and the request's chat_template_kwargs (the request wins); a positive
// budget that closes the block after N tokens of thinking.
import { describe, before, after, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, model, postJson, readSse } from './lib.js';

const STORIES = model('stories260K.gguf');
const SYNTH = model('synth-qwen3-Q8_0.gguf');
const T1 = ['-t', '1', '-tb', '1'];

describe('per-request reasoning_format', () => {
  // the generation prompt opens a <think> block: the reply is reasoning until the model closes it
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-reasoning-test-'));
  const tmplFile = path.join(dir, 'think.jinja');
  fs.writeFileSync(tmplFile, "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant: <think>\n{% endif %}");
  const req = { messages: [{ role: 'user', content: 'Tell me a story.' }], max_tokens: 24, temperature: 0 };
  let srv;
  let raw;
  before(async () => {
    srv = await startServer([...T1, '-m', STORIES, '-c', '512', '--reasoning-format', 'deepseek', '--chat-template-file', tmplFile]);
    const r = await postJson(`${srv.url}/completion`, { prompt: 'user: Tell me a story.\nassistant: <think>\n', n_predict: 24, temperature: 0 });
    raw = r.json.content;
    assert.ok(raw.length > 0);
  });
  after(async () => {
    await srv?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  async function streamed(body) {
    const s = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ ...body, stream: true }) });
    assert.equal(s.status, 200);
    const { events } = await readSse(s);
    const join = (key) => events.map((e) => e.choices?.[0]?.delta?.[key] ?? '').join('');
    return { content: join('content'), reasoning: join('reasoning_content') };
  }

  test('"none" leaves the reasoning in the content, whatever the server default', async () => {
    const r = await postJson(`${srv.url}/v1/chat/completions`, { ...req, reasoning_format: 'none' });
    assert.equal(r.status, 200);
    assert.equal(r.json.choices[0].message.content, raw);
    assert.equal(r.json.choices[0].message.reasoning_content, undefined);
    const s = await streamed({ ...req, reasoning_format: 'none' });
    assert.deepEqual(s, { content: raw, reasoning: '' });
  });

  test('"deepseek" and "auto" move it to reasoning_content', async () => {
    for (const format of ['deepseek', 'auto']) {
      const r = await postJson(`${srv.url}/v1/chat/completions`, { ...req, reasoning_format: format });
      const msg = r.json.choices[0].message;
      assert.equal(msg.reasoning_content, raw.replace(/^\s+/, ''), format);
      assert.equal(msg.content, '', format);
      assert.deepEqual(await streamed({ ...req, reasoning_format: format }), { content: '', reasoning: msg.reasoning_content });
    }
  });

  test('"deepseek-legacy" fills reasoning_content and keeps the tagged reasoning in the content', async () => {
    const r = await postJson(`${srv.url}/v1/chat/completions`, { ...req, reasoning_format: 'deepseek-legacy' });
    const msg = r.json.choices[0].message;
    const reasoning = raw.replace(/^\s+/, '');
    assert.equal(msg.reasoning_content, reasoning);
    assert.equal(msg.content, `<think>${reasoning}</think>`);
    assert.deepEqual(await streamed({ ...req, reasoning_format: 'deepseek-legacy' }), { content: msg.content, reasoning });
  });

  test('an unknown reasoning_format is a 400 naming the field', async () => {
    for (const bad of ['r1', 3, true]) {
      const r = await postJson(`${srv.url}/v1/chat/completions`, { ...req, reasoning_format: bad });
      assert.equal(r.status, 400, JSON.stringify(bad));
      assert.match(r.json.error.message, /reasoning_format/);
    }
  });
});

describe('thinking turned off through the template', () => {
  // the synthetic Qwen3 model's template writes an empty <think></think> block when
  // enable_thinking is false, as Qwen3's does
  const empty = '<think>\n\n</think>\n\n';
  const msgs = [{ role: 'user', content: 'Hi' }];
  let budget0;
  let kwargs;
  let plain;
  before(async () => {
    budget0 = await startServer([...T1, '-m', SYNTH, '-c', '512', '--reasoning-budget', '0']);
    kwargs = await startServer([...T1, '-m', SYNTH, '-c', '512', '--chat-template-kwargs', '{"enable_thinking": false}']);
    plain = await startServer([...T1, '-m', SYNTH, '-c', '512']);
  });
  after(async () => {
    await budget0?.stop();
    await kwargs?.stop();
    await plain?.stop();
  });

  async function prompt(srv, extra = {}) {
    const r = await postJson(`${srv.url}/apply-template`, { messages: msgs, ...extra });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    return r.json.prompt;
  }

  test('--reasoning-budget 0 and --chat-template-kwargs close the thinking block in the prompt', async () => {
    const open = await prompt(plain);
    assert.ok(!open.endsWith(empty), open);
    assert.equal(await prompt(budget0), open + empty);
    assert.equal(await prompt(kwargs), open + empty);
  });

  test("the request's chat_template_kwargs win over the server's", async () => {
    const open = await prompt(plain);
    assert.equal(await prompt(budget0, { chat_template_kwargs: { enable_thinking: true } }), open);
    assert.equal(await prompt(plain, { chat_template_kwargs: { enable_thinking: false } }), open + empty);
    const r = await postJson(`${plain.url}/apply-template`, { messages: msgs, chat_template_kwargs: 'enable_thinking=false' });
    assert.equal(r.status, 400);
    assert.match(r.json.error.message, /chat_template_kwargs/);
  });
});

describe('a thinking budget (--reasoning-budget N, "thinking_budget_tokens")', () => {
  // the generation prompt opens <think>: the random model would think to the token limit
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-reasoning-budget-'));
  const tmplFile = path.join(dir, 'think.jinja');
  fs.writeFileSync(tmplFile, "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant: <think>\n{% endif %}");
  const req = { messages: [{ role: 'user', content: 'Think, then answer.' }], max_tokens: 24, temperature: 0, logprobs: true };
  let srv;
  before(async () => {
    srv = await startServer([...T1, '-m', SYNTH, '-c', '512', '--chat-template-file', tmplFile, '--reasoning-budget', '5']);
  });
  after(async () => {
    await srv?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('after N tokens of thinking the server closes the block and the answer follows', async () => {
    const none = await postJson(`${srv.url}/v1/chat/completions`, { ...req, reasoning_format: 'none' });
    assert.equal(none.status, 200, none.text);
    const text = none.json.choices[0].message.content;
    const at = text.indexOf('</think>\n\n');
    assert.ok(at > 0, text);
    assert.ok(text.length > at + '</think>\n\n'.length, `an answer follows: ${JSON.stringify(text)}`);
    const r = await postJson(`${srv.url}/v1/chat/completions`, { ...req, reasoning_format: 'deepseek' });
    const msg = r.json.choices[0].message;
    assert.equal(msg.reasoning_content, text.slice(0, at).replace(/^\s+/, ''));
    assert.equal(msg.content, text.slice(at + '</think>\n\n'.length).replace(/^\s+/, ''));
    // the logprobs list the chosen tokens: five of thinking, then the close
    const ids = r.json.choices[0].logprobs.content.map((t) => t.token);
    assert.equal(ids[5], '</think>', JSON.stringify(ids));
    // the same streamed
    const s = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ ...req, reasoning_format: 'deepseek', stream: true }) });
    const { events } = await readSse(s);
    const join = (key) => events.map((e) => e.choices?.[0]?.delta?.[key] ?? '').join('');
    assert.deepEqual({ reasoning: join('reasoning_content'), content: join('content') }, { reasoning: msg.reasoning_content, content: msg.content });
  });

  test('"thinking_budget_tokens" sets it per request; -1 keeps the server\'s; bad values are 400s', async () => {
    for (const [n, want] of [[2, 2], [0, 0], [-1, 5]]) {
      const r = await postJson(`${srv.url}/v1/chat/completions`, { ...req, reasoning_format: 'deepseek', thinking_budget_tokens: n });
      assert.equal(r.status, 200, r.text);
      const ids = r.json.choices[0].logprobs.content.map((t) => t.token);
      assert.equal(ids.indexOf('</think>'), want, `${n}: ${JSON.stringify(ids)}`);
    }
    for (const bad of [-2, 'ten', 1.5]) {
      const r = await postJson(`${srv.url}/v1/chat/completions`, { ...req, thinking_budget_tokens: bad });
      assert.equal(r.status, 400, JSON.stringify(bad));
      assert.match(r.json.error.message, /thinking_budget_tokens/);
    }
  });
});

describe('bad reasoning flags', () => {
  test('a --reasoning-budget below -1 and a non-object --chat-template-kwargs are refused naming the flag', async () => {
    for (const args of [['--reasoning-budget', '-5'], ['--chat-template-kwargs', '[1,2]']]) {
      await assert.rejects(startServer([...T1, '-m', STORIES, '-c', '256', ...args], { timeoutMs: 20000 }),
        (e) => e.message.includes(args[0]));
    }
  });
});

describe('calls and the reasoning block', () => {
  // the first template's generation prompt opens <think>, the second one's does not
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-reasoning-tools-'));
  const thinking = path.join(dir, 'think.jinja');
  const plain = path.join(dir, 'plain.jinja');
  fs.writeFileSync(thinking, "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant: <think>\n{% endif %}");
  fs.writeFileSync(plain, "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}");
  const tools = [{ type: 'function', function: { name: 'add', parameters: { type: 'object', properties: { a: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['a'], additionalProperties: false } } }];
  // a grammar that makes the model write exactly one call (in the generic syntax these templates get)
  const writeCall = { grammar: 'root ::= "{\\"tool_calls\\": [{\\"name\\": \\"add\\", \\"arguments\\": {\\"a\\": 1}}]}"' };
  const req = { messages: [{ role: 'user', content: 'Add.' }], tools, max_tokens: 60, seed: 1 };
  let inside;
  let outside;
  before(async () => {
    inside = await startServer([...T1, '-m', SYNTH, '-c', '1024', '--chat-template-file', thinking]);
    outside = await startServer([...T1, '-m', SYNTH, '-c', '1024', '--chat-template-file', plain]);
  });
  after(async () => {
    await inside?.stop();
    await outside?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('a call written outside the reasoning is a call', async () => {
    const r = await postJson(`${outside.url}/v1/chat/completions`, { ...req, ...writeCall });
    assert.equal(r.json.choices[0].finish_reason, 'tool_calls', r.text);
    assert.equal(r.json.choices[0].message.tool_calls[0].function.arguments, '{"a":1}');
  });

  test('written inside it, it stays reasoning (deepseek) or text (none), whole and streamed', async () => {
    for (const format of ['deepseek', 'none']) {
      const body = { ...req, ...writeCall, reasoning_format: format };
      const r = await postJson(`${inside.url}/v1/chat/completions`, body);
      assert.equal(r.status, 200, r.text);
      const c = r.json.choices[0];
      assert.equal(c.message.tool_calls, undefined, `${format}: ${r.text}`);
      assert.notEqual(c.finish_reason, 'tool_calls');
      const where = format === 'none' ? c.message.content : c.message.reasoning_content;
      assert.match(where, /"tool_calls"/, `${format}: ${r.text}`);
      const s = await fetch(`${inside.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ ...body, stream: true }) });
      const { events } = await readSse(s);
      const join = (key) => events.map((e) => e.choices?.[0]?.delta?.[key] ?? '').join('');
      assert.equal(join('content'), c.message.content ?? '');
      assert.equal(join('reasoning_content'), c.message.reasoning_content ?? '');
      assert.ok(!events.some((e) => e.choices?.[0]?.delta?.tool_calls), format);
    }
  });

  test('tool_choice required lets the model close its reasoning, then forces the call', async () => {
    // the bias makes the (random) model close the block at once; the grammar then writes the call
    const close = await postJson(`${inside.url}/tokenize`, { content: '</think>' });
    assert.equal(close.json.tokens.length, 1, JSON.stringify(close.json));
    const body = { ...req, tool_choice: 'required', parallel_tool_calls: false, max_tokens: 300, logit_bias: { [close.json.tokens[0]]: 100 } };
    for (const format of ['deepseek', 'none']) {
      const r = await postJson(`${inside.url}/v1/chat/completions`, { ...body, reasoning_format: format });
      assert.equal(r.status, 200, r.text);
      const c = r.json.choices[0];
      assert.equal(c.finish_reason, 'tool_calls', `${format}: ${r.text}`);
      assert.equal(c.message.tool_calls[0].function.name, 'add');
    }
  });
});
