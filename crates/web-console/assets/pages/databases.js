// #/dbs: every database with counts and sizes, paged; create and delete.

import { ApiError, api, describeError } from '../lib/api.js';
import { clear, fmtBytes, fmtNumber, h, shortSeq, uid } from '../lib/dom.js';
import { dbPath, link } from '../lib/paths.js';
import { announce, handlePageError, main, navigate, openDatabaseForm, route, session, startPage } from '../lib/shell.js';
import { clampPerPage, confirmDialog, pager } from '../lib/widgets.js';

// -------------------------------------------------------------- databases

export const DB_NAME = /^[a-z][a-z0-9_$()+/-]*$/;

export async function renderDatabases(params) {
  const alive = startPage('Databases', 'dbs');
  const perPage = clampPerPage(params.get('per'));
  const pageNo = Math.max(1, Number.parseInt(params.get('page') || '1', 10) || 1);
  const prefix = params.get('prefix') || '';

  const q = { limit: perPage + 1, skip: (pageNo - 1) * perPage };
  if (prefix) {
    q.startkey = JSON.stringify(prefix);
    q.endkey = JSON.stringify(`${prefix}\ufff0`);
  }
  let names;
  try {
    names = await api('GET', '/_all_dbs', { params: q });
  } catch (err) {
    // Only server admins may list every database: others open theirs by name.
    if (err instanceof ApiError && (err.status === 401 || err.status === 403) && session.name) {
      if (!alive()) return;
      clear(main()).append(
        h('div', { class: 'page-head' }, h('div', {}, h('h1', { text: 'Databases' }),
          h('p', { class: 'muted', text: `Only server admins may list every database (${err.message}). Open one you may use by its name.` }))),
        openDatabaseForm());
      return;
    }
    throw err;
  }
  if (!alive()) return;
  const hasNext = names.length > perPage;
  const shown = names.slice(0, perPage);
  let infos = [];
  if (shown.length) {
    infos = await api('POST', '/_dbs_info', { json: { keys: shown } });
    if (!alive()) return;
  }

  const root = clear(main());
  root.append(h('div', { class: 'page-head' },
    h('div', {}, h('h1', { text: 'Databases' }),
      h('p', { class: 'muted', text: prefix ? `Names starting with “${prefix}”` : 'Every database on this server.' }))));

  // Create and search.
  const createId = uid('create-db');
  const createError = h('div', { class: 'form-error', role: 'alert' });
  const createForm = h('form', { class: 'inline-form', 'aria-label': 'Create a database' },
    h('div', { class: 'field' },
      h('label', { for: createId, text: 'New database name' }),
      h('input', { id: createId, name: 'db', type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'e.g. inventory', 'aria-describedby': `${createId}-hint` }),
      h('p', { id: `${createId}-hint`, class: 'hint', text: 'Lowercase letters, digits and _ $ ( ) + - /; starts with a letter.' })),
    h('button', { type: 'submit', class: 'btn btn-primary', text: 'Create database' }),
    createError);
  createForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    clear(createError);
    const name = createForm.elements.db.value.trim();
    if (!DB_NAME.test(name)) {
      createError.append(h('p', { text: name ? `“${name}” is not a valid database name.` : 'Enter a name for the database.' }));
      createForm.elements.db.focus();
      return;
    }
    try {
      await api('PUT', dbPath(name));
      announce(`Database ${name} created.`);
      navigate(link.db(name));
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) return handlePageError(err);
      createError.append(h('p', { text: describeError(err) }));
    }
  });

  const searchId = uid('search-db');
  const searchForm = h('form', { class: 'inline-form', role: 'search', 'aria-label': 'Find databases' },
    h('div', { class: 'field' },
      h('label', { for: searchId, text: 'Find by name prefix' }),
      h('input', { id: searchId, name: 'prefix', type: 'search', value: prefix, autocomplete: 'off', spellcheck: 'false' })),
    h('button', { type: 'submit', class: 'btn', text: 'Search' }),
    prefix ? h('a', { class: 'btn btn-ghost', href: link.dbs({ per: perPage === 20 ? '' : perPage }), text: 'Clear' }) : null);
  searchForm.addEventListener('submit', (event) => {
    event.preventDefault();
    navigate(link.dbs({ prefix: searchForm.elements.prefix.value.trim(), per: perPage === 20 ? '' : perPage }));
  });
  root.append(h('div', { class: 'toolbar card' }, createForm, searchForm));

  // The table.
  const byName = new Map(infos.map((row) => [row.key, row]));
  const table = h('table', { class: 'table' },
    h('caption', { class: 'sr-only', text: 'Databases with document counts and sizes' }),
    h('thead', {}, h('tr', {},
      h('th', { scope: 'col', text: 'Name' }),
      h('th', { scope: 'col', class: 'num', text: 'Documents' }),
      h('th', { scope: 'col', class: 'num', text: 'Deleted' }),
      h('th', { scope: 'col', class: 'num', text: 'Data size' }),
      h('th', { scope: 'col', class: 'num', text: 'File size' }),
      h('th', { scope: 'col', class: 'num', text: 'Update seq' }),
      h('th', { scope: 'col', class: 'actions', text: 'Actions' }))));
  const tbody = h('tbody');
  for (const name of shown) {
    const row = byName.get(name);
    const info = row && row.info;
    const system = name.startsWith('_');
    tbody.append(h('tr', { dataset: { db: name } },
      h('th', { scope: 'row' }, h('a', { href: link.db(name), class: 'db-link', text: name }),
        system ? h('span', { class: 'tag', text: 'system' }) : null),
      h('td', { class: 'num', text: info ? fmtNumber(info.doc_count) : (row && row.error) || '—' }),
      h('td', { class: 'num', text: info ? fmtNumber(info.doc_del_count) : '—' }),
      h('td', { class: 'num', text: info && info.sizes ? fmtBytes(info.sizes.external) : '—' }),
      h('td', { class: 'num', text: info && info.sizes ? fmtBytes(info.sizes.file) : '—' }),
      h('td', { class: 'num', text: info ? shortSeq(info.update_seq) : '—' }),
      h('td', { class: 'actions' }, h('button', {
        type: 'button',
        class: 'btn btn-danger-ghost btn-small',
        'aria-label': `Delete database ${name}`,
        text: 'Delete',
        onclick: () => deleteDatabase(name, () => route()),
      }))));
  }
  table.append(tbody);
  if (!shown.length) {
    root.append(h('div', { class: 'card empty' },
      h('p', { text: prefix ? `No database name starts with “${prefix}”.` : pageNo > 1 ? 'No more databases.' : 'There are no databases yet. Create one above.' })));
  } else {
    root.append(h('div', { class: 'card table-card' }, h('div', { class: 'table-scroll' }, table)));
  }
  root.append(pager({
    pageNo,
    hasNext,
    count: shown.length,
    perPage,
    label: 'Database pages',
    href: (p, per) => link.dbs({ page: p > 1 ? p : '', prefix, per: per === 20 ? '' : per }),
  }));
}

export async function deleteDatabase(name, then) {
  const ok = await confirmDialog({
    title: `Delete database ${name}?`,
    body: ['This deletes the database and every document and attachment in it. It cannot be undone.'],
    confirmLabel: 'Delete database',
    typeToConfirm: name,
  });
  if (!ok) return;
  try {
    await api('DELETE', dbPath(name));
    announce(`Database ${name} deleted.`);
    then();
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return handlePageError(err);
    announce(describeError(err), 'error');
  }
}
