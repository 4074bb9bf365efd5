// HTTPS: --ssl-cert-file / --ssl-key-file make llama-server speak TLS (a certificate made here with
// the openssl command, trusted by the client); plain HTTP to it fails; bad files stop it at start
// with a message naming the flag.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { startServer, model, httpsGet } from './lib.js';

function postJsonTls(url, body, ca) {
  return new Promise((resolve, reject) => {
    const req = https.request(url, { method: 'POST', ca, headers: { 'Content-Type': 'application/json' } }, (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, json: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

test('HTTPS with a certificate and key; plain HTTP is not answered', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-tls-'));
  try {
    const cert = path.join(dir, 'cert.pem'), key = path.join(dir, 'key.pem');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1',
      '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
    const ca = fs.readFileSync(cert);
    const srv = await startServer(['-m', model('stories260K.gguf'), '-t', '1', '-c', '256', '--ssl-cert-file', cert, '--ssl-key-file', key], { ca });
    try {
      assert.match(srv.url, /^https:/);
      const health = await httpsGet(`${srv.url}/health`, ca);
      assert.equal(health.status, 200);
      const r = await postJsonTls(`${srv.url}/completion`, { prompt: 'Once upon a time', n_predict: 8, temperature: 0 }, ca);
      assert.equal(r.status, 200);
      assert.equal(r.json.tokens_predicted, 8);
      // several requests on one connection and a stream work as over plain HTTP
      const chat = await postJsonTls(`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }, ca);
      assert.equal(chat.status, 200);
      await assert.rejects(fetch(`http://127.0.0.1:${srv.port}/health`));
    } finally {
      assert.equal((await srv.stop()).code, 0);
    }

    await assert.rejects(startServer(['-m', model('stories260K.gguf'), '--ssl-cert-file', cert], { timeoutMs: 20000 }),
      /needs both --ssl-key-file and --ssl-cert-file/);
    await assert.rejects(startServer(['-m', model('stories260K.gguf'), '--ssl-cert-file', path.join(dir, 'none.pem'), '--ssl-key-file', key], { timeoutMs: 20000 }),
      /--ssl-cert-file '.*none\.pem'/);
    await assert.rejects(startServer(['-m', model('stories260K.gguf'), '--ssl-cert-file', cert, '--ssl-key-file', cert], { timeoutMs: 20000 }),
      /--ssl-key-file/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
