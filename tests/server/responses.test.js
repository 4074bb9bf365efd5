// POST /v1/responses (OpenAI Responses API) driven by the official openai client's
// responses.create, whole and streamed, on stories260K. Greedy decoding makes the reply
// deterministic: it must equal what /v1/chat/completions gives for the same conversation, and
// the streamed deltas must add up to it.
import { describe, before, after, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, model, postJson, ADD_PARAMETERS } from './lib.js';

const MODEL = 'stories260K.gguf';

describe('Responses API', () => {
  let srv;
  let client;
  before(async () => {
    srv = await startServer(['-m', model(MODEL), '-c', '1024', '-t', '1', '-tb', '1']);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
  });
  after(async () => { assert.equal((await srv?.stop())?.code, 0); });

  const base = { model: MODEL, instructions: 'You tell short stories.', input: 'Once upon a time', max_output_tokens: 30, temperature: 0 };

  const chatText = async (messages, maxTokens) => {
    const r = await postJson(`${srv.url}/v1/chat/completions`, { messages, max_tokens: maxTokens, temperature: 0 });
    assert.equal(r.status, 200, r.text);
    return r.json;
  };

  test('a response has the Responses shape and the chat endpoint\'s text', async () => {
    const r = await client.responses.create(base);
    assert.equal(r.object, 'response');
    assert.match(r.id, /^resp_/);
    assert.equal(r.status, 'incomplete');
    assert.deepEqual(r.incomplete_details, { reason: 'max_output_tokens' });
    assert.equal(r.output.length, 1);
    assert.equal(r.output[0].type, 'message');
    assert.equal(r.output[0].role, 'assistant');
    assert.equal(r.output[0].content[0].type, 'output_text');
    const chat = await chatText([{ role: 'system', content: base.instructions }, { role: 'user', content: base.input }], 30);
    assert.equal(r.output_text, chat.choices[0].message.content);
    assert.ok(r.output_text.length > 0);
    assert.equal(r.usage.input_tokens, chat.usage.prompt_tokens);
    assert.equal(r.usage.output_tokens, 30);
    assert.equal(r.usage.total_tokens, r.usage.input_tokens + 30);
    assert.equal(r.instructions, base.instructions);
  });

  test('input items (a conversation with parts) equal the chat messages', async () => {
    const input = [
      { role: 'user', content: [{ type: 'input_text', text: 'Tell me about a dog.' }] },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'The dog was happy.' }] },
      { role: 'user', content: 'And then?' },
    ];
    const r = await client.responses.create({ model: MODEL, input, max_output_tokens: 20, temperature: 0 });
    const chat = await chatText([
      { role: 'user', content: 'Tell me about a dog.' },
      { role: 'assistant', content: 'The dog was happy.' },
      { role: 'user', content: 'And then?' },
    ], 20);
    assert.equal(r.output_text, chat.choices[0].message.content);
    assert.equal(r.usage.input_tokens, chat.usage.prompt_tokens);
  });

  test('streaming sends the typed events in order and the same text', async () => {
    const whole = await client.responses.create(base);
    const stream = await client.responses.create({ ...base, stream: true });
    const types = [];
    const seq = [];
    let text = '';
    let last = null;
    for await (const ev of stream) {
      types.push(ev.type);
      seq.push(ev.sequence_number);
      if (ev.type === 'response.output_text.delta') text += ev.delta;
      last = ev;
    }
    assert.deepEqual(types.slice(0, 4), [
      'response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added',
    ]);
    assert.deepEqual(types.slice(-4), [
      'response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.incomplete',
    ]);
    assert.ok(types.slice(4, -4).every((t) => t === 'response.output_text.delta'));
    assert.deepEqual(seq, seq.map((_, i) => i), 'sequence numbers count from 0');
    assert.equal(text, whole.output_text);
    assert.equal(last.response.output[0].content[0].text, whole.output_text);
    assert.equal(last.response.usage.output_tokens, 30);

    // a reply that ends by itself completes
    const short = await client.responses.create({ ...base, max_output_tokens: 400, stream: true });
    let final = null;
    for await (const ev of short) final = ev;
    assert.ok(['response.completed', 'response.incomplete'].includes(final.type));
    assert.equal(final.response.status, final.type === 'response.completed' ? 'completed' : 'incomplete');
  });

  const refused = [
    [{ model: MODEL }, /input/],
    [{ ...base, input: [] }, /input/],
    [{ ...base, previous_response_id: 'resp_x' }, /previous_response_id/],
    [{ ...base, store: true }, /store/],
    [{ ...base, tools: [{ type: 'web_search' }] }, /tools\[0\]\.type/],
    [{ ...base, tools: [{ type: 'function' }] }, /tools\[0\]\.name/],
    [{ ...base, input: [{ type: 'function_call_output', output: 'x' }] }, /call_id/],
    [{ ...base, input: [{ type: 'function_call', call_id: 'c', name: 'f', arguments: {} }] }, /arguments/],
    [{ ...base, input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] }, /input_image/],
    [{ ...base, text: { format: { type: 'json_object' } } }, /text.format/],
    [{ ...base, max_output_tokens: 0 }, /max_output_tokens/],
  ];
  for (const [body, re] of refused) {
    test(`400 naming the field for ${JSON.stringify(body).slice(0, 100)}`, async () => {
      await assert.rejects(client.responses.create(body), (e) => {
        assert.equal(e.status, 400);
        assert.match(e.message, re);
        return true;
      });
    });
  }
});

// Function tools on the synthetic Qwen3 model (its template writes <tool_call> JSON):
// tool_choice "required" makes the grammar force a call even from random weights; it comes back
// as a function_call output item, whole and streamed, and a function_call_output answers it.
describe('Responses API function calls', () => {
  let srv;
  let client;
  before(async () => {
    srv = await startServer(['-m', model('synth-qwen3-Q8_0.gguf'), '-c', '1024', '-t', '1', '-tb', '1']);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
  });
  after(async () => { assert.equal((await srv?.stop())?.code, 0); });

  const tools = [{
    type: 'function',
    name: 'add',
    description: 'Add two integers',
    parameters: ADD_PARAMETERS,
  }];
  const ask = { model: 'synth', input: 'What is 2 + 3?', tools, tool_choice: 'required', parallel_tool_calls: false, max_output_tokens: 300, temperature: 0 };
  const checkCall = (item) => {
    assert.equal(item.type, 'function_call');
    assert.equal(item.name, 'add');
    assert.equal(item.status, 'completed');
    assert.match(item.call_id, /\S/);
    const args = JSON.parse(item.arguments);
    assert.deepEqual(Object.keys(args).sort(), ['a', 'b']);
  };

  test('a forced call is a function_call item, whole and streamed; its output renders', async () => {
    const r = await client.responses.create(ask);
    assert.equal(r.status, 'completed');
    const calls = r.output.filter((o) => o.type === 'function_call');
    assert.equal(calls.length, 1);
    checkCall(calls[0]);
    assert.equal(r.tools.length, 1);
    assert.equal(r.tool_choice, 'required');

    const stream = await client.responses.create({ ...ask, stream: true });
    let done, args = '', pieces = 0;
    const types = [];
    for await (const ev of stream) {
      types.push(ev.type);
      if (ev.type === 'response.function_call_arguments.delta') {
        args += ev.delta;
        pieces += 1;
      }
      if (ev.type === 'response.completed') done = ev.response;
    }
    assert.ok(types.includes('response.output_item.added'));
    assert.ok(types.includes('response.function_call_arguments.done'));
    const sc = done.output.filter((o) => o.type === 'function_call');
    assert.equal(sc.length, 1);
    checkCall(sc[0]);
    assert.equal(sc[0].arguments, args);
    assert.equal(sc[0].arguments, calls[0].arguments);
    assert.ok(pieces > 1, `the arguments came in ${pieces} delta event(s)`);

    const next = await client.responses.create({
      ...ask,
      tool_choice: 'none',
      max_output_tokens: 8,
      input: [
        { role: 'user', content: 'What is 2 + 3?' },
        { type: 'function_call', call_id: calls[0].call_id, name: 'add', arguments: calls[0].arguments },
        { type: 'function_call_output', call_id: calls[0].call_id, output: '5' },
      ],
    });
    assert.equal(next.output.filter((o) => o.type === 'function_call').length, 0);
    assert.equal(next.output.filter((o) => o.type === 'message').length, 1);
  });
});
