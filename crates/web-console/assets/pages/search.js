// #/db/NAME/search: full-text search indexes queried with highlights and facets.

import { clear, h } from '../lib/dom.js';
import { main, startPage } from '../lib/shell.js';
import { databaseHeader } from '../lib/widgets.js';

export async function renderSearch(db) {
  startPage(`Search · ${db}`, 'dbs');
  const root = clear(main());
  root.append(...databaseHeader(db, 'search'), h('h1', { text: 'Search' }));
}
