// Model output as HTML: Markdown by marked, then sanitised by DOMPurify (the text comes from a
// model and must not run script in the page), code blocks highlighted by highlight.js.
import { Marked } from 'marked';
import DOMPurify from 'dompurify';
import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import c from 'highlight.js/lib/languages/c';
import cpp from 'highlight.js/lib/languages/cpp';
import csharp from 'highlight.js/lib/languages/csharp';
import css from 'highlight.js/lib/languages/css';
import diff from 'highlight.js/lib/languages/diff';
import go from 'highlight.js/lib/languages/go';
import java from 'highlight.js/lib/languages/java';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import markdown from 'highlight.js/lib/languages/markdown';
import python from 'highlight.js/lib/languages/python';
import rust from 'highlight.js/lib/languages/rust';
import shell from 'highlight.js/lib/languages/shell';
import sql from 'highlight.js/lib/languages/sql';
import typescript from 'highlight.js/lib/languages/typescript';
import xml from 'highlight.js/lib/languages/xml';
import yaml from 'highlight.js/lib/languages/yaml';

// The languages models write most; each costs bundle size, and auto-detection picks among them.
const LANGUAGES = { bash, c, cpp, csharp, css, diff, go, java, javascript, json, markdown, python, rust, shell, sql, typescript, xml, yaml };
for (const [name, lang] of Object.entries(LANGUAGES)) hljs.registerLanguage(name, lang);

const marked = new Marked({ gfm: true, breaks: false });

// Links open in a new tab so following one never leaves the chat.
DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A' && node.getAttribute('href')) {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  }
});

// Renders Markdown text into element (replacing its content).
export function renderMarkdown(element, text) {
  element.innerHTML = DOMPurify.sanitize(marked.parse(text));
  for (const code of element.querySelectorAll('pre code')) {
    const m = /language-([\w+#-]+)/.exec(code.className);
    const lang = m && hljs.getLanguage(m[1]) ? m[1] : null;
    const out = lang ? hljs.highlight(code.textContent, { language: lang, ignoreIllegals: true })
                     : hljs.highlightAuto(code.textContent);
    code.innerHTML = out.value;   // highlight.js escapes the text it wraps in spans
    code.classList.add('hljs');
    addCopyButton(code.parentElement);
  }
}

function addCopyButton(pre) {
  const button = document.createElement('button');
  button.type = 'button';
  button.className = 'copy-code';
  button.textContent = 'Copy';
  button.addEventListener('click', () => copyText(pre.querySelector('code').textContent, button));
  pre.appendChild(button);
}

// The clipboard API exists only on secure origins (https, localhost); a server reached over plain
// http on the network gets the older copy command. The button says whether it worked.
export async function copyText(text, button) {
  let ok = false;
  try {
    await navigator.clipboard.writeText(text);
    ok = true;
  } catch {
    const area = document.createElement('textarea');
    area.value = text;
    area.style.position = 'fixed';
    area.style.opacity = '0';
    document.body.appendChild(area);
    area.select();
    try { ok = document.execCommand('copy'); } catch { /* refused */ }
    area.remove();
  }
  button.dataset.label ??= button.textContent;
  button.textContent = ok ? 'Copied' : 'Copy failed';
  setTimeout(() => { button.textContent = button.dataset.label; }, 1200);
}

// Some templates leave the model's thinking in the content as <think>...</think> instead of
// the server splitting it into reasoning_content: split it here the same way. An unclosed
// <think> (still streaming) is all reasoning so far.
export function splitThinking(content) {
  const m = /^\s*<think>([\s\S]*?)(<\/think>|$)/.exec(content);
  if (!m) return { reasoning: '', content };
  return { reasoning: m[1], content: content.slice(m[0].length) };
}
