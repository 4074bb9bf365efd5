// The page's DOM for conversations and messages. Nothing here talks to the server or the
// storage: user actions go to the callbacks main.js passes in.
import { copyText, renderMarkdown, splitThinking } from './markdown.js';

function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}

function button(label, className, onClick) {
  const b = el('button', className, label);
  b.type = 'button';
  b.addEventListener('click', onClick);
  return b;
}

export function renderConversationList(list, conversations, currentId, { onOpen, onDelete }) {
  list.replaceChildren();
  for (const c of conversations) {
    const item = el('li', c.id === currentId ? 'current' : '');
    const open = button(c.title, 'conversation-title', () => onOpen(c.id));
    open.title = c.title;
    const del = button('\u00d7', 'delete-conversation', () => onDelete(c.id));
    del.setAttribute('aria-label', `Delete "${c.title}"`);
    item.append(open, del);
    list.appendChild(item);
  }
}

// "12 tokens, 34.5 t/s" for the generated text, and the same for the prompt when it was
// processed (a cached prompt has no tokens to report).
export function formatTimings(t) {
  if (!t) return '';
  const parts = [];
  const tokens = (n) => `${n} token${n === 1 ? '' : 's'}`;
  if (t.predicted_n > 0) parts.push(`${tokens(t.predicted_n)}, ${t.predicted_per_second.toFixed(1)} t/s`);
  if (t.prompt_n > 0) parts.push(`prompt ${tokens(t.prompt_n)}, ${t.prompt_per_second.toFixed(1)} t/s`);
  return parts.join(' · ');
}

const FINISH_NOTES = {
  stopped: 'stopped',
  length: 'stopped at the token limit',
};

// One message on the page. update() may be called for every streamed piece: rendering waits
// for the next animation frame, so a fast stream costs one Markdown pass per frame.
export class MessageView {
  constructor(msg, index, actions) {
    this.msg = msg;
    this.index = index;
    this.actions = actions;
    this.el = el('article', `message ${msg.role}`);
    this.el.dataset.index = index;
    this.pending = false;
    this.streaming = false;
    this.build();
  }

  build() {
    const { msg } = this;
    this.el.replaceChildren();
    this.toolbar = el('div', 'message-actions');
    if (msg.role === 'user') {
      this.body = el('div', 'content plain');
      this.toolbar.append(button('Edit', 'edit', () => this.startEdit()));
      this.el.append(this.body, this.toolbar);
    } else {
      this.reasoning = el('details', 'reasoning');
      this.reasoningSummary = el('summary', '', 'Reasoning');
      this.reasoningText = el('div', 'reasoning-text');
      this.reasoning.append(this.reasoningSummary, this.reasoningText);
      // once the reader opens or closes it, the stream no longer does
      this.reasoningSummary.addEventListener('click', () => { this.reasoningTouched = true; });
      this.body = el('div', 'content markdown');
      this.meta = el('div', 'meta');
      this.toolbar.append(
        button('Copy', 'copy', (e) => copyText(this.msg.content, e.currentTarget)),
        button('Regenerate', 'regenerate', () => this.actions.onRegenerate(this.index)),
      );
      this.el.append(this.reasoning, this.body, this.meta, this.toolbar);
    }
    this.render();
  }

  update(streaming) {
    this.streaming = streaming;
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.render();
    });
  }

  render() {
    const { msg } = this;
    this.el.classList.toggle('streaming', this.streaming);
    if (msg.role === 'user') {
      this.body.textContent = msg.content;
      return;
    }
    const split = splitThinking(msg.content || '');
    const reasoning = (msg.reasoning || '') + split.reasoning;
    this.reasoning.hidden = !reasoning;
    if (reasoning) {
      this.reasoningText.textContent = reasoning;
      const thinking = this.streaming && !split.content;
      this.reasoningSummary.textContent = thinking ? 'Thinking\u2026' : 'Reasoning';
      // open while the model is thinking, folded away once the answer starts
      if (!this.reasoningTouched) this.reasoning.open = thinking;
    }
    renderMarkdown(this.body, split.content);
    const notes = [];
    if (msg.error) notes.push(`error: ${msg.error}`);
    if (FINISH_NOTES[msg.finish]) notes.push(FINISH_NOTES[msg.finish]);
    // saved before its stream ended: the page was closed while it came
    if (!msg.finish && !msg.error && !this.streaming) notes.push('interrupted');
    const stats = formatTimings(msg.timings);
    if (stats) notes.push(stats);
    this.meta.textContent = this.streaming ? 'generating\u2026' : notes.join(' · ');
    this.meta.classList.toggle('error', !!msg.error);
  }

  startEdit() {
    const editor = el('textarea', 'edit-box');
    editor.value = this.msg.content;
    editor.rows = Math.min(12, Math.max(3, this.msg.content.split('\n').length + 1));
    const save = button('Save & send', 'primary save-edit', () => this.actions.onEdit(this.index, editor.value));
    const cancel = button('Cancel', 'cancel-edit', () => this.build());
    const bar = el('div', 'message-actions editing');
    bar.append(cancel, save);
    this.el.replaceChildren(editor, bar);
    editor.focus();
  }
}

// Draws a whole conversation.
export function renderConversation(container, conv, actions) {
  container.replaceChildren();
  if (!conv.messages.length) {
    container.appendChild(el('p', '', 'Send a message to start a conversation.')).id = 'empty-hint';
    return;
  }
  conv.messages.forEach((m, i) => container.appendChild(new MessageView(m, i, actions).el));
}
