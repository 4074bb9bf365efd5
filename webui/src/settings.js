// The settings dialog: a system prompt and the sampling fields of the chat request. A field
// left empty is not sent, so the server's default (from /props, shown as the placeholder)
// applies.
import { loadSettings, storeSettings } from './store.js';

// key: the request field; serverKey: its name in /props default_generation_settings.params;
// unset: the server's value that means "none", and the word shown for it
const SAMPLING_FIELDS = [
  { key: 'temperature', label: 'Temperature', min: 0, max: 10, step: 0.05 },
  { key: 'top_k', label: 'Top-k', min: 0, step: 1 },
  { key: 'top_p', label: 'Top-p', min: 0, max: 1, step: 0.01 },
  { key: 'min_p', label: 'Min-p', min: 0, max: 1, step: 0.01 },
  { key: 'repeat_penalty', label: 'Repeat penalty', min: 0, step: 0.05 },
  { key: 'presence_penalty', label: 'Presence penalty', min: -2, max: 2, step: 0.1 },
  { key: 'frequency_penalty', label: 'Frequency penalty', min: -2, max: 2, step: 0.1 },
  { key: 'max_tokens', label: 'Max tokens', min: 1, step: 1, serverKey: 'n_predict', unset: [-1, 'no limit'] },
  { key: 'seed', label: 'Seed', min: 0, step: 1, unset: [4294967295, 'random'] },
];

let settings = loadSettings();

export function currentSettings() {
  return settings;
}

// The request fields the settings ask for.
export function samplingParams() {
  const params = {};
  for (const f of SAMPLING_FIELDS) {
    const v = settings[f.key];
    if (v !== undefined && v !== '' && Number.isFinite(Number(v))) params[f.key] = Number(v);
  }
  return params;
}

function fieldInputs(form) {
  return SAMPLING_FIELDS.map((f) => [f, form.elements[f.key]]);
}

// apiKey: { get(), set(key) }, the key the page sends (main.js keeps it)
export function setupSettingsDialog(dialog, openButton, apiKey) {
  const form = dialog.querySelector('form');
  const fieldset = dialog.querySelector('#sampling-fields');
  for (const f of SAMPLING_FIELDS) {
    const label = document.createElement('label');
    label.textContent = f.label;
    const input = document.createElement('input');
    Object.assign(input, { type: 'number', name: f.key, step: f.step });
    if (f.min !== undefined) input.min = f.min;
    if (f.max !== undefined) input.max = f.max;
    label.appendChild(input);
    fieldset.appendChild(label);
  }

  openButton.addEventListener('click', () => {
    form.elements.system.value = settings.system || '';
    form.elements['api-key'].value = apiKey.get();
    for (const [f, input] of fieldInputs(form)) input.value = settings[f.key] ?? '';
    dialog.showModal();
  });
  dialog.querySelector('#reset-settings').addEventListener('click', () => {
    form.elements.system.value = '';
    for (const [, input] of fieldInputs(form)) input.value = '';
  });
  dialog.addEventListener('close', () => {
    if (dialog.returnValue !== 'save') return;
    const next = { system: form.elements.system.value };
    for (const [f, input] of fieldInputs(form)) {
      if (input.value !== '') next[f.key] = input.value;
    }
    settings = next;
    storeSettings(settings);
    apiKey.set(form.elements['api-key'].value.trim());
  });
}

// Shows the server's defaults as placeholders.
export function showServerDefaults(dialog, props) {
  const defaults = props?.default_generation_settings?.params || {};
  const form = dialog.querySelector('form');
  for (const [f, input] of fieldInputs(form)) {
    const v = defaults[f.serverKey || f.key];
    if (typeof v !== 'number') continue;
    input.placeholder = f.unset && v === f.unset[0] ? f.unset[1] : String(Math.round(v * 1000) / 1000);
  }
}
