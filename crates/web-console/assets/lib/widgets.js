// Pieces several pages share: a confirmation dialog, a pager, stats and
// breadcrumbs.

import { append, fmtNumber, h, uid } from './dom.js';
import { link } from './paths.js';
import { navigate } from './shell.js';

// -------------------------------------------------------------- dialogs

/**
 * A modal confirmation. With `typeToConfirm`, the confirm button is enabled
 * only once that exact text is typed. Resolves true when confirmed.
 */
export function confirmDialog({ title, body, confirmLabel, typeToConfirm, danger = true }) {
  return new Promise((resolve) => {
    const inputId = uid('confirm-input');
    const titleId = uid('confirm-title');
    const confirm = h('button', { type: 'submit', class: danger ? 'btn btn-danger' : 'btn btn-primary', text: confirmLabel });
    const cancel = h('button', { type: 'button', class: 'btn', text: 'Cancel' });
    const form = h('form', { method: 'dialog' });
    const dialog = h('dialog', { class: 'dialog', 'aria-labelledby': titleId }, form);
    append(form, [
      h('h2', { id: titleId, text: title }),
      (Array.isArray(body) ? body : [body]).map((p) => h('p', { text: p })),
    ]);
    let input = null;
    if (typeToConfirm !== undefined) {
      input = h('input', { id: inputId, type: 'text', autocomplete: 'off', spellcheck: 'false' });
      form.append(h('div', { class: 'field' },
        h('label', { for: inputId }, 'Type ', h('strong', { class: 'mono', text: typeToConfirm }), ' to confirm'),
        input));
      confirm.disabled = true;
      input.addEventListener('input', () => {
        confirm.disabled = input.value !== typeToConfirm;
      });
    }
    form.append(h('div', { class: 'dialog-actions' }, cancel, confirm));
    let done = false;
    const finish = (value) => {
      if (done) return;
      done = true;
      if (dialog.open) dialog.close();
      dialog.remove();
      resolve(value);
    };
    cancel.addEventListener('click', () => finish(false));
    dialog.addEventListener('cancel', () => finish(false));
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      if (input && input.value !== typeToConfirm) return;
      finish(true);
    });
    document.body.append(dialog);
    dialog.showModal();
    (input || cancel).focus();
  });
}

export function clampPerPage(value) {
  const n = Number.parseInt(value || '20', 10);
  return [10, 20, 50, 100].includes(n) ? n : 20;
}

/** Previous / next links and a page size choice. */
export function pager({ pageNo, hasNext, count, perPage, label, href }) {
  const perId = uid('per-page');
  const select = h('select', { id: perId },
    [10, 20, 50, 100].map((n) => h('option', { value: String(n), selected: n === perPage ? true : null, text: String(n) })));
  select.addEventListener('change', () => navigate(href(1, Number(select.value))));
  const first = (pageNo - 1) * perPage + 1;
  return h('nav', { class: 'pager', 'aria-label': label },
    pageNo > 1
      ? h('a', { class: 'btn', href: href(pageNo - 1, perPage), rel: 'prev', text: '← Previous' })
      : h('span', { class: 'btn', 'aria-disabled': 'true', text: '← Previous' }),
    h('span', { class: 'pager-info', text: count ? `Page ${pageNo} · rows ${fmtNumber(first)}–${fmtNumber(first + count - 1)}` : `Page ${pageNo}` }),
    hasNext
      ? h('a', { class: 'btn', href: href(pageNo + 1, perPage), rel: 'next', text: 'Next →' })
      : h('span', { class: 'btn', 'aria-disabled': 'true', text: 'Next →' }),
    h('span', { class: 'pager-size' }, h('label', { for: perId, text: 'Rows per page' }), select));
}

export function stat(label, value) {
  return h('div', { class: 'stat' }, h('dt', { text: label }), h('dd', { text: value }));
}

export function breadcrumbs(items) {
  return h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' },
    h('ol', {}, items.map(([text, href]) => h('li', {},
      href ? h('a', { href, text }) : h('span', { 'aria-current': 'page', text })))));
}

/** The pages of one database, in the order of its tabs. */
export const DATABASE_TABS = [
  ['', 'Documents'],
  ['mango', 'Mango'],
  ['views', 'Views'],
  ['search', 'Search'],
  ['conflicts', 'Conflicts'],
  ['permissions', 'Permissions'],
];

/**
 * The breadcrumbs and tabs at the top of every page of a database; `current`
 * is the tab's key ('' for the documents).
 */
export function databaseHeader(db, current) {
  const tabs = h('nav', { class: 'tabs', 'aria-label': `Pages of ${db}` },
    h('ul', {}, DATABASE_TABS.map(([key, label]) => h('li', {},
      h('a', {
        href: key ? link.dbPage(db, key) : link.db(db),
        'aria-current': key === current ? 'page' : null,
        dataset: { tab: key || 'documents' },
        text: label,
      })))));
  const here = DATABASE_TABS.find(([key]) => key === current);
  const crumbs = here && current
    ? breadcrumbs([['Databases', link.dbs()], [db, link.db(db)], [here[1], null]])
    : breadcrumbs([['Databases', link.dbs()], [db, null]]);
  return [crumbs, tabs];
}
