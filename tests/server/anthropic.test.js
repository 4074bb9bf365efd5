// POST /v1/messages and /v1/messages/count_tokens driven by the official Anthropic client
// (@anthropic-ai/sdk) on stories260K (ChatML). Greedy decoding makes replies deterministic, so
// the Messages API must give the text /v1/chat/completions gives for the same conversation,
// whole or streamed, and a stop sequence must cut the reply right before it.
import { describe, before, after, test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { startServer, model, postJson, ADD_PARAMETERS } from './lib.js';

const MODEL = 'stories260K.gguf';

describe('Anthropic Messages API', () => {
  let srv;
  let client;
  before(async () => {
    srv = await startServer(['-m', model(MODEL), '-c', '1024', '-t', '1', '-tb', '1']);
    client = new Anthropic({ baseURL: srv.url, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
  });
  after(async () => { assert.equal((await srv?.stop())?.code, 0); });

  const base = {
    model: MODEL,
    max_tokens: 30,
    temperature: 0,
    system: 'You tell short stories.',
    messages: [{ role: 'user', content: 'Once upon a time' }],
  };
  const textOf = (msg) => msg.content.filter((b) => b.type === 'text').map((b) => b.text).join('');

  test('a message has the Messages shape and the chat endpoint\'s text', async () => {
    const msg = await client.messages.create(base);
    assert.equal(msg.type, 'message');
    assert.equal(msg.role, 'assistant');
    assert.match(msg.id, /^msg_/);
    assert.equal(msg.content[0].type, 'text');
    assert.ok(textOf(msg).length > 0);
    assert.equal(msg.stop_reason, 'max_tokens');
    assert.equal(msg.stop_sequence, null);
    assert.equal(msg.usage.output_tokens, 30);
    const chat = await postJson(`${srv.url}/v1/chat/completions`, {
      messages: [{ role: 'system', content: base.system }, ...base.messages], max_tokens: 30, temperature: 0,
    });
    assert.equal(textOf(msg), chat.json.choices[0].message.content);
    assert.equal(msg.usage.input_tokens, chat.json.usage.prompt_tokens);
  });

  test('system and content as blocks equal the string forms', async () => {
    const a = await client.messages.create(base);
    const b = await client.messages.create({
      ...base,
      system: [{ type: 'text', text: base.system }],
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Once upon a time' }] }],
    });
    assert.equal(textOf(b), textOf(a));
    // a different system prompt is really used
    const c = await client.messages.create({ ...base, system: 'You write poems about the sea and the moon.' });
    assert.notEqual(c.usage.input_tokens, a.usage.input_tokens);
  });

  test('streaming sends the event types in order and the same text', async () => {
    const whole = await client.messages.create(base);
    const stream = await client.messages.create({ ...base, stream: true });
    const types = [];
    let text = '';
    let stop = null;
    let outTokens = null;
    let inTokens = null;
    for await (const ev of stream) {
      types.push(ev.type);
      if (ev.type === 'message_start') inTokens = ev.message.usage.input_tokens;
      if (ev.type === 'content_block_start') assert.equal(ev.content_block.type, 'text');
      if (ev.type === 'content_block_delta') {
        assert.equal(ev.delta.type, 'text_delta');
        assert.equal(ev.index, 0);
        text += ev.delta.text;
      }
      if (ev.type === 'message_delta') {
        stop = ev.delta.stop_reason;
        outTokens = ev.usage.output_tokens;
      }
    }
    assert.equal(types[0], 'message_start');
    assert.equal(types[1], 'content_block_start');
    assert.deepEqual(types.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
    assert.ok(types.slice(2, -3).every((t) => t === 'content_block_delta'));
    assert.equal(text, textOf(whole));
    assert.equal(stop, 'max_tokens');
    assert.equal(outTokens, 30);
    assert.equal(inTokens, whole.usage.input_tokens);

    // the client's stream helper assembles the same message
    const final = await client.messages.stream(base).finalMessage();
    assert.equal(textOf(final), textOf(whole));
  });

  test('a stop sequence ends the reply before it, with stop_reason stop_sequence', async () => {
    const whole = textOf(await client.messages.create(base));
    const word = whole.slice(8, 12);
    assert.ok(word.length === 4, `reply too short: ${JSON.stringify(whole)}`);
    const cut = whole.slice(0, whole.indexOf(word));
    const msg = await client.messages.create({ ...base, stop_sequences: [word] });
    assert.equal(textOf(msg), cut);
    assert.equal(msg.stop_reason, 'stop_sequence');
    assert.equal(msg.stop_sequence, word);
    const short = await client.messages.create({ ...base, max_tokens: 200, stop_sequences: ['\u0001never'] });
    assert.ok(['end_turn', 'max_tokens'].includes(short.stop_reason));
  });

  test('count_tokens equals the input_tokens of the message', async () => {
    const msg = await client.messages.create(base);
    const counted = await client.messages.countTokens({ model: MODEL, system: base.system, messages: base.messages });
    assert.equal(counted.input_tokens, msg.usage.input_tokens);
    const without = await client.messages.countTokens({ model: MODEL, messages: base.messages });
    assert.ok(without.input_tokens < counted.input_tokens);
  });

  const refused = [
    [{ messages: base.messages }, /max_tokens/],
    [{ ...base, messages: [] }, /messages/],
    [{ ...base, messages: [{ role: 'tool', content: 'x' }] }, /role/],
    [{ ...base, messages: [{ role: 'user', content: [{ type: 'image', source: {} }] }] }, /image/],
    [{ ...base, tools: [{ name: 'f' }] }, /tools\[0\]\.input_schema/],
    [{ ...base, tools: [{ type: 'web_search_20250305', name: 'web_search' }] }, /server tools/],
    [{ ...base, tools: [{ name: 'f', input_schema: { type: 'object' } }], tool_choice: { type: 'sometimes' } }, /tool_choice/],
    [{ ...base, messages: [{ role: 'user', content: [{ type: 'tool_result' }] }] }, /tool_use_id/],
    [{ ...base, thinking: { type: 'enabled', budget_tokens: 1024 } }, /thinking/],
    [{ ...base, stop_sequences: 'x' }, /stop_sequences/],
  ];
  for (const [body, re] of refused) {
    test(`400 naming the field for ${JSON.stringify(body).slice(0, 90)}`, async () => {
      await assert.rejects(client.messages.create(body), (e) => {
        assert.equal(e.status, 400);
        assert.match(e.message, re);
        return true;
      });
    });
  }
});

// Tools on the synthetic Qwen3 model (its template writes <tool_call> JSON): tool_choice "any"
// or a named tool makes the grammar force a call even from random weights; the call comes back
// as a tool_use block with stop_reason tool_use, whole and streamed, and a tool_result answers it.
describe('Anthropic Messages API tools', () => {
  let srv;
  let client;
  before(async () => {
    srv = await startServer(['-m', model('synth-qwen3-Q8_0.gguf'), '-c', '1024', '-t', '1', '-tb', '1']);
    client = new Anthropic({ baseURL: srv.url, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
  });
  after(async () => { assert.equal((await srv?.stop())?.code, 0); });

  const tools = [{
    name: 'add',
    description: 'Add two integers',
    input_schema: ADD_PARAMETERS,
  }];
  const ask = { model: 'synth', max_tokens: 300, temperature: 0, tools, messages: [{ role: 'user', content: 'What is 2 + 3?' }] };
  const checkCall = (block) => {
    assert.equal(block.type, 'tool_use');
    assert.equal(block.name, 'add');
    assert.match(block.id, /\S/);
    assert.deepEqual(Object.keys(block.input).sort(), ['a', 'b']);
    assert.ok(Number.isInteger(block.input.a) && Number.isInteger(block.input.b));
  };

  test('tool_choice any: a tool_use block and stop_reason tool_use, the same streamed', async () => {
    const msg = await client.messages.create({ ...ask, tool_choice: { type: 'any', disable_parallel_tool_use: true } });
    assert.equal(msg.stop_reason, 'tool_use');
    const calls = msg.content.filter((b) => b.type === 'tool_use');
    assert.equal(calls.length, 1);
    checkCall(calls[0]);

    const st = client.messages.stream({ ...ask, tool_choice: { type: 'any', disable_parallel_tool_use: true } });
    let partial = '', pieces = 0;
    st.on('streamEvent', (ev) => {
      if (ev.type === 'content_block_delta' && ev.delta.type === 'input_json_delta') {
        partial += ev.delta.partial_json;
        pieces += 1;
      }
    });
    const streamed = await st.finalMessage();
    assert.ok(pieces > 1, `the input came in ${pieces} input_json_delta event(s)`);
    assert.deepEqual(JSON.parse(partial), calls[0].input);
    assert.equal(streamed.stop_reason, 'tool_use');
    const sc = streamed.content.filter((b) => b.type === 'tool_use');
    assert.equal(sc.length, 1);
    checkCall(sc[0]);
    assert.deepEqual(sc[0].input, calls[0].input);
    assert.equal(sc[0].name, calls[0].name);

    // the result goes back as a tool_result block; the conversation renders and is answered
    const next = await client.messages.create({
      ...ask,
      tool_choice: { type: 'none' },
      max_tokens: 8,
      messages: [
        ...ask.messages,
        { role: 'assistant', content: [{ type: 'text', text: 'Let me add.' }, calls[0]] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: calls[0].id, content: '5' }, { type: 'text', text: 'Thanks' }] },
      ],
    });
    assert.ok(['end_turn', 'max_tokens'].includes(next.stop_reason));
    assert.equal(next.content.filter((b) => b.type === 'tool_use').length, 0);
    const counted = await client.messages.countTokens({ model: 'synth', tools, messages: ask.messages });
    const plain = await client.messages.countTokens({ model: 'synth', messages: ask.messages });
    assert.ok(counted.input_tokens > plain.input_tokens, 'the tools are part of the counted prompt');
  });

  test('a named tool is called', async () => {
    const msg = await client.messages.create({ ...ask, tool_choice: { type: 'tool', name: 'add' } });
    assert.equal(msg.stop_reason, 'tool_use');
    checkCall(msg.content.find((b) => b.type === 'tool_use'));
  });
});
