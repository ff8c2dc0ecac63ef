// #/db/NAME/views: the database's design documents, their views and other
// functions. Below it: views/run/DDOC/VIEW (a view run with options, see
// views-run.js), views/edit/DDOC/VIEW and views/new (the editor, see
// views-edit.js).

import { clear, h, uid } from '../lib/dom.js';
import { link } from '../lib/paths.js';
import { main, startPage } from '../lib/shell.js';
import { databaseHeader } from '../lib/widgets.js';
import {
  ddocName, ddocPath, isJavaScript, loadDesignDocs, viewLink, viewNames,
} from './views-common.js';
import { isDatabaseAdmin } from '../lib/rights.js';
import { renderViewEditor } from './views-edit.js';
import { renderViewRun } from './views-run.js';

/** The Views pages by the first segment after `views`. */
export async function renderViews(db, rest, params) {
  const [action, ddoc, view] = rest;
  if (action === 'run' && ddoc && view) return renderViewRun(db, ddoc, view, params);
  if (action === 'edit' && ddoc && view) return renderViewEditor(db, { ddoc, view });
  if (action === 'new') return renderViewEditor(db, { ddoc: params.get('ddoc') || '' });
  return renderDesignDocs(db);
}

/** The functions of a design document other than views, by kind. */
const FUNCTION_KINDS = [
  ['shows', 'Show functions'],
  ['lists', 'List functions'],
  ['updates', 'Update functions'],
  ['filters', 'Filter functions'],
];

async function renderDesignDocs(db) {
  const alive = startPage(`Views · ${db}`, 'dbs');
  const [docs, admin] = await Promise.all([loadDesignDocs(db), isDatabaseAdmin(db)]);
  if (!alive()) return;
  const root = clear(main());
  root.append(...databaseHeader(db, 'views'));
  root.append(h('div', { class: 'page-head' },
    h('div', {}, h('h1', { text: 'Views' }),
      h('p', { class: 'muted', text: `Design documents of ${db}: their views, run with options, and their other functions.` })),
    admin ? h('div', { class: 'page-actions' },
      h('a', { class: 'btn btn-primary', href: viewLink.create(db), text: 'New view' })) : null));
  if (!admin) {
    root.append(h('p', { class: 'muted small views-readonly', text: 'Only admins of this database may change its design documents: you may run its views.' }));
  }
  if (!docs.length) {
    root.append(h('div', { class: 'card empty' }, h('p', { text: 'This database has no design documents yet.' })));
    return;
  }
  for (const doc of docs) root.append(designDocCard(db, doc, admin));
}

/** One design document: its views (run, edit) and its other functions by name. */
function designDocCard(db, doc, admin) {
  const name = ddocName(doc);
  const headingId = uid('ddoc');
  const editable = admin && isJavaScript(doc);
  const views = viewNames(doc);
  const section = h('section', { class: 'card ddoc-card', 'aria-labelledby': headingId, dataset: { ddoc: doc._id } },
    h('div', { class: 'section-head' },
      h('h2', { id: headingId, class: 'mono break' }, doc._id,
        isJavaScript(doc) ? null : h('span', { class: 'tag', text: `language: ${doc.language}` })),
      h('div', { class: 'page-actions' },
        editable ? h('a', { class: 'btn btn-small', href: viewLink.create(db, name), text: 'New view here', 'aria-label': `New view in ${doc._id}` }) : null,
        h('a', { class: 'btn btn-small btn-ghost', href: link.doc(db, doc._id), text: 'Document', 'aria-label': `Open the document ${doc._id}` }))));

  if (views.length) {
    const tbody = h('tbody');
    for (const view of views) {
      const def = doc.views[view];
      tbody.append(h('tr', { dataset: { view } },
        h('th', { scope: 'row' }, h('a', { class: 'mono break', href: viewLink.run(db, name, view), text: view })),
        h('td', { class: 'mono' }, def.reduce
          ? (typeof def.reduce === 'string' && def.reduce.startsWith('_') ? def.reduce : 'custom')
          : h('span', { class: 'muted', text: 'none' })),
        h('td', { class: 'actions' },
          h('a', { class: 'btn btn-small', href: viewLink.run(db, name, view), text: 'Run', 'aria-label': `Run ${view}` }),
          editable ? h('a', { class: 'btn btn-small btn-ghost', href: viewLink.edit(db, name, view), text: 'Edit', 'aria-label': `Edit ${view}` }) : null)));
    }
    section.append(h('div', { class: 'table-scroll' }, h('table', { class: 'table views-table' },
      h('caption', { class: 'sr-only', text: `Views of ${doc._id}` }),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col', text: 'View' }),
        h('th', { scope: 'col', text: 'Reduce' }),
        h('th', { scope: 'col', text: 'Actions' }))),
      tbody)));
  } else {
    section.append(h('p', { class: 'muted', text: 'No views.' }));
  }

  const functions = h('dl', { class: 'ddoc-functions' });
  for (const [kind, label] of FUNCTION_KINDS) {
    const fns = doc[kind] && typeof doc[kind] === 'object' ? Object.keys(doc[kind]).sort() : [];
    functions.append(h('div', { dataset: { kind } },
      h('dt', { text: label }),
      h('dd', {}, fns.length
        ? h('ul', {}, fns.map((fn) => h('li', { dataset: { name: fn } },
          h('span', { class: 'mono', text: fn }),
          kind === 'lists' && views.length ? listLinks(db, name, fn, views) : null)))
        : h('span', { class: 'muted', text: 'none' }))));
  }
  functions.append(h('div', { dataset: { kind: 'validate_doc_update' } },
    h('dt', { text: 'Validation' }),
    h('dd', {}, doc.validate_doc_update
      ? h('span', { class: 'mono', text: 'validate_doc_update' })
      : h('span', { class: 'muted', text: 'none' }))));
  section.append(h('h3', { class: 'ddoc-functions-title', text: 'Other functions' }), functions);
  return section;
}

/** Links running a list function over each view of its design document. */
function listLinks(db, ddoc, list, views) {
  return h('span', { class: 'list-runs small' }, ' run over ',
    views.map((view, i) => [i ? ', ' : '', h('a', {
      href: `${ddocPath(db, ddoc)}/_list/${encodeURIComponent(list)}/${encodeURIComponent(view)}`,
      class: 'mono',
      'aria-label': `Run list ${list} over view ${view}`,
      text: view,
    })]));
}
