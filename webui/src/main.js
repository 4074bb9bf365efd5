// The chat page llama-server serves at /: one conversation at a time, streamed from
// /v1/chat/completions, kept in the browser (store.js). The URL's hash names the open
// conversation, so a reload comes back to it.
import './style.css';
import { ApiError, fetchProps, streamChat } from './api.js';
import { MessageView, renderConversation, renderConversationList } from './chat-view.js';
import { currentSettings, samplingParams, setupSettingsDialog, showServerDefaults } from './settings.js';
import * as store from './store.js';

const $ = (id) => document.getElementById(id);
const ui = {
  messages: $('messages'),
  conversations: $('conversations'),
  input: $('input'),
  composer: $('composer'),
  send: $('send'),
  stop: $('stop'),
  modelName: $('model-name'),
  status: $('server-status'),
  settings: $('settings'),
  apiKeyDialog: $('api-key'),
};

const state = {
  conv: store.newConversation(),
  abort: null,           // the AbortController of the running generation
  keyPrompt: null,       // the API key dialog's answer while it is open
  apiKey: store.loadApiKey(),
};

const messageActions = {
  onEdit: (index, text) => editAndResend(index, text),
  onRegenerate: (index) => regenerate(index),
};

// ---- API key ----------------------------------------------------------------------------

// Asks for the key; resolves true when one was entered, false when the dialog was dismissed.
// Callers that hit a 401 while the dialog is open share its answer.
function askApiKey(reason) {
  if (state.keyPrompt) return state.keyPrompt;
  state.keyPrompt = new Promise((resolve) => {
    const dialog = ui.apiKeyDialog;
    const input = dialog.querySelector('input');
    $('api-key-reason').textContent = reason;
    input.value = '';
    dialog.addEventListener('close', () => {
      const ok = dialog.returnValue === 'save' && input.value.trim() !== '';
      if (ok) {
        state.apiKey = input.value.trim();
        store.storeApiKey(state.apiKey);
      }
      state.keyPrompt = null;
      resolve(ok);
    }, { once: true });
    dialog.returnValue = '';
    dialog.showModal();
  });
  return state.keyPrompt;
}

// Runs call(apiKey); when the server answers 401, asks for a key and tries again.
async function withApiKey(call) {
  for (let attempt = 0; ; ++attempt) {
    try {
      return await call(state.apiKey);
    } catch (e) {
      if (!(e instanceof ApiError) || e.status !== 401) throw e;
      const reason = attempt === 0 && !state.apiKey ? 'This server needs an API key.' : `The server refused the key: ${e.message}`;
      if (!(await askApiKey(reason))) throw e;
    }
  }
}

// ---- server state -----------------------------------------------------------------------

async function loadServerInfo() {
  for (;;) {
    try {
      const props = await withApiKey((key) => fetchProps(key));
      const name = props.model_alias || (props.model_path || '').split('/').pop() || 'model';
      ui.modelName.textContent = name;
      ui.status.textContent = props.demo ? 'demo model: random weights, meaningless replies' : '';
      showServerDefaults(ui.settings, props);
      return;
    } catch (e) {
      if (e instanceof ApiError && e.status === 503) {
        ui.status.textContent = 'loading the model\u2026';
        await new Promise((r) => setTimeout(r, 1000));
        continue;
      }
      ui.status.textContent = `server: ${e.message}`;
      return;
    }
  }
}

// ---- conversations ----------------------------------------------------------------------

async function refreshList() {
  const all = await store.listConversations();
  renderConversationList(ui.conversations, all, state.conv.id, {
    onOpen: (id) => { location.hash = `#/c/${id}`; },
    onDelete: deleteConversation,
  });
}

function showConversation() {
  document.title = state.conv.messages.length ? `${state.conv.title} - Kiln` : 'Kiln';
  renderConversation(ui.messages, state.conv, messageActions);
  ui.messages.scrollTop = ui.messages.scrollHeight;
}

async function openFromHash() {
  const m = /^#\/c\/(.+)$/.exec(location.hash);
  if (m && m[1] === state.conv.id) return;
  // a generation still running finishes into the conversation it belongs to (generate() saves
  // it there), not into the one opened now
  stop();
  state.conv = store.newConversation();
  const found = m ? await store.getConversation(decodeURIComponent(m[1])) : null;
  if (found) state.conv = found;
  showConversation();
  await refreshList();
  ui.input.focus();
}

async function deleteConversation(id) {
  const conv = await store.getConversation(id);
  if (!confirm(`Delete "${conv ? conv.title : 'this conversation'}"?`)) return;
  await store.deleteConversation(id);
  if (id === state.conv.id) {
    history.replaceState(null, '', location.pathname + location.search);
    state.conv = store.newConversation();
    showConversation();
  }
  await refreshList();
}

// Stores conv; the open one's id goes into the URL, so a reload comes back to it.
async function save(conv) {
  const first = conv.messages.find((m) => m.role === 'user');
  if (first) conv.title = first.content.trim().split('\n')[0].slice(0, 60) || 'Untitled';
  await store.saveConversation(conv);
  if (conv === state.conv && location.hash !== `#/c/${conv.id}`) history.replaceState(null, '', `#/c/${conv.id}`);
  await refreshList();
}

async function exportAll() {
  const blob = new Blob([await store.exportConversations()], { type: 'application/json' });
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = 'kiln-conversations.json';
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}

async function importFile(file) {
  try {
    await store.importConversations(store.parseExport(await file.text()));
  } catch (e) {
    alert(`Cannot import ${file.name}: ${e.message}`);
  }
  await refreshList();
}

// ---- generation -------------------------------------------------------------------------

function setGenerating(on) {
  document.body.classList.toggle('generating', on);
  ui.send.hidden = on;
  ui.stop.hidden = !on;
}

function requestMessages() {
  const out = [];
  const system = currentSettings().system;
  if (system && system.trim()) out.push({ role: 'system', content: system });
  for (const m of state.conv.messages) {
    if (m.role === 'assistant' && !m.content && !m.reasoning) continue;   // a failed or empty turn
    out.push({ role: m.role, content: m.content });
  }
  return out;
}

function nearBottom() {
  const m = ui.messages;
  return m.scrollHeight - m.scrollTop - m.clientHeight < 80;
}

// Appends an assistant message to the open conversation and streams the reply into it. The
// page shows Send again only once the reply is saved, so a reload from then on finds it.
async function generate() {
  const conv = state.conv;
  const abort = new AbortController();
  state.abort = abort;
  setGenerating(true);

  const messages = requestMessages();
  const msg = { role: 'assistant', content: '', reasoning: '' };
  conv.messages.push(msg);
  const view = new MessageView(msg, conv.messages.length - 1, messageActions);
  ui.messages.querySelector('#empty-hint')?.remove();
  ui.messages.appendChild(view.el);
  ui.messages.scrollTop = ui.messages.scrollHeight;
  view.update(true);
  // saved with the empty reply, and again now and then while it streams: a page closed
  // mid-reply keeps what came, and the reply to regenerate
  await save(conv);
  let savedAt = Date.now();
  try {
    const result = await withApiKey((apiKey) => streamChat({
      messages,
      params: samplingParams(),
      apiKey,
      signal: abort.signal,
      onDelta: ({ content, reasoning }) => {
        const follow = nearBottom();
        msg.content += content;
        msg.reasoning += reasoning;
        view.update(true);
        if (follow) ui.messages.scrollTop = ui.messages.scrollHeight;
        if (Date.now() - savedAt > 2000) {
          savedAt = Date.now();
          store.saveConversation(conv);
        }
      },
    }));
    msg.finish = result.finish || 'stop';   // a stream may end without saying why
    msg.timings = result.timings;
  } catch (e) {
    if (e.name === 'AbortError') msg.finish = 'stopped';
    else msg.error = e.message;
  } finally {
    view.streaming = false;
    view.render();
    // a conversation left while generating is still saved, under its own id
    await save(conv);
    if (state.abort === abort) {
      state.abort = null;
      setGenerating(false);
    }
  }
}

function stop() {
  state.abort?.abort();
}

async function send(text) {
  if (state.abort || !text.trim()) return;
  state.conv.messages.push({ role: 'user', content: text });
  const view = new MessageView(state.conv.messages.at(-1), state.conv.messages.length - 1, messageActions);
  ui.messages.querySelector('#empty-hint')?.remove();
  ui.messages.appendChild(view.el);
  await generate();
}

// Drops message index and everything after it, then generates again.
async function regenerate(index) {
  if (state.abort) return;
  state.conv.messages.length = index;
  showConversation();
  await generate();
}

async function editAndResend(index, text) {
  if (state.abort || !text.trim()) return;
  state.conv.messages.length = index + 1;
  state.conv.messages[index].content = text;
  showConversation();
  await generate();
}

// ---- wiring -----------------------------------------------------------------------------

ui.composer.addEventListener('submit', (e) => {
  e.preventDefault();
  const text = ui.input.value;
  if (state.abort || !text.trim()) return;
  ui.input.value = '';
  send(text);
});
ui.input.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    ui.composer.requestSubmit();
  }
});
ui.stop.addEventListener('click', stop);
document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape' && state.abort && !document.querySelector('dialog[open]')) stop();
});
$('new-chat').addEventListener('click', () => {
  if (location.hash) location.hash = '';
  else openFromHash();
  document.body.classList.remove('sidebar-open');
});
$('toggle-sidebar').addEventListener('click', () => document.body.classList.toggle('sidebar-open'));
// on a narrow screen the list lies over the chat: choosing from it, or touching the chat, closes it
ui.conversations.addEventListener('click', () => document.body.classList.remove('sidebar-open'));
document.querySelector('main').addEventListener('click', (e) => {
  if (!e.target.closest('#toggle-sidebar')) document.body.classList.remove('sidebar-open');
});
window.addEventListener('hashchange', openFromHash);
setupSettingsDialog(ui.settings, $('open-settings'), {
  get: () => state.apiKey,
  set: (key) => { state.apiKey = key; store.storeApiKey(key); },
});
$('export').addEventListener('click', exportAll);
$('import').addEventListener('click', () => $('import-file').click());
$('import-file').addEventListener('change', (e) => {
  const file = e.target.files[0];
  e.target.value = '';   // the same file can be chosen again
  if (file) importFile(file);
});

openFromHash();
loadServerInfo();
