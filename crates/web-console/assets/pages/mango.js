// #/db/NAME/mango: Mango queries with their explanation, indexes and bookmarks.

import { clear, h } from '../lib/dom.js';
import { main, startPage } from '../lib/shell.js';
import { databaseHeader } from '../lib/widgets.js';

export async function renderMango(db) {
  startPage(`Mango · ${db}`, 'dbs');
  const root = clear(main());
  root.append(...databaseHeader(db, 'mango'), h('h1', { text: 'Mango' }));
}
