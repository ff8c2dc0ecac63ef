// #/db/NAME/permissions: a database's security object (`_security`) as a
// form (admins and members, each by name and by role), what it means for
// who may use the database, and the database's properties (partitioned,
// per-document access, revs_limit).

import { ApiError, api, describeError } from '../lib/api.js';
import { clear, fmtNumber, h, setText, uid } from '../lib/dom.js';
import { dbPath } from '../lib/paths.js';
import { announce, handlePageError, main, route, startPage } from '../lib/shell.js';
import { databaseHeader, stat } from '../lib/widgets.js';
import { isAdminIn } from '../lib/rights.js';

// ------------------------------------------------------------ list editor

/**
 * An editable list of names or roles: one entry per item with a remove
 * button naming it, and an input whose Enter (or the Add button) adds one.
 * `label` heads the list ("Names"), `noun` names an entry for buttons and
 * messages ("member name"). Read-only without `editable`. `onChange` is
 * called after each change; `values()` answers the list as it stands.
 */
export function listEditor({ label, noun, items, editable = true, onChange = () => {}, emptyText = 'None' }) {
  const values = [...items];
  const headingId = uid('list-heading');
  const inputId = uid('list-input');
  const list = h('ul', { class: 'chips', 'aria-labelledby': headingId });
  const error = h('div', { class: 'form-error chip-error', role: 'alert' });
  const addLabel = `Add a${/^[aeiou]/i.test(noun) ? 'n' : ''} ${noun}`;
  const input = editable
    ? h('input', { id: inputId, type: 'text', placeholder: addLabel, autocomplete: 'off', autocapitalize: 'none', spellcheck: 'false' })
    : null;

  /** Draws the entries; `focusAt` puts focus on the remove button of that entry. */
  const draw = (focusAt) => {
    clear(list);
    if (!values.length) list.append(h('li', { class: 'chip-empty muted', text: emptyText }));
    values.forEach((value, i) => {
      const remove = editable
        ? h('button', {
          type: 'button',
          class: 'chip-remove',
          'aria-label': `Remove ${noun} ${value}`,
          title: `Remove ${value}`,
          text: '×',
          onclick: () => {
            values.splice(i, 1);
            draw(values.length ? Math.min(i, values.length - 1) : null);
            if (!values.length) input.focus();
            onChange();
          },
        })
        : null;
      list.append(h('li', { class: 'chip' }, h('span', { class: 'chip-text', text: value }), remove));
    });
    if (focusAt !== null && focusAt !== undefined) {
      const buttons = list.querySelectorAll('.chip-remove');
      if (buttons[focusAt]) buttons[focusAt].focus();
    }
  };

  const add = () => {
    clear(error);
    const value = input.value.trim();
    if (!value) {
      error.append(h('p', { text: `Type a ${noun} to add.` }));
      input.focus();
      return;
    }
    if (values.includes(value)) {
      error.append(h('p', { text: `${value} is already listed.` }));
      input.select();
      return;
    }
    values.push(value);
    input.value = '';
    draw(null);
    input.focus();
    onChange();
  };

  const el = h('div', { class: 'list-editor' },
    h('h3', { id: headingId, text: label }),
    list);
  if (editable) {
    input.addEventListener('keydown', (event) => {
      // Enter adds the entry; it must not submit the form around the list.
      if (event.key === 'Enter') {
        event.preventDefault();
        add();
      }
    });
    el.append(h('div', { class: 'chip-add' },
      h('label', { for: inputId, class: 'sr-only', text: addLabel }),
      input,
      h('button', { type: 'button', class: 'btn btn-small', 'aria-label': `Add ${noun}`, text: 'Add', onclick: add })),
    error);
  }
  draw(null);
  return { el, values: () => [...values], input };
}

// ------------------------------------------------------------ permissions


/** What the members lists mean for who may use the database, in words. */
function accessSummary(memberNames, memberRoles) {
  if (!memberNames.length && !memberRoles.length) {
    return {
      kind: 'warn',
      title: 'Public database.',
      text: 'With no members, anyone may read and write its documents, even without logging in. Design documents, these permissions and revs_limit stay with its admins.',
    };
  }
  if (!memberNames.length && memberRoles.length === 1 && memberRoles[0] === '_admin') {
    return {
      kind: 'info',
      title: 'Admins only.',
      text: 'Only server admins and the admins listed here may use this database: the member role _admin is held by server admins alone. A new database starts this way (CouchDB 3’s default_security = admin_only).',
    };
  }
  return {
    kind: 'info',
    title: 'Members only.',
    text: 'Only the members and admins listed here (by name, or by one of their roles) and server admins may read and write its documents; anyone else is refused.',
  };
}

export async function renderPermissions(db) {
  const alive = startPage(`Permissions · ${db}`, 'dbs');
  let sec;
  let info;
  let revsLimit;
  try {
    [sec, info, revsLimit] = await Promise.all([
      api('GET', `${dbPath(db)}/_security`),
      api('GET', dbPath(db)),
      api('GET', `${dbPath(db)}/_revs_limit`),
    ]);
  } catch (err) {
    if (!alive()) return;
    if (!(err instanceof ApiError) || err.status !== 403) throw err;
    // A user who may not read them: CouchDB's reason, below the tabs.
    clear(main()).append(...databaseHeader(db, 'permissions'),
      h('div', { class: 'page-head' }, h('div', {}, h('h1', { text: 'Permissions' }))),
      h('div', { class: 'callout callout-error', role: 'alert' },
        h('p', { text: describeError(err) }),
        h('p', { class: 'small', text: `Only members and admins of ${db} and server admins may see its permissions.` })));
    return;
  }
  if (!alive()) return;
  sec = sec || {};
  const editable = isAdminIn(sec);

  const root = clear(main());
  root.append(...databaseHeader(db, 'permissions'));
  root.append(h('div', { class: 'page-head' },
    h('div', {}, h('h1', { text: 'Permissions' }),
      h('p', { class: 'muted' }, 'Who may use ', h('strong', { class: 'break', text: db }),
        ': its security object (_security). Server admins may always do everything.'))));
  if (!editable) {
    root.append(h('div', { class: 'callout callout-info', role: 'note' },
      h('p', { text: 'You may read these permissions but not change them: only the database’s admins and server admins may.' })));
  }

  // What the members lists mean, kept current as they are edited.
  const summary = h('div', { class: 'callout access-summary' });
  const showSummary = (names, roles) => {
    const { kind, title, text } = accessSummary(names, roles);
    summary.className = `callout access-summary callout-${kind}`;
    clear(summary).append(h('p', {}, h('strong', { text: title }), ' ', text));
  };

  const saveButton = h('button', { type: 'submit', class: 'btn btn-primary', text: 'Save permissions' });
  const dirtyNote = h('span', { class: 'muted small dirty-note', 'aria-live': 'polite' });
  const formError = h('div', { class: 'form-error', role: 'alert' });
  const onChange = () => {
    showSummary(lists.memberNames.values(), lists.memberRoles.values());
    setText(dirtyNote, 'Unsaved changes.');
    clear(formError);
  };
  const group = (key) => sec[key] || {};
  const lists = {
    adminNames: listEditor({ label: 'Names', noun: 'admin name', items: group('admins').names || [], editable, onChange }),
    adminRoles: listEditor({ label: 'Roles', noun: 'admin role', items: group('admins').roles || [], editable, onChange }),
    memberNames: listEditor({ label: 'Names', noun: 'member name', items: group('members').names || [], editable, onChange }),
    memberRoles: listEditor({ label: 'Roles', noun: 'member role', items: group('members').roles || [], editable, onChange }),
  };
  showSummary(lists.memberNames.values(), lists.memberRoles.values());

  const section = (title, text, names, roles) => {
    const headingId = uid('perm-heading');
    return h('section', { class: 'card perm-group', 'aria-labelledby': headingId },
      h('h2', { id: headingId, text: title }),
      h('p', { class: 'muted small', text }),
      h('div', { class: 'perm-lists' }, names.el, roles.el));
  };
  const form = h('form', { class: 'perm-form', 'aria-label': `Permissions of ${db}`, novalidate: true },
    summary,
    h('div', { class: 'perm-grid' },
      section('Admins', 'May change design documents, these permissions and revs_limit, and do everything members may.', lists.adminNames, lists.adminRoles),
      section('Members', 'May read and write documents, except design documents. With no member names and no member roles, the database is public.', lists.memberNames, lists.memberRoles)));
  if (editable) {
    form.append(h('div', { class: 'card perm-actions' }, saveButton, dirtyNote, formError));
  }
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (!editable) return;
    clear(formError);
    // Other fields of the object (set by other tools) are kept as they are.
    const body = {
      ...sec,
      admins: { ...group('admins'), names: lists.adminNames.values(), roles: lists.adminRoles.values() },
      members: { ...group('members'), names: lists.memberNames.values(), roles: lists.memberRoles.values() },
    };
    saveButton.disabled = true;
    setText(saveButton, 'Saving…');
    try {
      await api('PUT', `${dbPath(db)}/_security`, { json: body });
      announce(`Permissions of ${db} saved.`);
      route();
    } catch (err) {
      saveButton.disabled = false;
      setText(saveButton, 'Save permissions');
      if (err instanceof ApiError && err.status === 401) return handlePageError(err);
      formError.append(h('p', { text: describeError(err) }));
      saveButton.focus();
    }
  });
  root.append(form, propertiesSection(db, info, revsLimit, editable));
}

// ------------------------------------------------------------- properties

/** Partitioned, per-document access and revs_limit (editable by admins). */
function propertiesSection(db, info, revsLimit, editable) {
  const props = info.props || {};
  const headingId = uid('props-heading');
  const section = h('section', { class: 'card', 'aria-labelledby': headingId },
    h('h2', { id: headingId, text: 'Properties' }),
    h('dl', { class: 'stats stats-compact' },
      stat('Partitioned', props.partitioned ? 'Yes' : 'No'),
      stat('Per-document access', props.access ? 'On' : 'Off'),
      stat('Revisions kept (revs_limit)', fmtNumber(revsLimit))),
    h('p', { class: 'hint', text: 'Partitioning and per-document access are chosen when a database is created and cannot change afterwards. revs_limit is how many revision ids each document’s history keeps (1,000 by default); a replica further behind than that sees a conflict instead of an update.' }));
  if (!editable) return section;

  const inputId = uid('revs-limit');
  const error = h('div', { class: 'form-error', role: 'alert' });
  const button = h('button', { type: 'submit', class: 'btn', text: 'Save revs_limit' });
  const form = h('form', { class: 'inline-form revs-form', novalidate: true },
    h('div', { class: 'field' },
      h('label', { for: inputId, text: 'Revisions to keep per document' }),
      h('input', { id: inputId, name: 'limit', type: 'number', min: '1', step: '1', inputmode: 'numeric', value: String(revsLimit) })),
    button);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clear(error);
    const text = form.elements.limit.value.trim();
    const limit = Number(text);
    if (!/^\d+$/.test(text) || !Number.isSafeInteger(limit) || limit < 1) {
      error.append(h('p', { text: 'revs_limit must be a whole number of at least 1.' }));
      form.elements.limit.focus();
      return;
    }
    button.disabled = true;
    try {
      await api('PUT', `${dbPath(db)}/_revs_limit`, { json: limit });
      announce(`${db} now keeps ${fmtNumber(limit)} revisions per document.`);
      route();
    } catch (err) {
      button.disabled = false;
      if (err instanceof ApiError && err.status === 401) return handlePageError(err);
      error.append(h('p', { text: describeError(err) }));
      form.elements.limit.focus();
    }
  });
  section.append(form, error);
  return section;
}
