// Each tool-call family end to end with the openai client: the random-weight synthetic Qwen3
// model served with another family's chat template (../shared/templates). The server reads the
// call syntax from the template, tool_choice "required" makes the grammar write a call in that
// syntax, and the family's parser must turn it into message.tool_calls that validate (ajv);
// the stream reassembles to the same call; the round trip renders; "auto" on random output never fails.
import { describe, before, after, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import OpenAI from 'openai';
import { startServer, model, SHARED } from './lib.js';
import { TOOLS, callValidator } from './tool-fixture.js';

const SYNTH = model('synth-qwen3-Q8_0.gguf');
const T1 = ['-t', '1', '-tb', '1'];

const FAMILIES = [
  'deepseek-ai-DeepSeek-V3.1.jinja',
  'deepseek-ai-DeepSeek-V3.2.jinja',
  'deepseek-ai-DeepSeek-V4.jinja',
  'deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja',
  'moonshotai-Kimi-K2.jinja',
  'GLM-4.6.jinja',
  'ByteDance-Seed-OSS.jinja',
  'openai-gpt-oss-120b.jinja',
  'meetkai-functionary-medium-v3.1.jinja',
  'meetkai-functionary-medium-v3.2.jinja',
  'CohereForAI-c4ai-command-r-plus-tool_use.jinja',
  'CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja',
  'ibm-granite-granite-3.3-2B-Instruct.jinja',
  'fireworks-ai-llama-3-firefunction-v2.jinja',
];

let assertValidCall;
before(async () => { assertValidCall = await callValidator(); });

for (const file of FAMILIES) {
  describe(`tool calls with ${file}`, () => {
    let srv;
    let client;
    before(async () => {
      srv = await startServer([...T1, '-m', SYNTH, '-c', '4096', '--temp', '1.0', '--chat-template-file', path.join(SHARED, 'templates', file)]);
      client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
    });
    after(async () => {
      const r = await srv?.stop();
      assert.equal(r?.code, 0, `server exit: ${JSON.stringify(r)}`);
    });
    const ask = [{ role: 'user', content: 'What is the weather in Paris?' }];

    test('tool_choice required and a named function give valid calls; the stream reassembles', async () => {
      for (const seed of [1, 2]) {
        // one call: random weights may repeat calls up to the token limit where several are allowed
        const r = await client.chat.completions.create({ model: 'x', messages: ask, tools: TOOLS, tool_choice: 'required', max_tokens: 400, seed, parallel_tool_calls: false });
        const c = r.choices[0];
        assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
        for (const call of c.message.tool_calls) assertValidCall(call);
      }
      const named = await client.chat.completions.create({
        model: 'x', messages: ask, tools: TOOLS, max_tokens: 400, seed: 3, parallel_tool_calls: false,
        tool_choice: { type: 'function', function: { name: 'add' } },
      });
      assert.equal(named.choices[0].message.tool_calls.length, 1, JSON.stringify(named.choices[0]));
      assertValidCall(named.choices[0].message.tool_calls[0], ['add']);

      const params = { model: 'x', messages: ask, tools: TOOLS, tool_choice: 'required', max_tokens: 400, seed: 4, parallel_tool_calls: false };
      const whole = (await client.chat.completions.create(params)).choices[0];
      const calls = [];
      for await (const chunk of await client.chat.completions.create({ ...params, stream: true })) {
        for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) {
          calls[d.index] ??= { type: '', function: { name: '', arguments: '' } };
          if (d.type) calls[d.index].type = d.type;
          calls[d.index].function.name += d.function?.name ?? '';
          calls[d.index].function.arguments += d.function?.arguments ?? '';
        }
      }
      assert.deepEqual(calls.map((c) => [c.function.name, c.function.arguments]),
        whole.message.tool_calls.map((c) => [c.function.name, c.function.arguments]));
    });

    test('the tool round trip (the call, then the tool message) renders and answers', async () => {
      const first = (await client.chat.completions.create({
        model: 'x', messages: ask, tools: TOOLS, tool_choice: 'required', parallel_tool_calls: false, max_tokens: 400, seed: 5,
      })).choices[0];
      assert.equal(first.finish_reason, 'tool_calls', JSON.stringify(first));
      const call = first.message.tool_calls[0];
      const messages = [...ask, first.message, { role: 'tool', tool_call_id: call.id, content: '{"result": 21}' }];
      const r = await client.chat.completions.create({ model: 'x', messages, tools: TOOLS, max_tokens: 8, seed: 1 });
      assert.ok(['stop', 'length', 'tool_calls'].includes(r.choices[0].finish_reason));
    });

    test('tool_choice auto on random output answers, never a 500', async () => {
      for (const seed of [1, 2]) {
        const r = await client.chat.completions.create({ model: 'x', messages: ask, tools: TOOLS, max_tokens: 32, seed });
        assert.ok(['stop', 'length', 'tool_calls'].includes(r.choices[0].finish_reason));
      }
    });
  });
}
