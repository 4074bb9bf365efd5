// What the page keeps in the browser. Conversations go to IndexedDB (they can outgrow
// localStorage's few megabytes); settings and the API key are small and go to localStorage.
//
// A conversation: { id, title, updated (ms since epoch), messages: [message] }
// A message: { role: 'user' | 'assistant', content, reasoning?, timings?, finish?, error? }

const DB_NAME = 'kiln-webui';
const STORE = 'conversations';

let dbPromise = null;

function openDb() {
  if (!dbPromise) {
    dbPromise = new Promise((resolve, reject) => {
      const req = indexedDB.open(DB_NAME, 1);
      req.onupgradeneeded = () => req.result.createObjectStore(STORE, { keyPath: 'id' });
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
  }
  return dbPromise;
}

// Runs one request against the conversations store and resolves with its result once the
// transaction has committed (so a reload right after a save finds the data).
async function withStore(mode, makeRequest) {
  const db = await openDb();
  return new Promise((resolve, reject) => {
    const tx = db.transaction(STORE, mode);
    const req = makeRequest(tx.objectStore(STORE));
    tx.oncomplete = () => resolve(req.result);
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error);
  });
}

export async function listConversations() {
  const all = await withStore('readonly', (s) => s.getAll());
  return all.sort((a, b) => b.updated - a.updated);
}

export function getConversation(id) {
  return withStore('readonly', (s) => s.get(id));
}

export function saveConversation(conv) {
  conv.updated = Date.now();
  // structuredClone drops nothing we keep, and detaches the stored copy from the live object
  return withStore('readwrite', (s) => s.put(structuredClone(conv)));
}

export function deleteConversation(id) {
  return withStore('readwrite', (s) => s.delete(id));
}

// Conversations from an exported file (exportConversations' format): checked field by field,
// since the file may come from anywhere. Throws with the reason.
export function parseExport(text) {
  let data;
  try {
    data = JSON.parse(text);
  } catch {
    throw new Error('the file is not JSON');
  }
  const list = Array.isArray(data) ? data : data && data.conversations;
  if (!Array.isArray(list)) throw new Error('the file holds no list of conversations');
  return list.map((c, i) => {
    const ok = c && typeof c.id === 'string' && c.id && Array.isArray(c.messages)
      && c.messages.every((m) => m && (m.role === 'user' || m.role === 'assistant') && typeof m.content === 'string');
    if (!ok) throw new Error(`conversation ${i + 1} is not one this page wrote`);
    return { ...c, title: typeof c.title === 'string' ? c.title : 'Imported', updated: Number(c.updated) || Date.now() };
  });
}

export async function exportConversations() {
  return JSON.stringify({ format: 'kiln-webui-conversations', conversations: await listConversations() }, null, 1);
}

export async function importConversations(list) {
  // as imported: saveConversation would stamp them as changed now
  for (const c of list) await withStore('readwrite', (s) => s.put(c));
}

export function newConversation() {
  const id = (crypto.randomUUID && crypto.randomUUID()) || `${Date.now()}-${Math.random().toString(36).slice(2)}`;
  return { id, title: 'New chat', updated: Date.now(), messages: [] };
}

const SETTINGS_KEY = 'kiln-webui.settings';
const API_KEY_KEY = 'kiln-webui.api-key';

export function loadSettings() {
  try {
    return JSON.parse(localStorage.getItem(SETTINGS_KEY)) || {};
  } catch {
    return {};
  }
}

export function storeSettings(settings) {
  localStorage.setItem(SETTINGS_KEY, JSON.stringify(settings));
}

export function loadApiKey() {
  return localStorage.getItem(API_KEY_KEY) || '';
}

export function storeApiKey(key) {
  if (key) localStorage.setItem(API_KEY_KEY, key);
  else localStorage.removeItem(API_KEY_KEY);
}
