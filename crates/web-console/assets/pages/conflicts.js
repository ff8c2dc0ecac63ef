// #/db/NAME/conflicts: every document with conflicts in a database, resolved in bulk.

import { clear, h } from '../lib/dom.js';
import { main, startPage } from '../lib/shell.js';
import { databaseHeader } from '../lib/widgets.js';

export async function renderConflicts(db) {
  startPage(`Conflicts · ${db}`, 'dbs');
  const root = clear(main());
  root.append(...databaseHeader(db, 'conflicts'), h('h1', { text: 'Conflicts' }));
}
