// Who the logged-in user is for a database, decided once for every page
// (the server decides in the end; pages only hide what it would refuse).

import { api } from './api.js';
import { dbPath } from './paths.js';
import { session } from './shell.js';

/**
 * Whether the user is a server admin (`_admin`) or an admin of the
 * database whose security object is `security`, by name or by role.
 */
export function isAdminIn(security) {
  if (session.roles.includes('_admin')) return true;
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
  if (session.roles.includes('_admin')) return true;
  try {
    return isAdminIn(await api('GET', `${dbPath(db)}/_security`));
  } catch {
    return false;
  }
}
