// Shared by the llama-server tests: start a server on a free port, wait until it is healthy,
// stop it at the end; small HTTP and SSE helpers. KILN_BIN (the build's bin directory) and
// KILN_SHARED (the shared data directory) come from tests/tools/server.sh.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';

export const BIN = process.env.KILN_BIN || path.resolve('build/bin');
export const SHARED = process.env.KILN_SHARED || path.resolve('../shared');
export const SERVER = path.join(BIN, 'llama-server');

export function model(name) {
  return path.join(SHARED, 'models', name);
}

const running = new Set();

function killAll() {
  for (const p of running) {
    try { p.kill('SIGKILL'); } catch { /* already gone */ }
  }
}
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => { killAll(); process.exit(1); });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// A timer for Promise.race that does not keep the process alive after the race is decided.
const deadlineAfter = (ms) => new Promise((r) => setTimeout(r, ms).unref()).then(() => null);

// Starts llama-server with args (plus --port 0) and resolves when /health answers 200.
// The port is read from the server's "listening on http://HOST:PORT" line, so there is no race
// for a port picked in advance.
// env: variables added to the server's environment (LLAMA_ARG_*); ca: the certificate to trust
// when the server speaks HTTPS (--ssl-cert-file).
export async function startServer(args, { timeoutMs = 60000, env = {}, ca = null } = {}) {
  if (!fs.existsSync(SERVER)) throw new Error(`${SERVER} is not built`);
  const proc = spawn(SERVER, [...args, '--host', '127.0.0.1', '--port', '0'], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, ...env },
  });
  running.add(proc);
  if (process.env.KILN_SERVER_PIDFILE) fs.appendFileSync(process.env.KILN_SERVER_PIDFILE, `${proc.pid}\n`);
  let log = '';
  let exited = null;
  proc.on('exit', (code, signal) => { exited = { code, signal }; running.delete(proc); });
  const portPromise = new Promise((resolve) => {
    proc.stderr.on('data', (d) => {
      log += d.toString();
      const m = log.match(/listening on (https?):\/\/[^:]+:(\d+)/);
      if (m) resolve({ scheme: m[1], port: Number(m[2]) });
    });
    // a server that exits before listening (a bad flag) is reported once its stderr is read
    proc.on('close', () => resolve(null));
  });
  const deadline = Date.now() + timeoutMs;
  const listening = await Promise.race([portPromise, deadlineAfter(timeoutMs)]);
  if (!listening) { proc.kill('SIGKILL'); throw new Error(`llama-server did not start:\n${log}`); }
  const { port } = listening;
  const url = `${listening.scheme}://127.0.0.1:${port}`;
  let sawLoading = false;
  for (;;) {
    if (exited) throw new Error(`llama-server exited (${JSON.stringify(exited)}):\n${log}`);
    if (Date.now() > deadline) { proc.kill('SIGKILL'); throw new Error(`llama-server not healthy in time:\n${log}`); }
    try {
      const r = listening.scheme === 'https' ? await httpsGet(`${url}/health`, ca) : await fetch(`${url}/health`);
      if (r.status === 200) break;
      if (r.status === 503) sawLoading = true;
    } catch { /* not accepting yet */ }
    await sleep(50);
  }
  return {
    url,
    port,
    sawLoading,
    log: () => log,
    async stop() {
      if (exited) return exited;
      const done = new Promise((r) => proc.on('exit', (code, signal) => r({ code, signal })));
      proc.kill('SIGTERM');
      const res = await Promise.race([done, deadlineAfter(10000)]);
      if (!res) { proc.kill('SIGKILL'); return { code: null, signal: 'SIGKILL' }; }
      return res;
    },
  };
}

// GET over HTTPS trusting ca: { status, text }.
export function httpsGet(url, ca) {
  return new Promise((resolve, reject) => {
    https.get(url, { ca }, (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, text }));
    }).on('error', reject);
  });
}

export async function postJson(url, body, headers = {}) {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, json, text, headers: r.headers };
}

// Reads an SSE response to the end: the parsed data events and whether [DONE] came last.
export async function readSse(response) {
  const text = await response.text();
  const events = [];
  let done = false;
  for (const block of text.split('\n\n')) {
    if (!block.trim()) continue;
    if (!block.startsWith('data: ')) throw new Error(`not an SSE data event: ${JSON.stringify(block)}`);
    const payload = block.slice(6);
    if (payload === '[DONE]') { done = true; continue; }
    if (done) throw new Error('data after [DONE]');
    events.push(JSON.parse(payload));
  }
  return { events, done, text };
}

// Polls fn until it returns a truthy value or the time is up.
export async function waitFor(fn, timeoutMs, stepMs = 50) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) return v;
    await sleep(stepMs);
  }
}

export { sleep };

// The parameters of an "add" tool, for the tool-calling tests of the APIs built on the chat
// machinery (the grammar keeps even a random-weight model's arguments inside them).
export const ADD_PARAMETERS = {
  type: 'object',
  properties: { a: { type: 'integer', minimum: -99, maximum: 99 }, b: { type: 'integer', minimum: -99, maximum: 99 } },
  required: ['a', 'b'],
  additionalProperties: false,
};
