// Pieces of the query pages (Mango and Search): a JSON field validated as
// typed, checks of form values, paging by bookmark, inline error areas and
// a table/JSON toggle.

import { ApiError, api, describeError } from './api.js';
import { clear, fmtNumber, h, uid } from './dom.js';
import { parseErrorText } from './json-editor.js';
import { handlePageError } from './shell.js';

/**
 * A JSON text area validated as it is typed, like the document editor:
 * `check(value)` answers an error sentence or nothing. `read()` answers
 * `{value}` or `{error}` (and shows the error); empty text is `{value:
 * undefined}` when `optional`.
 */
export function jsonField({ label, value = '', rows = 4, hint, optional = false, check, id = uid('json-field') }) {
  const msgId = uid('json-field-msg');
  const hintId = hint ? uid('json-field-hint') : null;
  const textarea = h('textarea', {
    id, class: rows <= 3 ? 'code code-short' : 'code', rows, spellcheck: 'false', autocomplete: 'off', autocapitalize: 'none', wrap: 'off',
    'aria-describedby': [hintId, msgId].filter(Boolean).join(' '),
  });
  textarea.value = value;
  const message = h('div', { id: msgId, class: 'json-msg', 'aria-live': 'polite' });
  const el = h('div', { class: 'field' },
    h('label', { for: id, text: label }),
    hint ? h('p', { id: hintId, class: 'hint', text: hint }) : null,
    textarea, message);

  function validate() {
    const text = textarea.value.trim();
    if (!text) return optional ? { value: undefined } : { error: 'Required.' };
    let parsed;
    try {
      parsed = JSON.parse(text);
    } catch (err) {
      return { error: `Invalid JSON: ${parseErrorText(err, text)}` };
    }
    const problem = check ? check(parsed) : null;
    return problem ? { error: problem } : { value: parsed };
  }
  function show() {
    const result = validate();
    clear(message);
    if (result.error) {
      message.className = 'json-msg json-msg-error';
      message.append(h('span', { class: 'icon', 'aria-hidden': 'true', text: '✕' }), ' ', result.error);
      textarea.setAttribute('aria-invalid', 'true');
    } else {
      message.className = 'json-msg json-msg-ok';
      if (textarea.value.trim()) message.append(h('span', { class: 'icon', 'aria-hidden': 'true', text: '✓' }), ' Valid JSON');
      textarea.removeAttribute('aria-invalid');
    }
    return result;
  }
  let timer = null;
  textarea.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(show, 150);
  });
  show();
  return {
    el,
    textarea,
    read: () => {
      clearTimeout(timer);
      return show();
    },
    set: (text) => {
      textarea.value = text;
      show();
    },
  };
}

/** Checks for jsonField: the kinds of JSON a query option must be. */
export const mustBe = {
  object: (v) => (v && typeof v === 'object' && !Array.isArray(v) ? null : 'Must be a JSON object ({ … }).'),
  array: (v) => (Array.isArray(v) ? null : 'Must be a JSON array ([ … ]).'),
};

/**
 * Paging by bookmark: `bookmarks[i]` is the bookmark that gives page i + 1
 * (none for the first). Next pushes the answer's bookmark, Previous goes
 * back through the ones seen. `go(bookmark)` runs the query again.
 */
export function bookmarkPaging(label, go) {
  const state = { bookmarks: [undefined] };
  const nav = h('nav', { class: 'pager', 'aria-label': label });
  return {
    nav,
    /** Forgets the pages seen (a new query). */
    reset() {
      state.bookmarks = [undefined];
    },
    current: () => state.bookmarks[state.bookmarks.length - 1],
    /** Redraws the buttons for page `bookmarks.length`, with `next` the answer's bookmark when there may be more. */
    render(next, shown) {
      const pageNo = state.bookmarks.length;
      const prev = h('button', { type: 'button', class: 'btn', dataset: { page: 'prev' }, text: '← Previous', disabled: pageNo === 1 });
      const more = h('button', { type: 'button', class: 'btn', dataset: { page: 'next' }, text: 'Next →', disabled: !next });
      prev.addEventListener('click', () => {
        state.bookmarks.pop();
        go(state.bookmarks[state.bookmarks.length - 1], 'prev');
      });
      more.addEventListener('click', () => {
        state.bookmarks.push(next);
        go(next, 'next');
      });
      clear(nav).append(prev,
        h('span', { class: 'pager-info', text: `Page ${pageNo}${shown !== undefined ? ` · ${fmtNumber(shown)} shown` : ''}` }),
        more);
    },
    /** After a page failed to load: stay on the page before. */
    undo(direction, bookmark) {
      if (direction === 'next') state.bookmarks.pop();
      if (direction === 'prev') state.bookmarks.push(bookmark);
    },
  };
}

/**
 * Whether a refusal means the session ended (a 401 with nobody logged in
 * any more): then the console's handler offers to log in again. A 401 to a
 * logged-in user is a refusal like any other (Recliner answers 401 to a
 * member writing an index), shown where it happened.
 */
export async function sessionEnded(err) {
  if (!(err instanceof ApiError) || err.status !== 401) return false;
  try {
    const data = await api('GET', '/_session');
    if (data.userCtx && data.userCtx.name) return false;
  } catch {
    // No answer: treat it as ended.
  }
  handlePageError(err);
  return true;
}

/** An inline error area; `show(err)` puts CouchDB's reason in it. */
export function errorArea() {
  const el = h('div', { class: 'form-error', role: 'alert' });
  return {
    el,
    clear: () => clear(el),
    async show(err) {
      clear(el);
      if (await sessionEnded(err)) return;
      el.append(h('p', { text: describeError(err) }));
    },
  };
}

/** A value in a table cell: strings as they are, anything else as JSON (shortened). */
export function cellText(value) {
  if (value === undefined) return '';
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text.length > 120 ? `${text.slice(0, 119)}…` : text;
}

/** A comma-separated list typed in a field, trimmed, empty parts dropped. */
export function splitList(text) {
  return text.split(',').map((s) => s.trim()).filter(Boolean);
}

/** Two buttons choosing how results are shown (aria-pressed); `onChange(view)`. */
export function viewToggle(label, views, initial, onChange) {
  const buttons = views.map(([key, text]) => h('button', {
    type: 'button', class: 'btn btn-small', 'aria-pressed': String(key === initial), dataset: { view: key }, text,
  }));
  for (const b of buttons) {
    b.addEventListener('click', () => {
      for (const o of buttons) o.setAttribute('aria-pressed', String(o === b));
      onChange(b.dataset.view);
    });
  }
  return h('div', { class: 'view-toggle', role: 'group', 'aria-label': label }, buttons);
}

// ------------------------------------------------------------ the page
