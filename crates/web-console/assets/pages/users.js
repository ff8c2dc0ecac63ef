// #/users: the _users database: users created, changed and deleted; a user's own password.

import { clear, h } from '../lib/dom.js';
import { main, startPage } from '../lib/shell.js';

export async function renderUsers() {
  startPage('Users', 'users');
  clear(main()).append(h('h1', { text: 'Users' }));
}
