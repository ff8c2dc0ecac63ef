// #/db/NAME: a database's documents, paged, with their conflicts.

import { api } from '../lib/api.js';
import { clear, fmtBytes, fmtNumber, h, shortSeq, uid } from '../lib/dom.js';
import { dbPath, link } from '../lib/paths.js';
import { main, navigate, startPage } from '../lib/shell.js';
import { clampPerPage, databaseHeader, pager, stat } from '../lib/widgets.js';
import { deleteDatabase } from './databases.js';

// --------------------------------------------------------------- database

export async function renderDatabase(db, params) {
  const alive = startPage(db, 'dbs');
  const perPage = clampPerPage(params.get('per'));
  const pageNo = Math.max(1, Number.parseInt(params.get('page') || '1', 10) || 1);
  const prefix = params.get('prefix') || '';
  const q = { limit: perPage + 1, skip: (pageNo - 1) * perPage, include_docs: 'true', conflicts: 'true' };
  if (prefix) {
    q.startkey = JSON.stringify(prefix);
    q.endkey = JSON.stringify(`${prefix}\ufff0`);
  }
  const [info, docs] = await Promise.all([
    api('GET', dbPath(db)),
    api('GET', `${dbPath(db)}/_all_docs`, { params: q }),
  ]);
  if (!alive()) return;
  const rows = docs.rows.slice(0, perPage);
  const hasNext = docs.rows.length > perPage;

  const root = clear(main());
  root.append(...databaseHeader(db, ''));
  root.append(h('div', { class: 'page-head' },
    h('div', {}, h('h1', { class: 'break', text: db }),
      h('p', { class: 'muted', text: 'Database' })),
    h('div', { class: 'page-actions' },
      h('a', { class: 'btn btn-primary', href: link.newDoc(db), text: 'New document' }),
      h('button', { type: 'button', class: 'btn btn-danger-ghost', text: 'Delete database', onclick: () => deleteDatabase(db, () => navigate(link.dbs())) }))));

  root.append(h('dl', { class: 'stats' },
    stat('Documents', fmtNumber(info.doc_count)),
    stat('Deleted documents', fmtNumber(info.doc_del_count)),
    stat('Data size', fmtBytes(info.sizes && info.sizes.external)),
    stat('File size', fmtBytes(info.sizes && info.sizes.file)),
    stat('Update sequence', shortSeq(info.update_seq))));

  const searchId = uid('search-doc');
  const searchForm = h('form', { class: 'inline-form', role: 'search', 'aria-label': 'Find documents' },
    h('div', { class: 'field' },
      h('label', { for: searchId, text: 'Document ID starts with' }),
      h('input', { id: searchId, name: 'prefix', type: 'search', value: prefix, autocomplete: 'off', spellcheck: 'false' })),
    h('button', { type: 'submit', class: 'btn', text: 'Search' }),
    prefix ? h('a', { class: 'btn btn-ghost', href: link.db(db, { per: perPage === 20 ? '' : perPage }), text: 'Clear' }) : null);
  searchForm.addEventListener('submit', (event) => {
    event.preventDefault();
    navigate(link.db(db, { prefix: searchForm.elements.prefix.value, per: perPage === 20 ? '' : perPage }));
  });
  root.append(h('div', { class: 'toolbar toolbar-single card' }, searchForm));

  if (!rows.length) {
    root.append(h('div', { class: 'card empty' }, h('p', {
      text: prefix ? `No document ID starts with “${prefix}”.` : pageNo > 1 ? 'No more documents.' : 'This database has no documents yet.',
    })));
  } else {
    const tbody = h('tbody');
    for (const row of rows) {
      const doc = row.doc || {};
      const conflicts = doc._conflicts ? doc._conflicts.length : 0;
      const atts = doc._attachments ? Object.keys(doc._attachments).length : 0;
      const fields = Object.keys(doc).filter((k) => !k.startsWith('_')).length;
      tbody.append(h('tr', { dataset: { id: row.id } },
        h('th', { scope: 'row' }, h('a', { href: link.doc(db, row.id), class: 'mono break', text: row.id })),
        h('td', { class: 'mono muted', text: row.value && row.value.rev }),
        h('td', { class: 'num', text: fmtNumber(fields) }),
        h('td', { class: 'num', text: atts ? fmtNumber(atts) : '—' }),
        h('td', {}, conflicts
          ? h('span', { class: 'badge badge-warn', text: `${conflicts} conflict${conflicts > 1 ? 's' : ''}` })
          : h('span', { class: 'muted', text: 'None' }))));
    }
    root.append(h('div', { class: 'card table-card' }, h('div', { class: 'table-scroll' },
      h('table', { class: 'table' },
        h('caption', { class: 'sr-only', text: `Documents of ${db}` }),
        h('thead', {}, h('tr', {},
          h('th', { scope: 'col', text: 'ID' }),
          h('th', { scope: 'col', text: 'Revision' }),
          h('th', { scope: 'col', class: 'num', text: 'Fields' }),
          h('th', { scope: 'col', class: 'num', text: 'Attachments' }),
          h('th', { scope: 'col', text: 'Conflicts' }))),
        tbody))));
  }
  root.append(pager({
    pageNo,
    hasNext,
    count: rows.length,
    perPage,
    label: 'Document pages',
    href: (p, per) => link.db(db, { page: p > 1 ? p : '', prefix, per: per === 20 ? '' : per }),
  }));
}
