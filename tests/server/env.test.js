// LLAMA_ARG_* environment variables configure llama-server as they do llama.cpp's, and a flag on
// the command line wins over its variable; /props and /v1/models show what took effect.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, model } from './lib.js';

const getJson = async (url) => (await fetch(url)).json();

test('LLAMA_ARG_CTX_SIZE, _N_PARALLEL, _MODEL and _ALIAS take effect', async () => {
  const srv = await startServer(['-t', '1'], {
    env: {
      LLAMA_ARG_MODEL: model('stories260K.gguf'),
      LLAMA_ARG_CTX_SIZE: '768',
      LLAMA_ARG_N_PARALLEL: '2',
      LLAMA_ARG_ALIAS: 'from-the-env',
      LLAMA_ARG_PORT: '1', // the test's --port 0 on the command line wins
    },
  });
  try {
    const props = await getJson(`${srv.url}/props`);
    assert.equal(props.total_slots, 2);
    assert.equal(props.default_generation_settings.n_ctx, 384); // 768 split over 2 slots
    assert.equal(props.model_path, model('stories260K.gguf'));
    const models = await getJson(`${srv.url}/v1/models`);
    assert.equal(models.data[0].id, 'from-the-env');
  } finally {
    assert.equal((await srv.stop()).code, 0);
  }
});

test('the command line wins over the variable', async () => {
  const srv = await startServer(['-m', model('stories260K.gguf'), '-t', '1', '-c', '512'], {
    env: { LLAMA_ARG_CTX_SIZE: '768', LLAMA_ARG_N_PARALLEL: '2' },
  });
  try {
    const props = await getJson(`${srv.url}/props`);
    assert.equal(props.total_slots, 2);
    assert.equal(props.default_generation_settings.n_ctx, 256);
  } finally {
    assert.equal((await srv.stop()).code, 0);
  }
});

test('a bad value stops the server with a message naming the variable', async () => {
  await assert.rejects(
    startServer(['-m', model('stories260K.gguf')], { env: { LLAMA_ARG_CTX_SIZE: 'big' }, timeoutMs: 20000 }),
    /LLAMA_ARG_CTX_SIZE/,
  );
});
