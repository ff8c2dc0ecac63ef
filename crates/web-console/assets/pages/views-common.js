// What the Views pages share: their links, the design documents of a
// database, and the side list of views.

import { api } from '../lib/api.js';
import { h } from '../lib/dom.js';
import { dbPath, query } from '../lib/paths.js';

/** The reduce functions CouchDB runs natively, offered in the editor. */
export const BUILTIN_REDUCES = ['_count', '_sum', '_stats', '_approx_count_distinct'];

/**
 * Hash links of the Views pages. Design documents are named without their
 * `_design/` prefix; every segment is encoded so any name round-trips.
 */
export const viewLink = {
  list: (db) => `#/db/${encodeURIComponent(db)}/views`,
  run: (db, ddoc, view, params) => `#/db/${encodeURIComponent(db)}/views/run/${encodeURIComponent(ddoc)}/${encodeURIComponent(view)}${query(params)}`,
  edit: (db, ddoc, view) => `#/db/${encodeURIComponent(db)}/views/edit/${encodeURIComponent(ddoc)}/${encodeURIComponent(view)}`,
  create: (db, ddoc) => `#/db/${encodeURIComponent(db)}/views/new${query({ ddoc })}`,
};

/** The request path of a design document (`name` without `_design/`). */
export function ddocPath(db, name) {
  return `${dbPath(db)}/_design/${encodeURIComponent(name)}`;
}

/** The request path of a view. */
export function viewPath(db, ddoc, view) {
  return `${ddocPath(db, ddoc)}/_view/${encodeURIComponent(view)}`;
}

/** The design documents of `db` with their bodies, sorted by id. */
export async function loadDesignDocs(db) {
  const res = await api('GET', `${dbPath(db)}/_all_docs`, {
    params: { startkey: '"_design/"', endkey: '"_design0"', include_docs: 'true' },
  });
  return res.rows.filter((row) => row.doc).map((row) => row.doc);
}

/** A design document's name without its `_design/` prefix. */
export function ddocName(doc) {
  return doc._id.slice('_design/'.length);
}

/** Its views that have a map function, sorted by name. */
export function viewNames(doc) {
  const views = doc.views && typeof doc.views === 'object' ? doc.views : {};
  return Object.keys(views).filter((name) => views[name] && views[name].map).sort();
}

/** Only JavaScript design documents are edited here (not Mango's `query` ones). */
export function isJavaScript(doc) {
  return !doc.language || doc.language === 'javascript';
}

/**
 * The side list of every design document and its views, the current one
 * marked: the way from one view to another without going back.
 */
export function viewsNav(db, docs, current) {
  const items = [];
  for (const doc of docs) {
    const name = ddocName(doc);
    const views = viewNames(doc);
    if (!views.length) continue;
    items.push(h('li', {},
      h('span', { class: 'views-nav-ddoc mono break', text: doc._id }),
      h('ul', {}, views.map((view) => h('li', {}, h('a', {
        href: viewLink.run(db, name, view),
        class: 'mono break',
        'aria-current': current && current.ddoc === name && current.view === view ? 'page' : null,
        text: view,
      }))))));
  }
  return h('nav', { class: 'card views-nav', 'aria-label': 'Views of this database' },
    h('h2', { class: 'views-nav-title', text: 'Views' }),
    items.length ? h('ul', {}, items) : h('p', { class: 'muted small', text: 'No views yet.' }),
    h('p', {}, h('a', { href: viewLink.list(db), text: 'All design documents' })));
}

/** A JSON value as one line of text (keys, values and ids of rows). */
export function jsonText(value) {
  return value === undefined ? '' : JSON.stringify(value);
}
