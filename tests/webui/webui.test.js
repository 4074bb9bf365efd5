// The web UI (webui/) in headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core)
// against llama-server on its synthesized demo model: load the page, send, watch the reply
// stream in, stop it, change a sampling setting, regenerate, edit, reload and find the
// conversation, delete it; export and import; the API key prompt; Markdown, highlighting, Copy and
// reasoning from canned and test-paced streams; how the page is served (gzip or not, ETag, built
// from the current sources), / turned off by --no-webui or replaced by --path; the page's SSE
// reader on its own. Run by tests/tools/webui.sh (CTest tool-webui).
// KILN_WEBUI_SCREENSHOT: where to save a screenshot of the chat (optional).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { chromium } from 'playwright-core';
import { startServer, waitFor } from '../server/lib.js';
import { WEBUI_DIR, sourceHash } from '../../webui/source-hash.mjs';
import { takeEvents } from '../../webui/src/api.js';

const CHROMIUM = process.env.KILN_CHROMIUM || '/usr/bin/chromium';
let browser;
let srv;   // the demo server most tests share (a server takes seconds to stop)

before(async () => {
  assert.ok(fs.existsSync(CHROMIUM), `${CHROMIUM} is missing (scripts/setup.sh installs Debian's chromium)`);
  // a context long enough that an unlimited reply is still streaming when Stop is pressed, and
  // no early end-of-generation token from the random weights
  [browser, srv] = await Promise.all([
    chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] }),
    startServer(['--demo', '-c', '16384', '--ignore-eos']),
  ]);
});
after(async () => { await Promise.all([browser?.close(), srv?.stop()]); });

// A page in a fresh browser context (its own IndexedDB and localStorage). Errors thrown in the
// page fail the test.
async function newPage() {
  const context = await browser.newContext({ viewport: { width: 1100, height: 720 }, permissions: ['clipboard-read', 'clipboard-write'] });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.checkErrors = () => assert.deepEqual(errors, [], 'errors in the page');
  return page;
}

// The chat completion requests the page sends, parsed.
function recordChatRequests(page) {
  const bodies = [];
  page.on('request', (r) => {
    if (r.method() === 'POST' && r.url().endsWith('/v1/chat/completions')) bodies.push(JSON.parse(r.postData()));
  });
  return bodies;
}

async function sendMessage(page, text) {
  await page.fill('#input', text);
  await page.press('#input', 'Enter');
}

// Waits for the n-th chat request to have been sent and its reply to end (the page shows Send
// again once the reply is saved); returns the reply's status line.
async function replyDone(page, requests, n) {
  assert.ok(await waitFor(() => requests.length >= n, 30000), `chat request ${n} was never sent`);
  await page.waitForSelector('#send:not([hidden])', { timeout: 60000 });
  return page.textContent('.message.assistant:last-of-type .meta');
}

function getRaw(url, headers) {
  return new Promise((resolve, reject) => {
    http.get(url, { headers }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
    }).on('error', reject);
  });
}

test('the page\'s SSE reader: events cut anywhere, CRLF, comments, multi-line data', () => {
  const stream = ': keep-alive\n\ndata: {"a":1}\n\nevent: x\r\ndata: line one\r\ndata: line two\r\n\r\ndata:{"b":"\u00e9"}\n\ndata: [DONE]\n\n';
  const expected = ['{"a":1}', 'line one\nline two', '{"b":"\u00e9"}', '[DONE]'];
  for (let step = 1; step <= stream.length; ++step) {
    const got = [];
    let buffer = '';
    for (let i = 0; i < stream.length; i += step) {
      const { events, rest } = takeEvents(buffer + stream.slice(i, i + step));
      got.push(...events);
      buffer = rest;
    }
    assert.deepEqual(got, expected, `fed ${step} characters at a time`);
    assert.equal(buffer, '');
  }
});

test('the page is the committed bundle, gzip or not, and was built from the current sources', async () => {
  const committed = fs.readFileSync(path.join(WEBUI_DIR, 'dist/index.html.gz'));
  const gz = await getRaw(`${srv.url}/`, { 'Accept-Encoding': 'gzip, deflate, br' });
  assert.equal(gz.status, 200);
  assert.equal(gz.headers['content-encoding'], 'gzip');
  assert.match(gz.headers['content-type'], /^text\/html/);
  assert.ok(gz.body.equals(committed), 'gzip body differs from webui/dist/index.html.gz');

  const plain = await getRaw(`${srv.url}/index.html`, { 'Accept-Encoding': 'identity' });
  assert.equal(plain.status, 200);
  assert.equal(plain.headers['content-encoding'], undefined);
  assert.ok(plain.body.equals(zlib.gunzipSync(committed)), 'plain body is not the inflated bundle');
  for (const refused of ['gzip;q=0, identity', 'br', '*;q=0']) {
    const r = await getRaw(`${srv.url}/`, { 'Accept-Encoding': refused });
    assert.equal(r.headers['content-encoding'], undefined, refused);
    assert.ok(r.body.equals(plain.body), refused);
  }
  assert.equal((await getRaw(`${srv.url}/`, { 'Accept-Encoding': '*' })).headers['content-encoding'], 'gzip');

  // one weak validator for both encodings; a cache may send it back with or without W/
  assert.match(gz.headers.etag, /^W\/"[0-9a-f]+"$/);
  assert.equal(plain.headers.etag, gz.headers.etag);
  for (const tag of [gz.headers.etag, gz.headers.etag.slice(2), '"other", ' + gz.headers.etag]) {
    assert.equal((await getRaw(`${srv.url}/`, { 'If-None-Match': tag })).status, 304, tag);
  }
  assert.equal((await getRaw(`${srv.url}/`, { 'If-None-Match': '"other"' })).status, 200);

  const m = /data-kiln-webui-source="([0-9a-f]+)"/.exec(plain.body.toString());
  assert.ok(m, 'the bundle carries no source hash');
  assert.equal(m[1], sourceHash(), 'webui/ changed since the bundle was built: run webui/build.sh and commit dist/');
});

test('chat: streamed reply, stop, settings, regenerate, edit, reload', async () => {
  const page = await newPage();
  const requests = recordChatRequests(page);
  const elsewhere = [];   // the page works offline: it asks nothing of any other host
  page.on('request', (r) => { if (!r.url().startsWith(`${srv.url}/`) && !r.url().startsWith('data:')) elsewhere.push(r.url()); });
  try {
    await page.goto(`${srv.url}/`);
    await page.waitForSelector('#model-name:text("kiln-demo")');

    // the reply appears while it is still being generated
    await sendMessage(page, 'Hello there');
    await page.waitForFunction(() => {
      const m = document.querySelector('.message.assistant');
      return m && m.classList.contains('streaming') && m.querySelector('.content').textContent.length > 20;
    }, null, { timeout: 30000 });
    assert.equal(await page.isVisible('#stop'), true);
    assert.equal(requests.length, 1);
    assert.equal(requests[0].stream, true);
    assert.deepEqual(requests[0].messages, [{ role: 'user', content: 'Hello there' }]);

    // Stop ends it: the page says so, the text stops growing, the server's slot goes idle
    await page.click('#stop');
    assert.match(await replyDone(page, requests, 1), /stopped/);
    const stoppedText = await page.textContent('.message.assistant .content');
    assert.ok(stoppedText.length > 20);
    const idle = await waitFor(async () => {
      const slots = await (await fetch(`${srv.url}/slots`)).json();
      return slots.every((s) => !s.is_processing);
    }, 10000);
    assert.ok(idle, 'the server still generates after Stop');
    await page.waitForTimeout(300);
    assert.equal(await page.textContent('.message.assistant .content'), stoppedText);

    // a sampling setting reaches the request; the finished reply shows tokens/s from `timings`
    await page.click('#open-settings');
    await page.fill('#settings input[name=max_tokens]', '12');
    await page.fill('#settings input[name=temperature]', '0.5');
    await page.click('#settings button[value=save]');
    await sendMessage(page, 'Second question');
    assert.match(await replyDone(page, requests, 2), /12 tokens, [\d.]+ t\/s/);
    const second = requests.at(-1);
    assert.equal(second.max_tokens, 12);
    assert.equal(second.temperature, 0.5);
    assert.deepEqual(second.messages.map((m) => m.role), ['user', 'assistant', 'user']);
    // the stopped reply goes back as history, as it was shown (Markdown rendering drops only
    // punctuation from the demo model's words, and tags such as <think> when the random demo
    // model happens to emit one mid-text: sanitized HTML keeps their text, not the tags)
    // Whether such a tag's name shows as text depends on where it stands (the random demo model
    // once emitted <tool_call> and the page showed "tool_call"), so those names are left out on
    // both sides (names of three letters or more: <b>, <em>, <p> … always render as markup).
    const letters = (t) => t.replace(/[^A-Za-z0-9]/g, '');
    const untagged = (t) => t.replace(/<\/?[A-Za-z][^<>]*>/g, '');
    const sent = second.messages[1].content;
    const tagNames = [...sent.matchAll(/<\/?([A-Za-z][^<>\s/]*)[^<>]*>/g)].map((m) => letters(m[1])).filter((n) => n.length >= 3);
    const withoutTagNames = (t) => tagNames.reduce((acc, n) => acc.split(n).join(''), t);
    assert.equal(withoutTagNames(letters(untagged(sent))), withoutTagNames(letters(stoppedText)));
    assert.equal(await page.locator('.message').count(), 4);

    // regenerate replaces the last reply, from the same history
    await page.click('.message.assistant:last-of-type .regenerate');
    await replyDone(page, requests, 3);
    assert.equal(requests.length, 3);
    assert.deepEqual(requests[2].messages, second.messages);
    assert.equal(await page.locator('.message').count(), 4);
    if (process.env.KILN_WEBUI_SCREENSHOT) await page.screenshot({ path: process.env.KILN_WEBUI_SCREENSHOT });

    // editing the first message drops what followed it and asks again
    await page.click('.message.user >> nth=0 >> .edit');
    await page.fill('.edit-box', 'Edited first message');
    await page.click('.save-edit');
    await replyDone(page, requests, 4);
    assert.deepEqual(requests.at(-1).messages, [{ role: 'user', content: 'Edited first message' }]);
    assert.equal(await page.locator('.message').count(), 2);

    // a reload comes back to the conversation (the hash names it)...
    await page.reload();
    await page.waitForSelector('.message.user .content:text("Edited first message")');
    assert.equal(await page.locator('.message').count(), 2);
    // ...and a fresh visit lists it and opens it
    await page.goto(`${srv.url}/`);
    assert.equal(await page.locator('.message').count(), 0);
    await page.click('#conversations .conversation-title:text("Edited first message")');
    await page.waitForSelector('.message.user .content:text("Edited first message")');
    assert.equal(await page.locator('.message.assistant').count(), 1);

    // deleting it (after the confirmation) empties the list and the page
    page.once('dialog', (d) => d.accept());
    await page.click('#conversations li.current .delete-conversation');
    await page.waitForSelector('#empty-hint');
    assert.equal(await page.locator('#conversations li').count(), 0);
    await page.reload();
    await page.waitForSelector('#empty-hint');
    assert.equal(await page.locator('#conversations li').count(), 0);
    assert.deepEqual(elsewhere, []);
    page.checkErrors();
  } finally {
    await page.context().close();
  }
});

test('conversations export to a file and import from one; a bad file is refused', async () => {
  const page = await newPage();
  try {
    await page.goto(`${srv.url}/`);
    const conv = { id: 'imported-1', title: 'From a file', updated: 1, messages: [
      { role: 'user', content: 'Old question' }, { role: 'assistant', content: 'Old **answer**', finish: 'stop' }] };
    const file = (name, text) => ({ name, mimeType: 'application/json', buffer: Buffer.from(text) });
    await page.setInputFiles('#import-file', file('export.json', JSON.stringify({ conversations: [conv] })));
    await page.click('#conversations .conversation-title:text("From a file")');
    await page.waitForSelector('.message.assistant strong:text("answer")');
    assert.equal(await page.locator('.message').count(), 2);

    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export')]);
    const exported = JSON.parse(fs.readFileSync(await download.path(), 'utf8'));
    assert.deepEqual(exported.conversations.map((c) => [c.id, c.title, c.messages]), [[conv.id, conv.title, conv.messages]]);

    for (const [text, reason] of [['not json', /not JSON/], ['{"conversations": [{"id": "x", "messages": [{"role": "tool"}]}]}', /conversation 1/]]) {
      const dialog = page.waitForEvent('dialog');
      await page.setInputFiles('#import-file', file('bad.json', text));
      const d = await dialog;
      assert.match(d.message(), reason);
      await d.dismiss();
    }
    assert.equal(await page.locator('#conversations li').count(), 1);
    page.checkErrors();
  } finally {
    await page.context().close();
  }
});

// A canned stream: reasoning first, then Markdown with code and a tag that must not survive
// sanitising, then the usage chunk with timings.
function cannedStream() {
  const chunk = (delta, extra = {}) => `data: ${JSON.stringify({ object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: null }], ...extra })}\n\n`;
  return [
    chunk({ reasoning_content: 'The user wants ' }),
    chunk({ reasoning_content: 'a doubling function.' }),
    chunk({ content: 'Here it is:\n\n```python\ndef double(x):\n    return x * 2\n```\n\n' }),
    chunk({ content: '**Done** <img src="x" onerror="window.pwned=1">' }),
    `data: ${JSON.stringify({ object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`,
    `data: ${JSON.stringify({ object: 'chat.completion.chunk', choices: [], timings: { prompt_n: 7, prompt_per_second: 100, predicted_n: 42, predicted_per_second: 12.5 } })}\n\n`,
    'data: [DONE]\n\n',
  ].join('');
}

test('Markdown, code highlighting, folded reasoning, sanitised HTML, timings', async () => {
  const page = await newPage();
  const requests = recordChatRequests(page);
  try {
    // the first request gets the canned stream, the next a refusal
    let routed = 0;
    await page.route('**/v1/chat/completions', (route) => route.fulfill(++routed === 1
      ? { status: 200, headers: { 'Content-Type': 'text/event-stream' }, body: cannedStream() }
      : { status: 400, contentType: 'application/json', body: JSON.stringify({ error: { code: 400, message: "'n_keep' is not supported yet" } }) }));
    await page.goto(`${srv.url}/`);
    await sendMessage(page, 'Write a function');
    assert.match(await replyDone(page, requests, 1), /42 tokens, 12\.5 t\/s · prompt 7 tokens, 100\.0 t\/s/);
    const reply = page.locator('.message.assistant');
    assert.equal(await reply.locator('details.reasoning .reasoning-text').textContent(), 'The user wants a doubling function.');
    assert.equal(await reply.locator('details.reasoning').getAttribute('open'), null, 'reasoning is not folded once the answer came');
    assert.equal(await reply.locator('pre code.hljs .hljs-keyword').first().textContent(), 'def');
    assert.equal(await reply.locator('strong').textContent(), 'Done');
    assert.equal(await reply.locator('img').getAttribute('onerror'), null);
    assert.equal(await page.evaluate(() => window.pwned), undefined);

    // Copy takes the reply as the model wrote it; a code block's button takes the code
    const clipboard = () => page.evaluate(() => navigator.clipboard.readText());
    await reply.locator('.message-actions .copy').click();
    assert.match(await clipboard(), /^Here it is:\n\n```python\n[\s\S]*\*\*Done\*\*/);
    await reply.locator('pre .copy-code').click();
    assert.equal(await clipboard(), 'def double(x):\n    return x * 2\n');

    // a refused request shows the server's message where the reply would be
    await sendMessage(page, 'Again');
    assert.match(await replyDone(page, requests, 2), /error: 'n_keep' is not supported yet/);
    page.checkErrors();
  } finally {
    await page.context().close();
  }
});

// A stream the test paces, from a small server of its own: the page's request is sent there
// instead of to llama-server (playwright's route.continue). Each reply sends its reasoning, then
// waits for step() before the answer and again before the end, so the test can look at the page
// in between without depending on timing.
async function pacedReasoningServer() {
  const sse = (delta) => `data: ${JSON.stringify({ object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;
  let next = null;   // resolves the waiting reply's current pause
  const pause = () => new Promise((r) => { next = r; });
  const server = http.createServer(async (req, res) => {
    req.resume();
    res.writeHead(200, { 'Content-Type': 'text/event-stream' });
    res.write(sse({ reasoning_content: 'Thinking it over' }));
    res.write(sse({ reasoning_content: ', slowly.' }));
    await pause();
    res.write(sse({ content: 'The answer.' }));
    await pause();
    res.end('data: [DONE]\n\n');
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${server.address().port}/`,
    step: () => { const r = next; next = null; r?.(); },
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }),
  };
}

test('reasoning is shown while the model thinks and folded once the answer streams', async () => {
  const paced = await pacedReasoningServer();
  const page = await newPage();
  const requests = recordChatRequests(page);
  try {
    await page.route('**/v1/chat/completions', (route) => route.continue({ url: paced.url }));
    await page.goto(`${srv.url}/`);
    await sendMessage(page, 'Think');
    const reasoning = page.locator('.message.assistant details.reasoning');
    await page.waitForSelector('.message.assistant details.reasoning[open] summary:text("Thinking")');
    assert.equal(await reasoning.locator('.reasoning-text').textContent(), 'Thinking it over, slowly.');
    paced.step();
    await page.waitForFunction(() => {
      const m = document.querySelector('.message.assistant');
      return m.classList.contains('streaming') && m.querySelector('.content').textContent.trim() === 'The answer.';
    });
    assert.equal(await reasoning.getAttribute('open'), null);
    assert.equal(await reasoning.locator('summary').textContent(), 'Reasoning');
    paced.step();
    assert.equal(await replyDone(page, requests, 1), '');   // ended normally, no timings sent
    // opened by the reader, it stays open
    await reasoning.locator('summary').click();
    assert.equal(await reasoning.locator('.reasoning-text').textContent(), 'Thinking it over, slowly.');
    assert.notEqual(await reasoning.getAttribute('open'), null);

    // a page closed mid-reply comes back with the reply marked, ready to regenerate
    await sendMessage(page, 'Think again');
    await page.waitForSelector('.message.assistant:last-of-type details.reasoning[open]');
    await page.reload();
    await page.waitForSelector('.message.user >> text=Think again');
    assert.equal(await page.locator('.message').count(), 4);
    assert.equal(await page.textContent('.message.assistant:last-of-type .meta'), 'interrupted');
    assert.equal(await page.isVisible('.message.assistant:last-of-type .regenerate'), true);
    page.checkErrors();
  } finally {
    await page.context().close();
    await paced.close();
  }
});

test('the page asks for the API key when the server has one', async () => {
  const keyed = await startServer(['--demo', '--api-key', 'kiln-test-key', '-n', '8']);
  const page = await newPage();
  const requests = recordChatRequests(page);
  try {
    await page.goto(`${keyed.url}/`);   // the page itself needs no key
    await page.waitForSelector('#api-key[open]');
    await page.fill('#api-key input', 'wrong-key');
    await page.click('#api-key button[value=save]');
    await page.waitForSelector('#api-key-reason:text("refused")');
    await page.fill('#api-key input', 'kiln-test-key');
    await page.click('#api-key button[value=save]');
    await page.waitForSelector('#model-name:text("kiln-demo")');
    await sendMessage(page, 'Hello');
    assert.match(await replyDone(page, requests, 1), /\d+ tokens, [\d.]+ t\/s/);

    // the settings show the key kept; emptied there, it is forgotten and asked for again
    await page.click('#open-settings');
    assert.equal(await page.inputValue('#settings input[name=api-key]'), 'kiln-test-key');
    await page.fill('#settings input[name=api-key]', '');
    await page.click('#settings button[value=save]');
    await sendMessage(page, 'Hello again');
    await page.waitForSelector('#api-key[open]');
    await page.fill('#api-key input', 'kiln-test-key');
    await page.click('#api-key button[value=save]');
    assert.match(await replyDone(page, requests, 3), /\d+ tokens, [\d.]+ t\/s/);
    page.checkErrors();
  } finally {
    await page.context().close();
    await keyed.stop();
  }
});

test('--no-webui and --webui none: / answers 404; --path serves a directory instead', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-webui-path-'));
  fs.mkdirSync(path.join(dir, 'js'));
  fs.writeFileSync(path.join(dir, 'index.html'), '<h1>my own page</h1>');
  fs.writeFileSync(path.join(dir, 'js', 'app.js'), 'console.log(1);');
  fs.writeFileSync(path.join(os.tmpdir(), 'kiln-webui-outside.txt'), 'outside');
  const servers = await Promise.all([['--no-webui'], ['--webui', 'none'], ['--path', dir, '--api-key', 'k']]
    .map((flags) => startServer(['--demo', ...flags])));
  const [noWebui, webuiNone, custom] = servers;
  try {
    for (const off of [noWebui, webuiNone]) {
      const r = await fetch(`${off.url}/`);
      assert.equal(r.status, 404);
      assert.equal((await r.json()).error.code, 404);
      assert.equal((await fetch(`${off.url}/index.html`)).status, 404);
      assert.equal((await fetch(`${off.url}/health`)).status, 200);
    }
    // the directory's files need no key (the page asks for it); the API still does
    const index = await fetch(`${custom.url}/`);
    assert.equal(index.status, 200);
    assert.match(index.headers.get('content-type'), /^text\/html/);
    assert.equal(await index.text(), '<h1>my own page</h1>');
    const js = await fetch(`${custom.url}/js/app.js`);
    assert.equal(js.status, 200);
    assert.match(js.headers.get('content-type'), /javascript/);
    assert.equal((await fetch(`${custom.url}/v1/models`)).status, 401);
    assert.equal((await fetch(`${custom.url}/missing.js`)).status, 401);
    for (const escape of ['/js/../../kiln-webui-outside.txt', '/%2e%2e/kiln-webui-outside.txt']) {
      const r = await getRaw(`${custom.url}${escape}`, {});
      assert.notEqual(r.status, 200, escape);
      assert.doesNotMatch(r.body.toString(), /outside/, escape);
    }
    await assert.rejects(startServer(['--demo', '--path', path.join(dir, 'missing')]), /--path: not a directory/);
  } finally {
    await Promise.all(servers.map((off) => off.stop()));
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
