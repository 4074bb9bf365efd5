// Slots: /slots/{id}?action=save|restore|erase with --slot-save-path (a restored slot continues
// as the uninterrupted one did, across a server restart), id_slot, cache_prompt, --cache-reuse,
// POST /props behind --props.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, postJson, model } from './lib.js';

const STORIES = ['-m', model('stories260K.gguf'), '-t', '1', '-c', '256'];

async function tokenize(url, text) {
  const r = await postJson(`${url}/tokenize`, { content: text, add_special: true });
  assert.equal(r.status, 200, r.text);
  return r.json.tokens;
}

// greedy; the generated token ids come back through n_probs
async function complete(url, prompt, nPredict, extra = {}) {
  const r = await postJson(`${url}/completion`, { prompt, n_predict: nPredict, temperature: 0, n_probs: 1, ...extra });
  assert.equal(r.status, 200, r.text);
  return r.json;
}

const slotAction = (url, id, action, body = {}) => postJson(`${url}/slots/${id}?action=${action}`, body);

test('save, restart, restore: the continuation equals the uninterrupted one', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-slots-'));
  try {
    let prompt, first, uninterrupted, saved;
    const a = await startServer([...STORIES, '--slot-save-path', dir]);
    try {
      prompt = await tokenize(a.url, 'Once upon a time, there was a little girl named Lily.');
      first = await complete(a.url, prompt, 12);
      saved = await slotAction(a.url, 0, 'save', { filename: 'chat.bin' });
      assert.equal(saved.status, 200, saved.text);
      assert.equal(saved.json.id_slot, 0);
      assert.equal(saved.json.filename, 'chat.bin');
      // the slot holds the prompt and the generated tokens but the last (sampled, never decoded)
      assert.equal(saved.json.n_saved, prompt.length + first.tokens.length - 1);
      assert.equal(saved.json.n_written, fs.statSync(path.join(dir, 'chat.bin')).size);
      assert.deepEqual(fs.readdirSync(dir), ['chat.bin'], 'no temporary file left');
      uninterrupted = await complete(a.url, [...prompt, ...first.tokens], 16);
      assert.ok(uninterrupted.timings.cache_n >= prompt.length, 'the uninterrupted run reused the slot');
    } finally {
      assert.equal((await a.stop()).code, 0);
    }

    const b = await startServer([...STORIES, '--slot-save-path', dir]);
    try {
      const restored = await slotAction(b.url, 0, 'restore', { filename: 'chat.bin' });
      assert.equal(restored.status, 200, restored.text);
      assert.equal(restored.json.n_restored, saved.json.n_saved);
      assert.equal(restored.json.n_read, saved.json.n_written);
      const slots = await (await fetch(`${b.url}/slots`)).json();
      assert.equal(slots[0].n_past, saved.json.n_saved);
      const resumed = await complete(b.url, [...prompt, ...first.tokens], 16);
      // only the last token was read again: the rest came from the file
      assert.equal(resumed.timings.cache_n, saved.json.n_saved);
      assert.equal(resumed.timings.prompt_n, 1);
      assert.deepEqual(resumed.tokens, uninterrupted.tokens);
      assert.equal(resumed.content, uninterrupted.content);

      const erased = await slotAction(b.url, 0, 'erase');
      assert.equal(erased.status, 200, erased.text);
      assert.equal(erased.json.n_erased, prompt.length + first.tokens.length + 16 - 1);
      const after = await (await fetch(`${b.url}/slots`)).json();
      assert.equal(after[0].n_past, 0);
    } finally {
      assert.equal((await b.stop()).code, 0);
    }

    // a file made by another model is refused, and the slot stays usable
    const c = await startServer(['-m', model('synth-qwen3-f16.gguf'), '-t', '1', '-c', '256', '--slot-save-path', dir]);
    try {
      const r = await slotAction(c.url, 0, 'restore', { filename: 'chat.bin' });
      assert.equal(r.status, 400, r.text);
      assert.match(r.json.error.message, /another model/);
      assert.equal((await postJson(`${c.url}/completion`, { prompt: 'Hi', n_predict: 2 })).status, 200);
    } finally {
      assert.equal((await c.stop()).code, 0);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('slot actions refuse bad names, slots and actions', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-slots-'));
  const srv = await startServer([...STORIES, '-np', '2', '--slot-save-path', path.join(dir, 'made')]);
  try {
    assert.ok(fs.statSync(path.join(dir, 'made')).isDirectory(), '--slot-save-path is created');
    for (const filename of ['../escape.bin', '/etc/passwd', 'a/b.bin', '..', '', 'x\\y']) {
      const r = await slotAction(srv.url, 0, 'save', { filename });
      assert.equal(r.status, 400, `${filename}: ${r.text}`);
      assert.match(r.json.error.message, /filename/);
    }
    assert.deepEqual(fs.readdirSync(dir), ['made'], 'nothing was written outside');
    let r = await slotAction(srv.url, 0, 'save', {});
    assert.equal(r.status, 400);
    r = await slotAction(srv.url, 2, 'save', { filename: 'x.bin' });
    assert.equal(r.status, 400);
    assert.match(r.json.error.message, /no slot 2/);
    r = await slotAction(srv.url, 'one', 'erase');
    assert.equal(r.status, 400);
    r = await slotAction(srv.url, 0, 'explode');
    assert.equal(r.status, 400);
    assert.match(r.json.error.message, /save, restore or erase/);
    r = await slotAction(srv.url, 1, 'restore', { filename: 'missing.bin' });
    assert.equal(r.status, 400);
    assert.match(r.json.error.message, /cannot open/);
  } finally {
    assert.equal((await srv.stop()).code, 0);
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const off = await startServer(STORIES);
  try {
    const r = await slotAction(off.url, 0, 'save', { filename: 'x.bin' });
    assert.equal(r.status, 501);
    assert.match(r.json.error.message, /--slot-save-path/);
  } finally {
    assert.equal((await off.stop()).code, 0);
  }
});

test('id_slot picks the slot and cache_prompt: false reads the whole prompt again', async () => {
  const srv = await startServer([...STORIES, '-np', '2']);
  try {
    const prompt = await tokenize(srv.url, 'Once upon a time, there was a dog.');
    const a = await complete(srv.url, prompt, 4, { id_slot: 1 });
    assert.equal(a.id_slot, 1);
    // the same prompt again: slot 1 has it cached, slot 0 does not
    const b = await complete(srv.url, prompt, 4, { id_slot: 0 });
    assert.equal(b.id_slot, 0);
    assert.equal(b.timings.cache_n, 0);
    const c = await complete(srv.url, prompt, 4, { id_slot: 1 });
    assert.equal(c.timings.cache_n, prompt.length - 1);
    const d = await complete(srv.url, prompt, 4, { id_slot: 1, cache_prompt: false });
    assert.equal(d.timings.cache_n, 0);
    assert.equal(d.timings.prompt_n, prompt.length);
    assert.deepEqual(d.tokens, c.tokens);
    const bad = await postJson(`${srv.url}/completion`, { prompt: 'x', n_predict: 1, id_slot: 2 });
    assert.equal(bad.status, 400);
    assert.match(bad.json.error.message, /id_slot/);
    const chat = await postJson(`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, id_slot: 1 });
    assert.equal(chat.status, 200, chat.text);
  } finally {
    assert.equal((await srv.stop()).code, 0);
  }
});

test('--cache-reuse moves a cached chunk to where the new prompt has it', async () => {
  const head = 'Once upon a time, there was a little girl.';
  const middle = ' She had a red ball and a big blue kite.';
  const tail = ' She liked to play in the park with her friends every day after school.';
  const run = async (args) => {
    const srv = await startServer([...STORIES, ...args]);
    try {
      await complete(srv.url, await tokenize(srv.url, head + middle + tail), 1);
      // the middle is cut out: the head is a common prefix, the tail sits further on in the cache
      const edited = await tokenize(srv.url, head + tail);
      const nHead = (await tokenize(srv.url, head)).length;
      return { r: await complete(srv.url, edited, 1), n: edited.length, nHead };
    } finally {
      assert.equal((await srv.stop()).code, 0);
    }
  };
  const plain = await run([]);
  assert.ok(plain.r.timings.cache_n <= plain.nHead + 1, `without --cache-reuse cache_n ${plain.r.timings.cache_n}`);
  const reused = await run(['--cache-reuse', '8']);
  // all but the last token (always read again for its logits) come from the cache
  assert.equal(reused.r.timings.cache_n, reused.n - 1);
  assert.equal(reused.r.timings.prompt_n, 1);
});

test('POST /props needs --props and changes nothing it does not know', async () => {
  const off = await startServer(STORIES);
  try {
    const r = await postJson(`${off.url}/props`, {});
    assert.equal(r.status, 501);
    assert.match(r.json.error.message, /--props/);
  } finally {
    assert.equal((await off.stop()).code, 0);
  }
  const on = await startServer([...STORIES, '--props']);
  try {
    const ok = await postJson(`${on.url}/props`, {});
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.json.success, true);
    const r = await postJson(`${on.url}/props`, { n_ctx: 5 });
    assert.equal(r.status, 400);
    assert.match(r.json.error.message, /'n_ctx' cannot be changed/);
  } finally {
    assert.equal((await on.stop()).code, 0);
  }
});
