// llama-server driven by the official openai client, on stories260K (no chat template: ChatML)
// and on the synthetic Qwen3 model (its own template). Greedy decoding makes every reply
// deterministic, so a streamed reply must concatenate to the non-streamed one, a stop string
// must cut the reply exactly before its first occurrence, and a request must give the same
// reply whether it runs alone or batched with three others.
import { describe, before, after, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, model, postJson, readSse } from './lib.js';

const MODELS = [
  // one thread for the tiny model (fast on a busy machine), the default threads for the other
  { file: 'stories260K.gguf', args: ['-c', '2048', '-np', '4', '-t', '1', '-tb', '1'], maxTokens: 40 },
  { file: 'synth-qwen3-f16.gguf', args: ['-c', '2048', '-np', '4'], maxTokens: 12 },
];

const PROMPTS = ['Once upon a time', 'The little dog', 'Lily wanted to', 'One day, Tom and his mom'];

async function collectChatStream(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  let content = '';
  let reasoning = '';
  for (const c of chunks) {
    for (const ch of c.choices) {
      content += ch.delta?.content ?? '';
      reasoning += ch.delta?.reasoning_content ?? '';
    }
  }
  return { chunks, content, reasoning };
}

for (const m of MODELS) {
  describe(m.file, () => {
    let srv;
    let client;
    before(async () => {
      srv = await startServer(['-m', model(m.file), ...m.args]);
      client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
    });
    after(async () => {
      const r = await srv?.stop();
      assert.equal(r?.code, 0, `server exit: ${JSON.stringify(r)}`);
    });

    const chat = (content, extra = {}) => ({
      model: m.file,
      messages: [{ role: 'system', content: 'You tell short stories.' }, { role: 'user', content }],
      temperature: 0,
      max_tokens: m.maxTokens,
      ...extra,
    });

    test('model list', async () => {
      const list = await client.models.list();
      const ids = [];
      for await (const entry of list) ids.push(entry);
      assert.equal(ids.length, 1);
      assert.equal(ids[0].id, m.file);
      assert.equal(ids[0].object, 'model');
      assert.equal(ids[0].owned_by, 'kiln');
      const plain = await (await fetch(`${srv.url}/models`)).json();
      assert.equal(plain.data[0].id, m.file);
    });

    test('chat: the stream concatenates to the non-streamed reply, usage matches', async () => {
      const whole = await client.chat.completions.create(chat('Tell me a story about a cat.'));
      assert.equal(whole.object, 'chat.completion');
      assert.equal(whole.choices.length, 1);
      const choice = whole.choices[0];
      assert.equal(choice.message.role, 'assistant');
      assert.ok(['stop', 'length'].includes(choice.finish_reason), choice.finish_reason);
      const u = whole.usage;
      assert.ok(u.prompt_tokens > 10 && u.completion_tokens > 0, JSON.stringify(u));
      assert.equal(u.total_tokens, u.prompt_tokens + u.completion_tokens);
      if (choice.finish_reason === 'length') assert.equal(u.completion_tokens, m.maxTokens);

      const stream = await client.chat.completions.create({
        ...chat('Tell me a story about a cat.'),
        stream: true,
        stream_options: { include_usage: true },
      });
      const s = await collectChatStream(stream);
      assert.equal(s.content, choice.message.content ?? '');
      assert.equal(s.reasoning, choice.message.reasoning_content ?? '');
      const { chunks } = s;
      assert.ok(chunks.length >= 3);
      assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === chunks[0].id));
      assert.equal(chunks[0].choices[0].delta.role, 'assistant');
      const finals = chunks.filter((c) => c.choices.length && c.choices[0].finish_reason);
      assert.equal(finals.length, 1);
      assert.equal(finals[0].choices[0].finish_reason, choice.finish_reason);
      assert.equal(chunks.indexOf(finals[0]), chunks.length - 2, 'the finish chunk comes right before the usage chunk');
      const last = chunks[chunks.length - 1];
      assert.deepEqual(last.choices, []);
      assert.equal(last.usage.prompt_tokens, u.prompt_tokens);
      assert.equal(last.usage.completion_tokens, u.completion_tokens);
      assert.equal(last.usage.total_tokens, u.total_tokens);
    });

    test('chat: SSE framing on the wire ends with [DONE]', async () => {
      const r = await fetch(`${srv.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ ...chat('Hello'), stream: true }),
      });
      assert.equal(r.status, 200);
      assert.match(r.headers.get('content-type'), /^text\/event-stream/);
      const { events, done } = await readSse(r);
      assert.ok(done, 'data: [DONE] at the end');
      assert.ok(events.every((e) => !('usage' in e)), 'no usage fields without stream_options.include_usage');
      assert.ok(events.at(-1).choices[0].finish_reason);
    });

    test('completions: text, usage counts, streamed equals non-streamed, prompt lists', async () => {
      const prompt = PROMPTS[0];
      const whole = await client.completions.create({ model: m.file, prompt, max_tokens: m.maxTokens, temperature: 0 });
      assert.equal(whole.object, 'text_completion');
      const tok = await postJson(`${srv.url}/tokenize`, { content: prompt, add_special: true });
      assert.equal(whole.usage.prompt_tokens, tok.json.tokens.length);
      assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + whole.usage.completion_tokens);
      if (whole.choices[0].finish_reason === 'length') assert.equal(whole.usage.completion_tokens, m.maxTokens);

      const stream = await client.completions.create({ model: m.file, prompt, max_tokens: m.maxTokens, temperature: 0, stream: true });
      let text = '';
      let finish = null;
      for await (const c of stream) {
        text += c.choices[0]?.text ?? '';
        finish = c.choices[0]?.finish_reason ?? finish;
      }
      assert.equal(text, whole.choices[0].text);
      assert.equal(finish, whole.choices[0].finish_reason);

      const two = await client.completions.create({ model: m.file, prompt: [PROMPTS[0], PROMPTS[1]], max_tokens: m.maxTokens, temperature: 0 });
      assert.deepEqual(two.choices.map((c) => c.index), [0, 1]);
      assert.equal(two.choices[0].text, whole.choices[0].text);
      const second = await client.completions.create({ model: m.file, prompt: PROMPTS[1], max_tokens: m.maxTokens, temperature: 0 });
      assert.equal(two.choices[1].text, second.choices[0].text);
      assert.equal(two.usage.prompt_tokens, whole.usage.prompt_tokens + second.usage.prompt_tokens);
    });

    test('max_tokens ends with finish_reason "length"', async () => {
      const r = await client.chat.completions.create(chat('Tell me a story.', { max_tokens: 3 }));
      assert.equal(r.choices[0].finish_reason, 'length');
      assert.equal(r.usage.completion_tokens, 3);
      const c = await client.completions.create({ model: m.file, prompt: PROMPTS[2], max_tokens: 2, temperature: 0 });
      assert.equal(c.choices[0].finish_reason, 'length');
      assert.equal(c.usage.completion_tokens, 2);
    });

    test('stop strings cut the reply before their first occurrence and are never sent', async () => {
      const prompt = PROMPTS[3];
      const base = (await client.completions.create({ model: m.file, prompt, max_tokens: m.maxTokens, temperature: 0 })).choices[0].text;
      assert.ok(base.length >= 6, `need some output to cut: ${JSON.stringify(base)}`);
      const at = Math.floor(base.length / 2);
      const stop = base.slice(at, at + 3);
      const expected = base.slice(0, base.indexOf(stop));
      const stops = ['\u0001never-appears', stop];

      const r = await client.completions.create({ model: m.file, prompt, max_tokens: m.maxTokens, temperature: 0, stop: stops });
      assert.equal(r.choices[0].text, expected);
      assert.equal(r.choices[0].finish_reason, 'stop');

      const stream = await client.completions.create({ model: m.file, prompt, max_tokens: m.maxTokens, temperature: 0, stop: stops, stream: true });
      let text = '';
      for await (const c of stream) {
        const piece = c.choices[0]?.text ?? '';
        assert.ok(!piece.includes(stop), 'a streamed piece holds the stop string');
        text += piece;
      }
      assert.equal(text, expected);

      // chat: a stop string taken from the chat reply
      const full = (await client.chat.completions.create(chat('Tell me about a bird.'))).choices[0].message.content;
      if (full.length >= 6) {
        const cs = full.slice(Math.floor(full.length / 2), Math.floor(full.length / 2) + 2);
        const cut = await client.chat.completions.create(chat('Tell me about a bird.', { stop: cs }));
        assert.equal(cut.choices[0].message.content, full.slice(0, full.indexOf(cs)));
        assert.equal(cut.choices[0].finish_reason, 'stop');
        const cstream = await collectChatStream(await client.chat.completions.create({ ...chat('Tell me about a bird.', { stop: cs }), stream: true }));
        assert.equal(cstream.content, full.slice(0, full.indexOf(cs)));
      }
    });

    test('four concurrent streams each equal the same request run alone', async () => {
      const req = (p) => ({ ...chat(p), stream: true, max_tokens: m.maxTokens });
      const alone = [];
      for (const p of PROMPTS) alone.push(await collectChatStream(await client.chat.completions.create(req(p))));
      const together = await Promise.all(PROMPTS.map(async (p) => collectChatStream(await client.chat.completions.create(req(p)))));
      for (let i = 0; i < PROMPTS.length; ++i) {
        assert.equal(together[i].content, alone[i].content, `prompt ${i}`);
        assert.equal(together[i].reasoning, alone[i].reasoning, `prompt ${i}`);
      }
    });
  });
}
