// One request whose decode fails ends with an error to its own client while the others go on:
// KILN_TEST_FAIL_DECODE_TOKEN makes every decode of a batch holding that token fail (a fault
// only tests ask for). A long greedy generation runs while a request with the poisoned token
// joins its batch: the poisoned one gets a 500 error object, the long one finishes with exactly
// the text it gives when it runs alone, and the server keeps serving.
import { describe, before, after, test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, model, postJson } from './lib.js';

const STORIES = model('stories260K.gguf');
// <0x00>, a byte token TinyStories never produces: only the request that sends it has it
const POISON = 3;

describe('a failing decode ends only its own request', () => {
  let srv;
  before(async () => {
    srv = await startServer(['-t', '1', '-tb', '1', '-m', STORIES, '-c', '1024', '-np', '2'],
      { env: { KILN_TEST_FAIL_DECODE_TOKEN: String(POISON) } });
  });
  after(async () => {
    const r = await srv?.stop();
    assert.equal(r?.code, 0, `server exit: ${JSON.stringify(r)}`);
  });

  test('the poisoned request fails alone; the one sharing its batch is unaffected', async () => {
    const long = { prompt: 'Once upon a time', n_predict: 400, ignore_eos: true, temperature: 0 };
    const alone = await postJson(`${srv.url}/completion`, long);
    assert.equal(alone.status, 200, alone.text);
    assert.equal(alone.json.tokens_predicted, 400);

    // the poisoned request alone: an error object, not a hang or a crash
    const bad = await postJson(`${srv.url}/completion`, { prompt: [1, 100, POISON, 200], n_predict: 8 });
    assert.equal(bad.status, 500, bad.text);
    assert.match(bad.json.error.message, /llama_decode failed/);

    // now both at once: the poisoned prompt arrives while the long one streams
    const r = await fetch(`${srv.url}/completion`, { method: 'POST', body: JSON.stringify({ ...long, stream: true }) });
    assert.equal(r.status, 200);
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    let text = (decoder.decode((await reader.read()).value));
    const badTogether = await postJson(`${srv.url}/completion`, { prompt: [1, 100, POISON, 200], n_predict: 8 });
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    assert.equal(badTogether.status, 500, badTogether.text);
    assert.match(badTogether.json.error.message, /llama_decode failed/);
    const events = text.split('\n\n').filter((b) => b.startsWith('data: ')).map((b) => JSON.parse(b.slice(6)));
    assert.equal(events.at(-1).stop, true);
    assert.equal(events.at(-1).tokens_predicted, 400);
    assert.equal(events.map((e) => e.content).join(''), alone.json.content);
    // the two were in one batch: the server had to split it
    assert.match(srv.log(), /decoding them one by one/);

    const afterwards = await postJson(`${srv.url}/completion`, { prompt: 'The cat', n_predict: 8, temperature: 0 });
    assert.equal(afterwards.status, 200, afterwards.text);
    assert.equal(afterwards.json.tokens_predicted, 8);
    assert.equal((await fetch(`${srv.url}/health`)).status, 200);
  });
});
