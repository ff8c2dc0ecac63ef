// Who the logged-in user is for the server and a database, decided once for
// every page (the server decides in the end; pages only hide what it would
// refuse), and the page shown to a user a server-admin page is not for.

import { ApiError, api, describeError } from './api.js';
import { clear, h } from './dom.js';
import { dbPath } from './paths.js';
import { logout, main, session } from './shell.js';

/**
 * Whether the user is a server admin (`_admin`) or an admin of the
 * database whose security object is `security`, by name or by role.
 */
export function isAdminIn(security) {
  if (isServerAdmin()) return true;
  const admins = (security && security.admins) || {};
  const names = Array.isArray(admins.names) ? admins.names : [];
  const roles = Array.isArray(admins.roles) ? admins.roles : [];
  return names.includes(session.name) || session.roles.some((role) => roles.includes(role));
}

/**
 * Whether the user may do what a database's admins may (write design
 * documents and indexes, change `_security`). A user who may not read
 * `_security` is no admin.
 */
export async function isDatabaseAdmin(db) {
  if (isServerAdmin()) return true;
  try {
    return isAdminIn(await api('GET', `${dbPath(db)}/_security`));
  } catch {
    return false;
  }
}

/** Whether the logged-in user is a server admin (the `_admin` role). */
export function isServerAdmin() {
  return session.roles.includes('_admin');
}

/**
 * The page for a user who is not a server admin: what the page is for and
 * why they may not see it, in CouchDB's words (asked of `path`). Answers
 * false when the server lets them after all (then the page goes on).
 */
export async function refuseUnlessAdmin({ alive, title, path, what }) {
  if (isServerAdmin()) return false;
  let reason = null;
  try {
    await api('GET', path);
    return false;
  } catch (err) {
    if (!(err instanceof ApiError) || (err.status !== 401 && err.status !== 403)) throw err;
    reason = describeError(err);
  }
  if (!alive()) return true;
  clear(main()).append(
    h('div', { class: 'page-head' }, h('div', {}, h('h1', { text: title }))),
    h('div', { class: 'callout callout-warn admin-only', role: 'note' },
      h('p', {}, h('strong', { text: 'Server admins only. ' }), what),
      h('p', { text: `The server answers: ${reason}` })),
    h('p', { class: 'muted', text: `You are logged in as ${session.name}, who is not a server admin.` }),
    h('p', {},
      h('a', { class: 'btn', href: '#/dbs', text: 'Back to the databases' }), ' ',
      h('button', { type: 'button', class: 'btn', onclick: () => logout(), text: 'Log in as someone else' })));
  return true;
}
