// #/users and #/users/NAME: the users of the `_users` database. Server admins
// list, create, change and delete them; any other user sees and changes only
// their own document (their password, not their roles). A password's hash,
// salt and scheme are kept in the document but never shown.

import { ApiError, api, describeError } from '../lib/api.js';
import { clear, fmtNumber, h, setText, uid } from '../lib/dom.js';
import { docPath, link } from '../lib/paths.js';
import {
  announce, handlePageError, loadSession, main, navigate, renderLogin, route, session, startPage,
} from '../lib/shell.js';
import { isServerAdmin } from '../lib/rights.js';
import { breadcrumbs, clampPerPage, confirmDialog, pager, stat } from '../lib/widgets.js';
import { listEditor } from './permissions.js';

const USERS_DB = '_users';
const PREFIX = 'org.couchdb.user:';

/** The `_users` document path of a user name. */
function userPath(name) {
  return docPath(USERS_DB, `${PREFIX}${name}`);
}

/** The hash link of one user's page. */
function userLink(name) {
  return `#/users/${encodeURIComponent(name)}`;
}

/** Whether a user document holds a password (hashed, or legacy SHA-1). */
function hasPassword(doc) {
  return Boolean(doc.derived_key || doc.password_sha || doc.password);
}

/** Roles typed as "a, b, c": trimmed, without blanks or repeats. */
function parseRoles(text) {
  return [...new Set(text.split(',').map((r) => r.trim()).filter(Boolean))];
}

function roleTags(roles) {
  if (!roles || !roles.length) return h('span', { class: 'muted', text: 'No roles' });
  return h('span', { class: 'role-tags' }, roles.map((r) => h('span', { class: 'tag role-tag', text: r })));
}

/**
 * `#/users` (a server admin's list), `#/users/NAME` (one user). A user who
 * is not a server admin goes straight to their own page.
 */
export async function renderUsers(rest, params) {
  if (rest.length) return renderUser(rest.join('/'));
  if (!isServerAdmin()) {
    history.replaceState(null, '', userLink(session.name));
    return renderUser(session.name);
  }
  return renderUserList(params);
}

// ------------------------------------------------------------------- list

async function renderUserList(params) {
  const alive = startPage('Users', 'users');
  const perPage = clampPerPage(params.get('per'));
  const pageNo = Math.max(1, Number.parseInt(params.get('page') || '1', 10) || 1);
  const prefix = params.get('prefix') || '';
  const data = await api('GET', `/${USERS_DB}/_all_docs`, {
    params: {
      include_docs: 'true',
      startkey: JSON.stringify(`${PREFIX}${prefix}`),
      endkey: JSON.stringify(`${PREFIX}${prefix}\ufff0`),
      limit: perPage + 1,
      skip: (pageNo - 1) * perPage,
    },
  });
  if (!alive()) return;
  const rows = data.rows.slice(0, perPage);
  const hasNext = data.rows.length > perPage;

  const root = clear(main());
  root.append(h('div', { class: 'page-head' },
    h('div', {}, h('h1', { text: 'Users' }),
      h('p', { class: 'muted', text: 'The accounts of the _users database. Server admins set in the configuration are not listed here.' }))));
  root.append(newUserForm());

  const searchId = uid('search-user');
  const searchForm = h('form', { class: 'inline-form', role: 'search', 'aria-label': 'Find users' },
    h('div', { class: 'field' },
      h('label', { for: searchId, text: 'User name starts with' }),
      h('input', { id: searchId, name: 'prefix', type: 'search', value: prefix, autocomplete: 'off', spellcheck: 'false' })),
    h('button', { type: 'submit', class: 'btn', text: 'Search' }),
    prefix ? h('a', { class: 'btn btn-ghost', href: link.users({ per: perPage === 20 ? '' : perPage }), text: 'Clear' }) : null);
  searchForm.addEventListener('submit', (event) => {
    event.preventDefault();
    navigate(link.users({ prefix: searchForm.elements.prefix.value.trim(), per: perPage === 20 ? '' : perPage }));
  });
  root.append(h('div', { class: 'toolbar toolbar-single card' }, searchForm));

  if (!rows.length) {
    root.append(h('div', { class: 'card empty' }, h('p', {
      text: prefix ? `No user name starts with “${prefix}”.` : pageNo > 1 ? 'No more users.' : 'There are no users yet. Create one above.',
    })));
  } else {
    const tbody = h('tbody');
    for (const row of rows) {
      const doc = row.doc || {};
      const name = doc.name || row.id.slice(PREFIX.length);
      tbody.append(h('tr', { dataset: { user: name } },
        h('th', { scope: 'row' }, h('a', { href: userLink(name), class: 'break', text: name })),
        h('td', {}, roleTags(doc.roles)),
        h('td', { text: doc.type || '—' }),
        h('td', {}, hasPassword(doc)
          ? h('span', { class: 'badge badge-ok', text: 'Set' })
          : h('span', { class: 'badge badge-muted', text: 'None' }))));
    }
    root.append(h('div', { class: 'card table-card' }, h('div', { class: 'table-scroll' },
      h('table', { class: 'table users-table' },
        h('caption', { class: 'sr-only', text: 'Users with their roles and whether a password is set' }),
        h('thead', {}, h('tr', {},
          h('th', { scope: 'col', text: 'Name' }),
          h('th', { scope: 'col', text: 'Roles' }),
          h('th', { scope: 'col', text: 'Type' }),
          h('th', { scope: 'col', text: 'Password' }))),
        tbody))));
  }
  root.append(pager({
    pageNo,
    hasNext,
    count: rows.length,
    perPage,
    label: 'User pages',
    href: (p, per) => link.users({ page: p > 1 ? p : '', prefix, per: per === 20 ? '' : per }),
  }));
}

/** Two password inputs that must agree; `check()` answers the password or null. */
function passwordPair(form, { label, autocomplete, required = true }) {
  const firstId = uid('password');
  const secondId = uid('password-again');
  const fields = h('div', { class: 'field-row' },
    h('div', { class: 'field' },
      h('label', { for: firstId, text: label }),
      h('input', { id: firstId, name: 'password', type: 'password', autocomplete, required })),
    h('div', { class: 'field' },
      h('label', { for: secondId, text: 'Repeat the password' }),
      h('input', { id: secondId, name: 'password2', type: 'password', autocomplete, required })));
  const check = (error) => {
    const password = form.elements.password.value;
    if (!password) {
      error.append(h('p', { text: 'Type a password.' }));
      form.elements.password.focus();
      return null;
    }
    if (password !== form.elements.password2.value) {
      error.append(h('p', { text: 'The two passwords differ: type the same password twice.' }));
      form.elements.password2.select();
      return null;
    }
    return password;
  };
  return { fields, check };
}

/** A server admin's form for a new user: name, password twice, roles. */
function newUserForm() {
  const headingId = uid('new-user');
  const nameId = uid('new-user-name');
  const rolesId = uid('new-user-roles');
  const error = h('div', { class: 'form-error', role: 'alert' });
  const button = h('button', { type: 'submit', class: 'btn btn-primary', text: 'Create user' });
  const form = h('form', { class: 'new-user-form', 'aria-labelledby': headingId, novalidate: true });
  const passwords = passwordPair(form, { label: 'Password', autocomplete: 'new-password' });
  form.append(
    h('div', { class: 'field-row' },
      h('div', { class: 'field' },
        h('label', { for: nameId, text: 'Name' }),
        h('input', { id: nameId, name: 'name', type: 'text', autocomplete: 'off', autocapitalize: 'none', spellcheck: 'false', required: true })),
      h('div', { class: 'field' },
        h('label', { for: rolesId, text: 'Roles' }),
        h('input', { id: rolesId, name: 'roles', type: 'text', autocomplete: 'off', autocapitalize: 'none', spellcheck: 'false', 'aria-describedby': `${rolesId}-hint` }),
        h('p', { id: `${rolesId}-hint`, class: 'hint', text: 'Separated by commas, e.g. editors, support. Optional.' }))),
    passwords.fields,
    error,
    button);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clear(error);
    const name = form.elements.name.value.trim();
    if (!name) {
      error.append(h('p', { text: 'Type a name for the user.' }));
      form.elements.name.focus();
      return;
    }
    const password = passwords.check(error);
    if (password === null) return;
    const roles = parseRoles(form.elements.roles.value);
    button.disabled = true;
    try {
      await api('PUT', userPath(name), { json: { _id: `${PREFIX}${name}`, name, password, roles, type: 'user' } });
      announce(`User ${name} created.`);
      route();
    } catch (err) {
      button.disabled = false;
      if (err instanceof ApiError && err.status === 401) return handlePageError(err);
      error.append(h('p', { text: describeError(err) }));
      form.elements.name.focus();
    }
  });
  return h('section', { class: 'card', 'aria-labelledby': headingId },
    h('h2', { id: headingId, text: 'New user' }), form);
}

// ------------------------------------------------------------------- user

/** One user's page: their roles, their password, and (for admins) deletion. */
async function renderUser(name) {
  const admin = isServerAdmin();
  const own = name === session.name;
  const alive = startPage(own ? 'Your account' : `User ${name}`, 'users');
  let doc;
  try {
    doc = await api('GET', userPath(name));
  } catch (err) {
    if (!alive()) return;
    if (err instanceof ApiError && err.status === 401) throw err;
    if (err instanceof ApiError && !admin && (err.status === 403 || err.status === 404)) {
      renderRefusal(name, own, err);
      return;
    }
    throw err;
  }
  if (!alive()) return;

  const root = clear(main());
  if (admin) root.append(breadcrumbs([['Users', link.users()], [name, null]]));
  const deleteButton = admin
    ? h('button', { type: 'button', class: 'btn btn-danger-ghost', text: 'Delete user', onclick: () => deleteUser(doc) })
    : null;
  root.append(h('div', { class: 'page-head' },
    h('div', {}, h('h1', { class: 'break', text: name }),
      h('p', { class: 'muted', text: own ? 'Your account, in the _users database.' : 'A user of the _users database.' })),
    h('div', { class: 'page-actions' }, deleteButton)));
  root.append(h('dl', { class: 'stats stats-compact' },
    stat('Type', doc.type || '—'),
    stat('Roles', fmtNumber((doc.roles || []).length)),
    stat('Password', hasPassword(doc) ? 'Set' : 'Not set')));
  root.append(h('div', { class: 'user-grid' }, rolesSection(doc, admin), passwordSection(doc, own)));
}

/** What a user who is not a server admin sees when a user document is refused. */
function renderRefusal(name, own, err) {
  const root = clear(main());
  root.append(h('div', { class: 'page-head' }, h('div', {}, h('h1', { text: 'Not allowed' }))));
  let why = `Only server admins may see other users. CouchDB answers as if ${name} did not exist.`;
  if (own && err.status === 403) {
    why = 'Your own user document cannot be read: this server’s _users database is open to server admins only (CouchDB 3’s default). A server admin may open it to its users (with [couchdb] users_db_security_editable = true, a _security without members on _users); each user then sees and changes only their own document.';
  } else if (own) {
    why = 'You have no document in _users: your account is not one this page can change.';
  }
  root.append(h('div', { class: 'callout callout-error', role: 'alert' },
    h('p', { text: describeError(err) }), h('p', { class: 'small', text: why })));
  if (!own && session.name) root.append(h('p', {}, h('a', { href: userLink(session.name), text: 'Your own account' })));
}

/** The user's roles: a list to edit for server admins, read-only for others. */
function rolesSection(doc, admin) {
  const headingId = uid('roles-heading');
  const section = h('section', { class: 'card', 'aria-labelledby': headingId },
    h('h2', { id: headingId, text: 'Roles' }));
  if (!admin) {
    section.append(h('div', { class: 'role-list' }, roleTags(doc.roles)),
      h('p', { class: 'hint', text: 'Only server admins may change roles: CouchDB refuses a user who changes their own.' }));
    return section;
  }
  const error = h('div', { class: 'form-error', role: 'alert' });
  const button = h('button', { type: 'submit', class: 'btn btn-primary', text: 'Save roles' });
  const editor = listEditor({ label: 'Roles of this user', noun: 'role', items: doc.roles || [], emptyText: 'No roles' });
  const form = h('form', { class: 'roles-form', 'aria-labelledby': headingId, novalidate: true },
    h('p', { class: 'hint', text: 'A role gives this user what a database’s permissions give that role.' }),
    editor.el, error, button);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clear(error);
    button.disabled = true;
    try {
      // The whole document goes back (its password hash included), with new roles.
      await api('PUT', userPath(doc.name), { json: { ...doc, roles: editor.values() } });
      announce(`Roles of ${doc.name} saved.`);
      route();
    } catch (err) {
      button.disabled = false;
      if (err instanceof ApiError && err.status === 401) return handlePageError(err);
      error.append(h('p', { text: describeError(err) }));
      button.focus();
    }
  });
  section.append(form);
  return section;
}

/**
 * A new password, typed twice. CouchDB ends a user's sessions when their
 * password changes (the session cookie is signed with the old salt), so a
 * user who changes their own is logged in again with the new one.
 */
function passwordSection(doc, own) {
  const headingId = uid('password-heading');
  const error = h('div', { class: 'form-error', role: 'alert' });
  const button = h('button', { type: 'submit', class: 'btn btn-primary', text: 'Change password' });
  const form = h('form', { class: 'password-form', 'aria-labelledby': headingId, novalidate: true });
  const passwords = passwordPair(form, { label: 'New password', autocomplete: 'new-password' });
  form.append(
    h('p', { class: 'hint', text: hasPassword(doc)
      ? 'A password is set (only its hash is stored, and never shown).'
      : 'No password is set: this user cannot log in yet.' }),
    passwords.fields, error, button);
  if (own) form.append(h('p', { class: 'hint', text: 'Changing it ends your current session; the console logs you in again with the new password.' }));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clear(error);
    const password = passwords.check(error);
    if (password === null) return;
    button.disabled = true;
    setText(button, 'Changing…');
    try {
      await api('PUT', userPath(doc.name), { json: { ...doc, password } });
    } catch (err) {
      button.disabled = false;
      setText(button, 'Change password');
      if (err instanceof ApiError && err.status === 401) return handlePageError(err);
      error.append(h('p', { text: describeError(err) }));
      form.elements.password.focus();
      return;
    }
    if (!own) {
      announce(`Password of ${doc.name} changed.`);
      route();
      return;
    }
    try {
      await api('POST', '/_session', { json: { name: doc.name, password } });
      await loadSession();
      announce('Your password is changed and you are logged in with it.');
      route();
    } catch {
      await loadSession().catch(() => {});
      renderLogin('Your password is changed. Log in again with the new password.');
    }
  });
  return h('section', { class: 'card', 'aria-labelledby': headingId },
    h('h2', { id: headingId, text: 'Password' }), form);
}

/** Deletes a user after a confirmation, then back to the list. */
async function deleteUser(doc) {
  const ok = await confirmDialog({
    title: `Delete user ${doc.name}?`,
    body: [`${doc.name} can no longer log in. Databases that name them in their permissions keep the name until it is removed there.`],
    confirmLabel: 'Delete user',
  });
  if (!ok) return;
  try {
    await api('DELETE', userPath(doc.name), { params: { rev: doc._rev } });
    announce(`User ${doc.name} deleted.`);
    navigate(link.users());
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return handlePageError(err);
    announce(describeError(err), 'error');
  }
}
