// The server calls the page makes: GET /props (model name, loading state, whether a key is
// needed) and streamed POST /v1/chat/completions, read as server-sent events.

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function headers(apiKey) {
  const h = { 'Content-Type': 'application/json' };
  if (apiKey) h.Authorization = `Bearer ${apiKey}`;
  return h;
}

// The server answers errors as { error: { message } } (OpenAI's shape); anything else is shown
// as the HTTP status.
async function errorFrom(res) {
  let message = `HTTP ${res.status}`;
  try {
    const body = await res.json();
    if (body && body.error && body.error.message) message = body.error.message;
  } catch { /* not JSON */ }
  return new ApiError(res.status, message);
}

export async function fetchProps(apiKey) {
  const res = await fetch('props', { headers: headers(apiKey) });
  if (!res.ok) throw await errorFrom(res);
  return res.json();
}

// Splits a growing text buffer into complete server-sent events; returns the data of each
// event and the unfinished tail.
export function takeEvents(buffer) {
  const events = [];
  const parts = buffer.split(/\r?\n\r?\n/);
  const rest = parts.pop();
  for (const part of parts) {
    const data = part.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, ''));
    if (data.length) events.push(data.join('\n'));
  }
  return { events, rest };
}

// Streams one chat completion. onDelta({ content, reasoning }) is called for each piece as it
// arrives. Resolves with { finish, timings } when the stream ends; rejects with an AbortError
// when signal is aborted (the caller's Stop) and with an ApiError when the server refuses.
export async function streamChat({ messages, params, apiKey, signal, onDelta }) {
  const body = {
    messages,
    stream: true,
    // the usage chunk at the end carries `timings` (tokens/s)
    stream_options: { include_usage: true },
    ...params,
  };
  const res = await fetch('v1/chat/completions', {
    method: 'POST',
    headers: headers(apiKey),
    body: JSON.stringify(body),
    signal,
  });
  if (!res.ok) throw await errorFrom(res);

  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  const result = { finish: null, timings: null };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    const { events, rest } = takeEvents(buffer);
    buffer = rest;
    for (const data of events) {
      if (data === '[DONE]') return result;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new ApiError(chunk.error.code || 500, chunk.error.message || 'error in the stream');
      if (chunk.timings) result.timings = chunk.timings;
      for (const choice of chunk.choices || []) {
        const d = choice.delta || {};
        if (d.content || d.reasoning_content) onDelta({ content: d.content || '', reasoning: d.reasoning_content || '' });
        if (choice.finish_reason) result.finish = choice.finish_reason;
      }
    }
  }
  return result;
}
