// A JSON text area that validates as you type and points at the error.

import { ApiError, describeError } from './api.js';
import { clear, h, setText, uid } from './dom.js';
import { handlePageError } from './shell.js';

export function jsonEditor({ initial, saveLabel, onSave, expectId, extraButtons = [] }) {
  const areaId = uid('json');
  const msgId = uid('json-msg');
  const headingId = uid('json-heading');
  const textarea = h('textarea', {
    id: areaId, class: 'code', spellcheck: 'false', autocomplete: 'off', autocapitalize: 'none',
    rows: 18, 'aria-describedby': msgId, wrap: 'off',
  });
  textarea.value = initial;
  textarea.rows = Math.min(30, Math.max(10, initial.split('\n').length + 2));
  const message = h('div', { id: msgId, class: 'json-msg', 'aria-live': 'polite' });
  const save = h('button', { type: 'submit', class: 'btn btn-primary', text: saveLabel });
  const form = h('form', { class: 'editor' },
    h('div', { class: 'editor-head' },
      h('h2', { id: headingId }, h('label', { for: areaId, text: 'Document JSON' }))),
    textarea, message,
    h('div', { class: 'editor-actions' }, save, ...extraButtons));

  function check() {
    const text = textarea.value;
    let doc;
    try {
      doc = JSON.parse(text);
    } catch (err) {
      return { error: `Invalid JSON: ${parseErrorText(err, text)}` };
    }
    if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) {
      return { error: 'A document must be a JSON object ({ … }).' };
    }
    if (expectId !== undefined && doc._id !== undefined && doc._id !== expectId) {
      return { error: `The _id must stay “${expectId}” (create a new document to use another ID).` };
    }
    if (doc._id !== undefined && (typeof doc._id !== 'string' || doc._id === '')) {
      return { error: '_id must be a non-empty string.' };
    }
    return { doc };
  }

  function showCheck() {
    const result = check();
    clear(message);
    if (result.error) {
      message.className = 'json-msg json-msg-error';
      message.append(h('span', { class: 'icon', 'aria-hidden': 'true', text: '✕' }), ' ', result.error);
      textarea.setAttribute('aria-invalid', 'true');
      save.disabled = true;
    } else {
      message.className = 'json-msg json-msg-ok';
      message.append(h('span', { class: 'icon', 'aria-hidden': 'true', text: '✓' }), ' Valid JSON');
      textarea.removeAttribute('aria-invalid');
      save.disabled = false;
    }
    return result;
  }

  let timer = null;
  textarea.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(showCheck, 150);
  });
  textarea.addEventListener('keydown', (event) => {
    // Tab indents inside the editor; Escape then Tab leaves it (keyboard users).
    if (event.key === 'Tab' && !event.shiftKey && !textarea.dataset.escaped) {
      event.preventDefault();
      const { selectionStart: s, selectionEnd: e } = textarea;
      textarea.setRangeText('  ', s, e, 'end');
      textarea.dispatchEvent(new Event('input'));
    } else if (event.key === 'Escape') {
      textarea.dataset.escaped = '1';
    } else {
      delete textarea.dataset.escaped;
    }
  });
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearTimeout(timer);
    const result = showCheck();
    if (result.error) {
      textarea.focus();
      return;
    }
    save.disabled = true;
    try {
      await onSave(result.doc);
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) {
        handlePageError(err);
        return;
      }
      clear(message);
      message.className = 'json-msg json-msg-error';
      message.append(h('span', { class: 'icon', 'aria-hidden': 'true', text: '✕' }), ` Not saved. ${describeError(err)}`);
      message.setAttribute('role', 'alert');
    } finally {
      save.disabled = false;
    }
  });
  showCheck();
  return { el: form, textarea, headingId, setText: (text) => { textarea.value = text; showCheck(); } };
}

/** Where and why `text` is not JSON: "line 3, column 8: expected …". */
export function parseErrorText(err, text) {
  const found = locateJsonError(text);
  if (!found) return String(err.message || err).slice(0, 200);
  const before = text.slice(0, found.pos);
  const line = before.split('\n').length;
  const column = found.pos - before.lastIndexOf('\n');
  return `line ${line}, column ${column}: ${found.msg}`;
}

/** A small JSON scanner that finds the first error (JSON.parse does not say where in every browser). */
export function locateJsonError(text) {
  const LITERAL = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null/y;
  const ESCAPE = /\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})/y;
  let i = 0;
  const fail = (msg) => {
    const e = new Error(msg);
    e.pos = i;
    throw e;
  };
  const ws = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i])) i += 1;
  };
  const string = () => {
    i += 1;
    while (i < text.length) {
      const c = text[i];
      if (c === '"') {
        i += 1;
        return;
      }
      if (c === '\\') {
        ESCAPE.lastIndex = i;
        const m = ESCAPE.exec(text);
        if (!m) fail('invalid escape in a string');
        i += m[0].length;
      } else if (c < ' ') {
        fail(c === '\n' ? 'line break inside a string (missing closing quote?)' : 'control character inside a string');
      } else {
        i += 1;
      }
    }
    fail('unterminated string');
  };
  const value = () => {
    ws();
    const c = text[i];
    if (c === '{') {
      i += 1;
      ws();
      if (text[i] === '}') {
        i += 1;
        return;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail(text[i] === '}' ? 'trailing comma before “}”' : 'expected a property name in double quotes');
        string();
        ws();
        if (text[i] !== ':') fail('expected “:” after the property name');
        i += 1;
        value();
        ws();
        if (text[i] === ',') {
          i += 1;
        } else if (text[i] === '}') {
          i += 1;
          return;
        } else {
          fail('expected “,” or “}”');
        }
      }
    }
    if (c === '[') {
      i += 1;
      ws();
      if (text[i] === ']') {
        i += 1;
        return;
      }
      for (;;) {
        ws();
        if (text[i] === ']') fail('trailing comma before “]”');
        value();
        ws();
        if (text[i] === ',') {
          i += 1;
        } else if (text[i] === ']') {
          i += 1;
          return;
        } else {
          fail('expected “,” or “]”');
        }
      }
    }
    if (c === '"') {
      string();
      return;
    }
    if (c === undefined) fail('unexpected end of the text');
    LITERAL.lastIndex = i;
    const m = LITERAL.exec(text);
    if (!m) fail(c === "'" ? 'strings need double quotes' : `unexpected “${c}”`);
    i += m[0].length;
  };
  try {
    value();
    ws();
    if (i < text.length) fail('unexpected text after the end of the document');
    return null;
  } catch (e) {
    return { pos: e.pos, msg: e.message };
  }
}
