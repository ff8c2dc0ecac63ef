// #/db/NAME/permissions: a database's _security as a form, and its properties.

import { clear, h } from '../lib/dom.js';
import { main, startPage } from '../lib/shell.js';
import { databaseHeader } from '../lib/widgets.js';

export async function renderPermissions(db) {
  startPage(`Permissions · ${db}`, 'dbs');
  const root = clear(main());
  root.append(...databaseHeader(db, 'permissions'), h('h1', { text: 'Permissions' }));
}
