// Tool calling through llama-server with the official openai client, on the random-weight
// synthetic Qwen3 model (its template shows <tool_call> JSON calls): with tool_choice
// "required" or a named function the grammar makes even random weights call a declared tool
// with arguments that validate (ajv); the round trip renders; a stream reassembles to the same
// call; malformed tool fields are 400s.
import { describe, before, after, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, model, postJson } from './lib.js';
import { TOOLS, callValidator } from './tool-fixture.js';

const SYNTH = model('synth-qwen3-Q8_0.gguf');
const T1 = ['-t', '1', '-tb', '1'];


describe('tool calls (hermes syntax, synth Qwen3)', () => {
  let srv;
  let client;
  let checkCall;
  before(async () => {
    checkCall = await callValidator();
    srv = await startServer([...T1, '-m', SYNTH, '-c', '4096', '-np', '2', '--temp', '1.0']);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
  });
  after(async () => {
    const r = await srv?.stop();
    assert.equal(r?.code, 0, `server exit: ${JSON.stringify(r)}`);
  });

  const assertValidCall = (call, names) => {
    checkCall(call, names);
    assert.match(call.id, /^call_/);
  };

  const ask = [{ role: 'user', content: 'What is the weather in Paris?' }];

  test('tool_choice required: a valid call to one of the two tools', async () => {
    for (const seed of [1, 2, 3, 4]) {
      const r = await client.chat.completions.create({ model: 'x', messages: ask, tools: TOOLS, tool_choice: 'required', max_tokens: 300, seed });
      const c = r.choices[0];
      assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
      assert.ok(c.message.tool_calls.length >= 1);
      for (const call of c.message.tool_calls) assertValidCall(call);
      assert.equal(c.message.content, null);
    }
  });

  test('a named tool_choice calls that function; parallel_tool_calls false gives one call', async () => {
    const r = await client.chat.completions.create({
      model: 'x', messages: ask, tools: TOOLS, max_tokens: 300, seed: 5, parallel_tool_calls: false,
      tool_choice: { type: 'function', function: { name: 'add' } },
    });
    const c = r.choices[0];
    assert.equal(c.message.tool_calls.length, 1);
    assertValidCall(c.message.tool_calls[0], ['add']);
  });

  test('streamed deltas reassemble to the non-streamed call', async () => {
    const params = { model: 'x', messages: ask, tools: TOOLS, tool_choice: 'required', max_tokens: 300, seed: 7 };
    const whole = (await client.chat.completions.create(params)).choices[0];
    const stream = await client.chat.completions.create({ ...params, stream: true });
    const calls = [];
    const pieces = [];   // argument fragments per call
    let content = '';
    let finish = null;
    for await (const chunk of stream) {
      const ch = chunk.choices[0];
      if (!ch) continue;
      content += ch.delta?.content ?? '';
      for (const d of ch.delta?.tool_calls ?? []) {
        calls[d.index] ??= { id: '', type: '', function: { name: '', arguments: '' } };
        const t = calls[d.index];
        if (d.id) t.id = d.id;
        if (d.type) t.type = d.type;
        if (d.function?.name) t.function.name += d.function.name;
        if (d.function?.arguments) {
          // OpenAI's shape: the first delta of a call names it, later ones carry only arguments
          if (d.id) assert.equal(d.function.arguments, '', 'a call opens with empty arguments');
          else assert.equal(d.function.name, undefined);
          t.function.arguments += d.function.arguments;
          pieces[d.index] = (pieces[d.index] ?? 0) + 1;
        }
      }
      if (ch.finish_reason) finish = ch.finish_reason;
    }
    assert.equal(finish, 'tool_calls');
    assert.equal(content, whole.message.content ?? '');
    assert.deepEqual(calls.map((c) => [c.type, c.function.name, c.function.arguments]),
      whole.message.tool_calls.map((c) => [c.type, c.function.name, c.function.arguments]));
    for (const c of calls) assertValidCall(c);
    // the arguments arrive as they are written, not whole at the end
    assert.ok(pieces[0] > 1, `the first call's arguments came in ${pieces[0]} piece(s)`);
  });

  test('the tool round trip renders and answers', async () => {
    const first = (await client.chat.completions.create({ model: 'x', messages: ask, tools: TOOLS, tool_choice: 'required', max_tokens: 300, seed: 11 })).choices[0];
    const call = first.message.tool_calls[0];
    const messages = [...ask, first.message, { role: 'tool', tool_call_id: call.id, content: '{"temperature": 21}' }];
    const r = await client.chat.completions.create({ model: 'x', messages, tools: TOOLS, max_tokens: 8, seed: 1 });
    assert.ok(['stop', 'length', 'tool_calls'].includes(r.choices[0].finish_reason));
    // the rendered prompt carries the call and the tool's answer
    const tmpl = await postJson(`${srv.url}/apply-template`, { messages, tools: TOOLS });
    assert.equal(tmpl.status, 200, tmpl.text);
    assert.ok(tmpl.json.prompt.includes(`"name": "${call.function.name}"`), tmpl.json.prompt);
    assert.ok(tmpl.json.prompt.includes('<tool_response>\n{"temperature": 21}'), tmpl.json.prompt);
  });

  test('tool_choice none and auto never fail on random output', async () => {
    const none = await client.chat.completions.create({ model: 'x', messages: ask, tools: TOOLS, tool_choice: 'none', max_tokens: 16, seed: 1 });
    assert.equal(none.choices[0].message.tool_calls, undefined);
    assert.equal(typeof none.choices[0].message.content, 'string');
    for (const seed of [1, 2, 3]) {
      const auto = await client.chat.completions.create({ model: 'x', messages: ask, tools: TOOLS, max_tokens: 24, seed });
      assert.ok(['stop', 'length', 'tool_calls'].includes(auto.choices[0].finish_reason));
    }
  });

  test('malformed tool fields are 400s naming the field', async () => {
    const url = `${srv.url}/v1/chat/completions`;
    const bad = async (body, re) => {
      const r = await postJson(url, { messages: ask, ...body });
      assert.equal(r.status, 400, r.text);
      assert.match(r.json.error.message, re);
    };
    await bad({ tools: {} }, /'tools' must be a list/);
    await bad({ tools: [{ type: 'retrieval' }] }, /tools\[0\]\.type/);
    await bad({ tools: [{ type: 'function', function: {} }] }, /tools\[0\]\.function\.name/);
    await bad({ tools: TOOLS, tool_choice: 'sometimes' }, /'tool_choice' must be/);
    await bad({ tool_choice: 'required' }, /'tools' is empty/);
    await bad({ tools: TOOLS, tool_choice: { type: 'function', function: { name: 'nope' } } }, /no tool named 'nope'/);
    await bad({ tools: TOOLS, tool_choice: 'required', grammar: 'root ::= "x"' }, /cannot be used together/);
    await bad({ tools: TOOLS, parallel_tool_calls: 'yes' }, /parallel_tool_calls/);
    await bad({ messages: [...ask, { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'add', arguments: '{bad' } }] }] },
      /tool_calls\[0\]\.function\.arguments' is not valid JSON/);
  });
});
