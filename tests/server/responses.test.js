// POST /v1/responses (OpenAI Responses API) driven by the official openai client's
// responses.create, whole and streamed, on stories260K. Greedy decoding makes the reply
// deterministic: it must equal what /v1/chat/completions gives for the same conversation, and
// the streamed deltas must add up to it.
import { describe, before, after, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, model, postJson } from './lib.js';

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
    [{ ...base, tools: [{ type: 'function', name: 'f', parameters: {} }] }, /tools/],
    [{ ...base, input: [{ type: 'function_call_output', call_id: 'c', output: 'x' }] }, /function_call_output/],
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
