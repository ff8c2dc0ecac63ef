// #/db/NAME/views: design documents and their views, run with options and edited.

import { clear, h } from '../lib/dom.js';
import { main, startPage } from '../lib/shell.js';
import { databaseHeader } from '../lib/widgets.js';

export async function renderViews(db) {
  startPage(`Views · ${db}`, 'dbs');
  const root = clear(main());
  root.append(...databaseHeader(db, 'views'), h('h1', { text: 'Views' }));
}
