'use strict';
// Recliner's web console: a single-page app on the server's own CouchDB API.
// Pages are chosen by the URL's hash (#/dbs, #/db/NAME, #/db/NAME/doc/ID,
// #/replication, #/login). Everything shown is built with createElement and
// textContent: no data ever goes through innerHTML.

(() => {
  // ---------------------------------------------------------------- helpers

  /** Builds an element: h('a', {href, class, onclick}, child, ...). */
  function h(tag, props, ...children) {
    const el = tag === 'svg' || SVG_TAGS.has(tag)
      ? document.createElementNS('http://www.w3.org/2000/svg', tag)
      : document.createElement(tag);
    if (props) {
      for (const [key, value] of Object.entries(props)) {
        if (value === undefined || value === null || value === false) continue;
        if (key.startsWith('on') && typeof value === 'function') {
          el.addEventListener(key.slice(2), value);
        } else if (key === 'class') {
          el.setAttribute('class', value);
        } else if (key === 'text') {
          el.textContent = value;
        } else if (key === 'dataset') {
          for (const [k, v] of Object.entries(value)) el.dataset[k] = v;
        } else if (key === 'value' && 'value' in el && !(el instanceof SVGElement)) {
          el.value = value;
        } else if (key === 'checked' || key === 'disabled' || key === 'hidden' || key === 'required') {
          el[key] = Boolean(value);
        } else {
          el.setAttribute(key, value === true ? '' : String(value));
        }
      }
    }
    append(el, children);
    return el;
  }
  const SVG_TAGS = new Set(['g', 'path', 'line', 'rect', 'circle', 'text', 'title', 'polyline', 'defs', 'linearGradient', 'stop', 'desc']);

  function append(el, children) {
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  function clear(el) {
    while (el.firstChild) el.removeChild(el.firstChild);
    return el;
  }

  /** Sets text only when it changed (live updates keep selections intact). */
  function setText(el, text) {
    const value = String(text);
    if (el.textContent !== value) el.textContent = value;
  }

  let idCounter = 0;
  function uid(prefix) {
    idCounter += 1;
    return `${prefix}-${idCounter}`;
  }

  const numberFormat = new Intl.NumberFormat('en');
  function fmtNumber(n) {
    return n === null || n === undefined || Number.isNaN(n) ? '—' : numberFormat.format(n);
  }

  function fmtBytes(n) {
    if (n === null || n === undefined || Number.isNaN(n)) return '—';
    const units = ['B', 'KB', 'MB', 'GB', 'TB'];
    let value = n;
    let unit = 0;
    while (value >= 1024 && unit < units.length - 1) {
      value /= 1024;
      unit += 1;
    }
    return `${unit === 0 ? value : value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
  }

  function fmtRate(r) {
    if (!r) return '0';
    if (r >= 100) return numberFormat.format(Math.round(r));
    if (r >= 10) return r.toFixed(0);
    return r.toFixed(1);
  }

  function fmtTime(date) {
    return date.toLocaleTimeString('en-GB', { hour12: false });
  }

  function fmtAgo(iso) {
    if (!iso) return '—';
    const t = Date.parse(iso);
    if (Number.isNaN(t)) return String(iso);
    const s = Math.max(0, Math.round((Date.now() - t) / 1000));
    if (s < 5) return 'just now';
    if (s < 60) return `${s} s ago`;
    if (s < 3600) return `${Math.floor(s / 60)} min ago`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
    return new Date(t).toLocaleString('en-GB');
  }

  function shortSeq(seq) {
    if (seq === null || seq === undefined) return '—';
    const text = typeof seq === 'string' ? seq : JSON.stringify(seq);
    const n = text.split('-')[0];
    return /^\d+$/.test(n) ? fmtNumber(Number(n)) : text;
  }

  /** A URL (or any text holding URLs) with passwords removed from userinfo. */
  function stripCredentials(value) {
    if (value === null || value === undefined) return '';
    if (typeof value === 'object') {
      return stripCredentials(value.url || JSON.stringify(value));
    }
    return String(value).replace(/\b([a-z][a-z0-9+.-]*:\/\/)([^\s/@]*)@/gi, (_, scheme, userinfo) => {
      const name = userinfo.split(':')[0];
      return name ? `${scheme}${name}@` : scheme;
    });
  }

  /** A database name in a request path. */
  function dbPath(db) {
    return `/${encodeURIComponent(db)}`;
  }

  /** A document id in a request path: design docs keep their slash. */
  function docPath(db, id) {
    if (id.startsWith('_design/')) {
      return `${dbPath(db)}/_design/${encodeURIComponent(id.slice(8))}`;
    }
    return `${dbPath(db)}/${encodeURIComponent(id)}`;
  }

  function attPath(db, id, name) {
    return `${docPath(db, id)}/${encodeURIComponent(name)}`;
  }

  /** Hash links (every segment encoded so any name round-trips). */
  const link = {
    dbs: (params) => `#/dbs${query(params)}`,
    db: (db, params) => `#/db/${encodeURIComponent(db)}${query(params)}`,
    doc: (db, id) => `#/db/${encodeURIComponent(db)}/doc/${encodeURIComponent(id)}`,
    newDoc: (db) => `#/db/${encodeURIComponent(db)}/new`,
    replication: () => '#/replication',
  };

  function query(params) {
    if (!params) return '';
    const parts = [];
    for (const [k, v] of Object.entries(params)) {
      if (v === undefined || v === null || v === '') continue;
      parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(v)}`);
    }
    return parts.length ? `?${parts.join('&')}` : '';
  }

  // -------------------------------------------------------------------- API

  class ApiError extends Error {
    constructor(status, body, text) {
      const reason = (body && (body.reason || body.error)) || text || `HTTP ${status}`;
      super(typeof reason === 'string' ? reason : JSON.stringify(reason));
      this.status = status;
      this.error = body && body.error;
      this.reason = body && body.reason;
    }
  }

  async function api(method, path, { json, body, headers, params } = {}) {
    const init = {
      method,
      credentials: 'same-origin',
      cache: 'no-store',
      headers: { Accept: 'application/json', ...(headers || {}) },
    };
    if (json !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(json);
    } else if (body !== undefined) {
      init.body = body;
    }
    let res;
    try {
      res = await fetch(path + query(params), init);
    } catch (err) {
      throw new ApiError(0, { error: 'network', reason: `The server cannot be reached (${err.message}).` });
    }
    const text = await res.text();
    let data = null;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch {
        data = null;
      }
    }
    if (!res.ok) {
      throw new ApiError(res.status, data, text.slice(0, 300));
    }
    return data;
  }

  /** A readable sentence for an error from the server. */
  function describeError(err) {
    if (!(err instanceof ApiError)) return err && err.message ? err.message : String(err);
    const what = {
      0: 'Network error',
      400: 'Bad request',
      401: 'Not authorized',
      403: 'Not allowed',
      404: 'Not found',
      409: 'Conflict',
      412: 'Precondition failed',
      413: 'Too large',
      415: 'Unsupported media type',
      500: 'Server error',
    }[err.status] || `Error ${err.status}`;
    const reason = stripCredentials(err.message);
    let hint = '';
    if (err.status === 409) hint = ' Someone changed it meanwhile: reload to get the latest revision.';
    if (err.status === 403) hint = ' Your account may not do this.';
    return `${what}: ${reason}.${hint}`.replace(/\.\.$/, '.').replace(/([.!?])\./, '$1');
  }

  // ---------------------------------------------------------------- session

  const session = { name: null, roles: [] };

  async function loadSession() {
    const data = await api('GET', '/_session');
    session.name = data.userCtx ? data.userCtx.name : null;
    session.roles = data.userCtx ? data.userCtx.roles || [] : [];
    renderChrome();
    return session.name;
  }

  function renderChrome() {
    const loggedIn = Boolean(session.name);
    document.getElementById('nav').hidden = !loggedIn;
    document.getElementById('user').hidden = !loggedIn;
    const admin = session.roles.includes('_admin');
    setText(document.getElementById('user-name'), loggedIn ? `${session.name}${admin ? ' (admin)' : ''}` : '');
  }

  async function logout() {
    try {
      await api('DELETE', '/_session');
    } catch (err) {
      announce(describeError(err), 'error');
    }
    session.name = null;
    session.roles = [];
    renderChrome();
    announce('You are logged out.');
    navigate('#/login');
  }

  // ----------------------------------------------------------------- status

  let statusTimer = null;
  let statusAt = 0;
  /** A message in the live region (read out by screen readers). */
  function announce(message, kind = 'ok') {
    const el = document.getElementById('status');
    clear(el);
    el.className = `status status-${kind}`;
    el.append(h('p', { class: 'status-text', text: message }));
    clearTimeout(statusTimer);
    statusAt = Date.now();
    statusTimer = setTimeout(() => {
      clear(el);
      el.className = 'status';
    }, kind === 'error' ? 12000 : 6000);
  }

  // ----------------------------------------------------------------- router

  const main = () => document.getElementById('main');
  let page = { generation: 0, cleanups: [] };
  let afterLogin = '#/dbs';

  function navigate(hash) {
    if (location.hash === hash) {
      route();
    } else {
      location.hash = hash;
    }
  }

  function parseHash() {
    const raw = location.hash.replace(/^#/, '') || '/dbs';
    const [path, search] = raw.split('?');
    const segments = path.split('/').filter(Boolean).map((s) => {
      try {
        return decodeURIComponent(s);
      } catch {
        return s;
      }
    });
    return { segments, params: new URLSearchParams(search || '') };
  }

  /** Starts a page: stops the previous page's timers, returns a liveness check. */
  function startPage(title, navKey) {
    for (const fn of page.cleanups) {
      try {
        fn();
      } catch {
        // A cleanup that fails must not keep the next page from showing.
      }
    }
    page = { generation: page.generation + 1, cleanups: [] };
    // A message from an earlier page does not linger on this one.
    if (Date.now() - statusAt > 1000) {
      const status = document.getElementById('status');
      clear(status);
      status.className = 'status';
    }
    const generation = page.generation;
    document.title = `${title} · Recliner`;
    for (const a of document.querySelectorAll('[data-nav]')) {
      if (a.dataset.nav === navKey) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    return () => page.generation === generation;
  }

  function onCleanup(fn) {
    page.cleanups.push(fn);
  }

  let firstRoute = true;
  let lastPath = null;
  async function route() {
    const { segments, params } = parseHash();
    const [head, db, sub, ...rest] = segments;
    if (head === 'login') {
      renderLogin();
      return;
    }
    if (!session.name) {
      afterLogin = location.hash && !location.hash.startsWith('#/login') ? location.hash : '#/dbs';
      renderLogin();
      return;
    }
    try {
      if (head === 'replication') {
        await renderReplication();
      } else if (head === 'db' && db && sub === 'doc' && rest.length) {
        await renderDocument(db, rest.join('/'));
      } else if (head === 'db' && db && sub === 'new') {
        await renderNewDocument(db);
      } else if (head === 'db' && db) {
        await renderDatabase(db, params);
      } else {
        await renderDatabases(params);
      }
    } catch (err) {
      handlePageError(err);
    }
    if (!firstRoute) focusHeading();
    firstRoute = false;
    if (lastPath !== segments.join('/')) window.scrollTo(0, 0);
    lastPath = segments.join('/');
  }

  function focusHeading() {
    const heading = main().querySelector('h1');
    if (heading) {
      heading.setAttribute('tabindex', '-1');
      heading.focus({ preventScroll: true });
    }
  }

  /**
   * 401 without a session: back to the login form. 401 or 403 with one (the
   * user may not do this): a "not allowed" page. Anything else: a readable page.
   */
  function handlePageError(err) {
    if (err instanceof ApiError && err.status === 401) {
      const hash = location.hash || '#/dbs';
      const loggedOut = () => {
        session.name = null;
        session.roles = [];
        renderChrome();
        afterLogin = hash;
        renderLogin('Your session has ended or you are not logged in. Log in to continue.');
      };
      api('GET', '/_session').then((data) => {
        if (data.userCtx && data.userCtx.name) {
          showErrorPage(err, true);
        } else {
          loggedOut();
        }
      }, loggedOut);
      return;
    }
    showErrorPage(err, err instanceof ApiError && err.status === 403);
  }

  function showErrorPage(err, forbidden) {
    startPage(forbidden ? 'Not allowed' : 'Error', null);
    const root = clear(main());
    const title = forbidden ? 'Not allowed'
      : err instanceof ApiError && err.status === 404 ? 'Not found' : 'Something went wrong';
    root.append(
      h('h1', { text: title }),
      h('div', { class: 'callout callout-error', role: 'alert' }, h('p', { text: describeError(err) })));
    if (!forbidden) {
      root.append(h('p', {}, h('a', { href: '#/dbs', text: 'Back to the databases' })));
      focusHeading();
      return;
    }
    // A member of some databases may not list them all: let them open one.
    const inputId = uid('open-db');
    const form = h('form', { class: 'inline-form card', 'aria-label': 'Open a database' },
      h('div', { class: 'field' },
        h('label', { for: inputId, text: 'Open a database you may use' }),
        h('input', { id: inputId, name: 'db', type: 'text', autocomplete: 'off', spellcheck: 'false' })),
      h('button', { type: 'submit', class: 'btn btn-primary', text: 'Open' }));
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      const name = form.elements.db.value.trim();
      if (name) navigate(link.db(name));
    });
    root.append(
      h('p', { class: 'muted', text: `You are logged in as ${session.name || 'a user'} without the rights this page needs (server admins may see everything).` }),
      form,
      h('button', { type: 'button', class: 'btn', onclick: () => logout(), text: 'Log in as someone else' }));
    focusHeading();
  }

  // ------------------------------------------------------------------ login

  function renderLogin(message) {
    startPage('Log in', null);
    const root = clear(main());
    const nameId = uid('login-name');
    const passId = uid('login-pass');
    const error = h('div', { class: 'form-error', role: 'alert' });
    if (message) error.append(h('p', { text: message }));
    const button = h('button', { type: 'submit', class: 'btn btn-primary btn-block', text: 'Log in' });
    const form = h('form', { class: 'login-form', novalidate: true },
      h('div', { class: 'field' },
        h('label', { for: nameId, text: 'User name' }),
        h('input', { id: nameId, name: 'name', type: 'text', autocomplete: 'username', required: true, autocapitalize: 'none', spellcheck: 'false' })),
      h('div', { class: 'field' },
        h('label', { for: passId, text: 'Password' }),
        h('input', { id: passId, name: 'password', type: 'password', autocomplete: 'current-password', required: true })),
      error,
      button);
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      clear(error);
      const name = form.elements.name.value.trim();
      const password = form.elements.password.value;
      if (!name || !password) {
        error.append(h('p', { text: 'Enter your user name and password.' }));
        (name ? form.elements.password : form.elements.name).focus();
        return;
      }
      button.disabled = true;
      setText(button, 'Logging in…');
      try {
        await api('POST', '/_session', { json: { name, password } });
        form.elements.password.value = '';
        await loadSession();
        announce(`Logged in as ${session.name}.`);
        const target = afterLogin && !afterLogin.startsWith('#/login') ? afterLogin : '#/dbs';
        afterLogin = '#/dbs';
        firstRoute = false;
        navigate(target);
      } catch (err) {
        button.disabled = false;
        setText(button, 'Log in');
        const text = err instanceof ApiError && err.status === 401
          ? 'The user name or password is incorrect.'
          : describeError(err);
        error.append(h('p', { text }));
        form.elements.password.focus();
      }
    });
    root.append(
      h('section', { class: 'login-card card', 'aria-labelledby': 'login-title' },
        h('h1', { id: 'login-title', text: 'Log in to Recliner' }),
        h('p', { class: 'muted', text: 'Use a server admin or a user from the _users database.' }),
        form));
    form.elements.name.focus();
  }

  // -------------------------------------------------------------- dialogs

  /**
   * A modal confirmation. With `typeToConfirm`, the confirm button is enabled
   * only once that exact text is typed. Resolves true when confirmed.
   */
  function confirmDialog({ title, body, confirmLabel, typeToConfirm, danger = true }) {
    return new Promise((resolve) => {
      const inputId = uid('confirm-input');
      const titleId = uid('confirm-title');
      const confirm = h('button', { type: 'submit', class: danger ? 'btn btn-danger' : 'btn btn-primary', text: confirmLabel });
      const cancel = h('button', { type: 'button', class: 'btn', text: 'Cancel' });
      const form = h('form', { method: 'dialog' });
      const dialog = h('dialog', { class: 'dialog', 'aria-labelledby': titleId }, form);
      append(form, [
        h('h2', { id: titleId, text: title }),
        (Array.isArray(body) ? body : [body]).map((p) => h('p', { text: p })),
      ]);
      let input = null;
      if (typeToConfirm !== undefined) {
        input = h('input', { id: inputId, type: 'text', autocomplete: 'off', spellcheck: 'false' });
        form.append(h('div', { class: 'field' },
          h('label', { for: inputId }, 'Type ', h('strong', { class: 'mono', text: typeToConfirm }), ' to confirm'),
          input));
        confirm.disabled = true;
        input.addEventListener('input', () => {
          confirm.disabled = input.value !== typeToConfirm;
        });
      }
      form.append(h('div', { class: 'dialog-actions' }, cancel, confirm));
      let done = false;
      const finish = (value) => {
        if (done) return;
        done = true;
        if (dialog.open) dialog.close();
        dialog.remove();
        resolve(value);
      };
      cancel.addEventListener('click', () => finish(false));
      dialog.addEventListener('cancel', () => finish(false));
      form.addEventListener('submit', (event) => {
        event.preventDefault();
        if (input && input.value !== typeToConfirm) return;
        finish(true);
      });
      document.body.append(dialog);
      dialog.showModal();
      (input || cancel).focus();
    });
  }

  // -------------------------------------------------------------- databases

  const DB_NAME = /^[a-z][a-z0-9_$()+/-]*$/;

  async function renderDatabases(params) {
    const alive = startPage('Databases', 'dbs');
    const perPage = clampPerPage(params.get('per'));
    const pageNo = Math.max(1, Number.parseInt(params.get('page') || '1', 10) || 1);
    const prefix = params.get('prefix') || '';

    const q = { limit: perPage + 1, skip: (pageNo - 1) * perPage };
    if (prefix) {
      q.startkey = JSON.stringify(prefix);
      q.endkey = JSON.stringify(`${prefix}\ufff0`);
    }
    const names = await api('GET', '/_all_dbs', { params: q });
    if (!alive()) return;
    const hasNext = names.length > perPage;
    const shown = names.slice(0, perPage);
    let infos = [];
    if (shown.length) {
      infos = await api('POST', '/_dbs_info', { json: { keys: shown } });
      if (!alive()) return;
    }

    const root = clear(main());
    root.append(h('div', { class: 'page-head' },
      h('div', {}, h('h1', { text: 'Databases' }),
        h('p', { class: 'muted', text: prefix ? `Names starting with “${prefix}”` : 'Every database on this server.' }))));

    // Create and search.
    const createId = uid('create-db');
    const createError = h('div', { class: 'form-error', role: 'alert' });
    const createForm = h('form', { class: 'inline-form', 'aria-label': 'Create a database' },
      h('div', { class: 'field' },
        h('label', { for: createId, text: 'New database name' }),
        h('input', { id: createId, name: 'db', type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'e.g. inventory', 'aria-describedby': `${createId}-hint` }),
        h('p', { id: `${createId}-hint`, class: 'hint', text: 'Lowercase letters, digits and _ $ ( ) + - /; starts with a letter.' })),
      h('button', { type: 'submit', class: 'btn btn-primary', text: 'Create database' }),
      createError);
    createForm.addEventListener('submit', async (event) => {
      event.preventDefault();
      clear(createError);
      const name = createForm.elements.db.value.trim();
      if (!DB_NAME.test(name)) {
        createError.append(h('p', { text: name ? `“${name}” is not a valid database name.` : 'Enter a name for the database.' }));
        createForm.elements.db.focus();
        return;
      }
      try {
        await api('PUT', dbPath(name));
        announce(`Database ${name} created.`);
        navigate(link.db(name));
      } catch (err) {
        if (err instanceof ApiError && err.status === 401) return handlePageError(err);
        createError.append(h('p', { text: describeError(err) }));
      }
    });

    const searchId = uid('search-db');
    const searchForm = h('form', { class: 'inline-form', role: 'search', 'aria-label': 'Find databases' },
      h('div', { class: 'field' },
        h('label', { for: searchId, text: 'Find by name prefix' }),
        h('input', { id: searchId, name: 'prefix', type: 'search', value: prefix, autocomplete: 'off', spellcheck: 'false' })),
      h('button', { type: 'submit', class: 'btn', text: 'Search' }),
      prefix ? h('a', { class: 'btn btn-ghost', href: link.dbs({ per: perPage === 20 ? '' : perPage }), text: 'Clear' }) : null);
    searchForm.addEventListener('submit', (event) => {
      event.preventDefault();
      navigate(link.dbs({ prefix: searchForm.elements.prefix.value.trim(), per: perPage === 20 ? '' : perPage }));
    });
    root.append(h('div', { class: 'toolbar card' }, createForm, searchForm));

    // The table.
    const byName = new Map(infos.map((row) => [row.key, row]));
    const table = h('table', { class: 'table' },
      h('caption', { class: 'sr-only', text: 'Databases with document counts and sizes' }),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col', text: 'Name' }),
        h('th', { scope: 'col', class: 'num', text: 'Documents' }),
        h('th', { scope: 'col', class: 'num', text: 'Deleted' }),
        h('th', { scope: 'col', class: 'num', text: 'Data size' }),
        h('th', { scope: 'col', class: 'num', text: 'File size' }),
        h('th', { scope: 'col', class: 'num', text: 'Update seq' }),
        h('th', { scope: 'col', class: 'actions', text: 'Actions' }))));
    const tbody = h('tbody');
    for (const name of shown) {
      const row = byName.get(name);
      const info = row && row.info;
      const system = name.startsWith('_');
      tbody.append(h('tr', { dataset: { db: name } },
        h('th', { scope: 'row' }, h('a', { href: link.db(name), class: 'db-link', text: name }),
          system ? h('span', { class: 'tag', text: 'system' }) : null),
        h('td', { class: 'num', text: info ? fmtNumber(info.doc_count) : (row && row.error) || '—' }),
        h('td', { class: 'num', text: info ? fmtNumber(info.doc_del_count) : '—' }),
        h('td', { class: 'num', text: info && info.sizes ? fmtBytes(info.sizes.external) : '—' }),
        h('td', { class: 'num', text: info && info.sizes ? fmtBytes(info.sizes.file) : '—' }),
        h('td', { class: 'num', text: info ? shortSeq(info.update_seq) : '—' }),
        h('td', { class: 'actions' }, h('button', {
          type: 'button',
          class: 'btn btn-danger-ghost btn-small',
          'aria-label': `Delete database ${name}`,
          text: 'Delete',
          onclick: () => deleteDatabase(name, () => route()),
        }))));
    }
    table.append(tbody);
    if (!shown.length) {
      root.append(h('div', { class: 'card empty' },
        h('p', { text: prefix ? `No database name starts with “${prefix}”.` : pageNo > 1 ? 'No more databases.' : 'There are no databases yet. Create one above.' })));
    } else {
      root.append(h('div', { class: 'card table-card' }, h('div', { class: 'table-scroll' }, table)));
    }
    root.append(pager({
      pageNo,
      hasNext,
      count: shown.length,
      perPage,
      label: 'Database pages',
      href: (p, per) => link.dbs({ page: p > 1 ? p : '', prefix, per: per === 20 ? '' : per }),
    }));
  }

  async function deleteDatabase(name, then) {
    const ok = await confirmDialog({
      title: `Delete database ${name}?`,
      body: ['This deletes the database and every document and attachment in it. It cannot be undone.'],
      confirmLabel: 'Delete database',
      typeToConfirm: name,
    });
    if (!ok) return;
    try {
      await api('DELETE', dbPath(name));
      announce(`Database ${name} deleted.`);
      then();
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) return handlePageError(err);
      announce(describeError(err), 'error');
    }
  }

  function clampPerPage(value) {
    const n = Number.parseInt(value || '20', 10);
    return [10, 20, 50, 100].includes(n) ? n : 20;
  }

  /** Previous / next links and a page size choice. */
  function pager({ pageNo, hasNext, count, perPage, label, href }) {
    const perId = uid('per-page');
    const select = h('select', { id: perId },
      [10, 20, 50, 100].map((n) => h('option', { value: String(n), selected: n === perPage ? true : null, text: String(n) })));
    select.addEventListener('change', () => navigate(href(1, Number(select.value))));
    const first = (pageNo - 1) * perPage + 1;
    return h('nav', { class: 'pager', 'aria-label': label },
      pageNo > 1
        ? h('a', { class: 'btn', href: href(pageNo - 1, perPage), rel: 'prev', text: '← Previous' })
        : h('span', { class: 'btn', 'aria-disabled': 'true', text: '← Previous' }),
      h('span', { class: 'pager-info', text: count ? `Page ${pageNo} · rows ${fmtNumber(first)}–${fmtNumber(first + count - 1)}` : `Page ${pageNo}` }),
      hasNext
        ? h('a', { class: 'btn', href: href(pageNo + 1, perPage), rel: 'next', text: 'Next →' })
        : h('span', { class: 'btn', 'aria-disabled': 'true', text: 'Next →' }),
      h('span', { class: 'pager-size' }, h('label', { for: perId, text: 'Rows per page' }), select));
  }

  // --------------------------------------------------------------- database

  async function renderDatabase(db, params) {
    const alive = startPage(db, 'dbs');
    const perPage = clampPerPage(params.get('per'));
    const pageNo = Math.max(1, Number.parseInt(params.get('page') || '1', 10) || 1);
    const prefix = params.get('prefix') || '';
    const q = { limit: perPage + 1, skip: (pageNo - 1) * perPage, include_docs: 'true', conflicts: 'true' };
    if (prefix) {
      q.startkey = JSON.stringify(prefix);
      q.endkey = JSON.stringify(`${prefix}\ufff0`);
    }
    const [info, docs] = await Promise.all([
      api('GET', dbPath(db)),
      api('GET', `${dbPath(db)}/_all_docs`, { params: q }),
    ]);
    if (!alive()) return;
    const rows = docs.rows.slice(0, perPage);
    const hasNext = docs.rows.length > perPage;

    const root = clear(main());
    root.append(breadcrumbs([['Databases', link.dbs()], [db, null]]));
    root.append(h('div', { class: 'page-head' },
      h('div', {}, h('h1', { class: 'break', text: db }),
        h('p', { class: 'muted', text: 'Database' })),
      h('div', { class: 'page-actions' },
        h('a', { class: 'btn btn-primary', href: link.newDoc(db), text: 'New document' }),
        h('button', { type: 'button', class: 'btn btn-danger-ghost', text: 'Delete database', onclick: () => deleteDatabase(db, () => navigate(link.dbs())) }))));

    root.append(h('dl', { class: 'stats' },
      stat('Documents', fmtNumber(info.doc_count)),
      stat('Deleted documents', fmtNumber(info.doc_del_count)),
      stat('Data size', fmtBytes(info.sizes && info.sizes.external)),
      stat('File size', fmtBytes(info.sizes && info.sizes.file)),
      stat('Update sequence', shortSeq(info.update_seq))));

    const searchId = uid('search-doc');
    const searchForm = h('form', { class: 'inline-form', role: 'search', 'aria-label': 'Find documents' },
      h('div', { class: 'field' },
        h('label', { for: searchId, text: 'Document ID starts with' }),
        h('input', { id: searchId, name: 'prefix', type: 'search', value: prefix, autocomplete: 'off', spellcheck: 'false' })),
      h('button', { type: 'submit', class: 'btn', text: 'Search' }),
      prefix ? h('a', { class: 'btn btn-ghost', href: link.db(db, { per: perPage === 20 ? '' : perPage }), text: 'Clear' }) : null);
    searchForm.addEventListener('submit', (event) => {
      event.preventDefault();
      navigate(link.db(db, { prefix: searchForm.elements.prefix.value, per: perPage === 20 ? '' : perPage }));
    });
    root.append(h('div', { class: 'toolbar toolbar-single card' }, searchForm));

    if (!rows.length) {
      root.append(h('div', { class: 'card empty' }, h('p', {
        text: prefix ? `No document ID starts with “${prefix}”.` : pageNo > 1 ? 'No more documents.' : 'This database has no documents yet.',
      })));
    } else {
      const tbody = h('tbody');
      for (const row of rows) {
        const doc = row.doc || {};
        const conflicts = doc._conflicts ? doc._conflicts.length : 0;
        const atts = doc._attachments ? Object.keys(doc._attachments).length : 0;
        const fields = Object.keys(doc).filter((k) => !k.startsWith('_')).length;
        tbody.append(h('tr', { dataset: { id: row.id } },
          h('th', { scope: 'row' }, h('a', { href: link.doc(db, row.id), class: 'mono break', text: row.id })),
          h('td', { class: 'mono muted', text: row.value && row.value.rev }),
          h('td', { class: 'num', text: fmtNumber(fields) }),
          h('td', { class: 'num', text: atts ? fmtNumber(atts) : '—' }),
          h('td', {}, conflicts
            ? h('span', { class: 'badge badge-warn', text: `${conflicts} conflict${conflicts > 1 ? 's' : ''}` })
            : h('span', { class: 'muted', text: 'None' }))));
      }
      root.append(h('div', { class: 'card table-card' }, h('div', { class: 'table-scroll' },
        h('table', { class: 'table' },
          h('caption', { class: 'sr-only', text: `Documents of ${db}` }),
          h('thead', {}, h('tr', {},
            h('th', { scope: 'col', text: 'ID' }),
            h('th', { scope: 'col', text: 'Revision' }),
            h('th', { scope: 'col', class: 'num', text: 'Fields' }),
            h('th', { scope: 'col', class: 'num', text: 'Attachments' }),
            h('th', { scope: 'col', text: 'Conflicts' }))),
          tbody))));
    }
    root.append(pager({
      pageNo,
      hasNext,
      count: rows.length,
      perPage,
      label: 'Document pages',
      href: (p, per) => link.db(db, { page: p > 1 ? p : '', prefix, per: per === 20 ? '' : per }),
    }));
  }

  function stat(label, value) {
    return h('div', { class: 'stat' }, h('dt', { text: label }), h('dd', { text: value }));
  }

  function breadcrumbs(items) {
    return h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' },
      h('ol', {}, items.map(([text, href]) => h('li', {},
        href ? h('a', { href, text }) : h('span', { 'aria-current': 'page', text })))));
  }

  // --------------------------------------------------------------- document

  async function renderNewDocument(db) {
    const alive = startPage(`New document in ${db}`, 'dbs');
    await api('GET', dbPath(db));
    if (!alive()) return;
    const root = clear(main());
    root.append(breadcrumbs([['Databases', link.dbs()], [db, link.db(db)], ['New document', null]]));
    root.append(h('div', { class: 'page-head' }, h('div', {}, h('h1', { text: 'New document' }),
      h('p', { class: 'muted', text: `In ${db}. Leave out _id to let the server choose one.` }))));
    const id = typeof crypto !== 'undefined' && crypto.randomUUID ? crypto.randomUUID().replace(/-/g, '') : '';
    const editor = jsonEditor({
      initial: JSON.stringify(id ? { _id: id } : {}, null, 2),
      saveLabel: 'Create document',
      onSave: async (doc) => {
        const res = doc._id
          ? await api('PUT', docPath(db, doc._id), { json: doc })
          : await api('POST', dbPath(db), { json: doc });
        announce(`Document ${res.id} created.`);
        navigate(link.doc(db, res.id));
      },
    });
    root.append(h('section', { class: 'card', 'aria-labelledby': editor.headingId }, editor.el));
    editor.textarea.focus();
  }

  /** A JSON text area that validates as you type; `onSave(doc)` may throw. */
  function jsonEditor({ initial, saveLabel, onSave, expectId, extraButtons = [] }) {
    const areaId = uid('json');
    const msgId = uid('json-msg');
    const headingId = uid('json-heading');
    const textarea = h('textarea', {
      id: areaId, class: 'code', spellcheck: 'false', autocomplete: 'off', autocapitalize: 'none',
      rows: 18, 'aria-describedby': msgId, wrap: 'off',
    });
    textarea.value = initial;
    textarea.rows = Math.min(30, Math.max(10, initial.split('\n').length + 2));
    const message = h('div', { id: msgId, class: 'json-msg', 'aria-live': 'polite' });
    const save = h('button', { type: 'submit', class: 'btn btn-primary', text: saveLabel });
    const form = h('form', { class: 'editor' },
      h('div', { class: 'editor-head' },
        h('h2', { id: headingId }, h('label', { for: areaId, text: 'Document JSON' }))),
      textarea, message,
      h('div', { class: 'editor-actions' }, save, ...extraButtons));

    function check() {
      const text = textarea.value;
      let doc;
      try {
        doc = JSON.parse(text);
      } catch (err) {
        return { error: `Invalid JSON: ${parseErrorText(err, text)}` };
      }
      if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) {
        return { error: 'A document must be a JSON object ({ … }).' };
      }
      if (expectId !== undefined && doc._id !== undefined && doc._id !== expectId) {
        return { error: `The _id must stay “${expectId}” (create a new document to use another ID).` };
      }
      if (doc._id !== undefined && (typeof doc._id !== 'string' || doc._id === '')) {
        return { error: '_id must be a non-empty string.' };
      }
      return { doc };
    }

    function showCheck() {
      const result = check();
      clear(message);
      if (result.error) {
        message.className = 'json-msg json-msg-error';
        message.append(h('span', { class: 'icon', 'aria-hidden': 'true', text: '✕' }), ' ', result.error);
        textarea.setAttribute('aria-invalid', 'true');
        save.disabled = true;
      } else {
        message.className = 'json-msg json-msg-ok';
        message.append(h('span', { class: 'icon', 'aria-hidden': 'true', text: '✓' }), ' Valid JSON');
        textarea.removeAttribute('aria-invalid');
        save.disabled = false;
      }
      return result;
    }

    let timer = null;
    textarea.addEventListener('input', () => {
      clearTimeout(timer);
      timer = setTimeout(showCheck, 150);
    });
    textarea.addEventListener('keydown', (event) => {
      // Tab indents inside the editor; Escape then Tab leaves it (keyboard users).
      if (event.key === 'Tab' && !event.shiftKey && !textarea.dataset.escaped) {
        event.preventDefault();
        const { selectionStart: s, selectionEnd: e } = textarea;
        textarea.setRangeText('  ', s, e, 'end');
        textarea.dispatchEvent(new Event('input'));
      } else if (event.key === 'Escape') {
        textarea.dataset.escaped = '1';
      } else {
        delete textarea.dataset.escaped;
      }
    });
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      clearTimeout(timer);
      const result = showCheck();
      if (result.error) {
        textarea.focus();
        return;
      }
      save.disabled = true;
      try {
        await onSave(result.doc);
      } catch (err) {
        if (err instanceof ApiError && err.status === 401) {
          handlePageError(err);
          return;
        }
        clear(message);
        message.className = 'json-msg json-msg-error';
        message.append(h('span', { class: 'icon', 'aria-hidden': 'true', text: '✕' }), ` Not saved. ${describeError(err)}`);
        message.setAttribute('role', 'alert');
      } finally {
        save.disabled = false;
      }
    });
    showCheck();
    return { el: form, textarea, headingId, setText: (text) => { textarea.value = text; showCheck(); } };
  }

  /** Where and why `text` is not JSON: "line 3, column 8: expected …". */
  function parseErrorText(err, text) {
    const found = locateJsonError(text);
    if (!found) return String(err.message || err).slice(0, 200);
    const before = text.slice(0, found.pos);
    const line = before.split('\n').length;
    const column = found.pos - before.lastIndexOf('\n');
    return `line ${line}, column ${column}: ${found.msg}`;
  }

  /** A small JSON scanner that finds the first error (JSON.parse does not say where in every browser). */
  function locateJsonError(text) {
    const LITERAL = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null/y;
    const ESCAPE = /\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})/y;
    let i = 0;
    const fail = (msg) => {
      const e = new Error(msg);
      e.pos = i;
      throw e;
    };
    const ws = () => {
      while (i < text.length && ' \t\n\r'.includes(text[i])) i += 1;
    };
    const string = () => {
      i += 1;
      while (i < text.length) {
        const c = text[i];
        if (c === '"') {
          i += 1;
          return;
        }
        if (c === '\\') {
          ESCAPE.lastIndex = i;
          const m = ESCAPE.exec(text);
          if (!m) fail('invalid escape in a string');
          i += m[0].length;
        } else if (c < ' ') {
          fail(c === '\n' ? 'line break inside a string (missing closing quote?)' : 'control character inside a string');
        } else {
          i += 1;
        }
      }
      fail('unterminated string');
    };
    const value = () => {
      ws();
      const c = text[i];
      if (c === '{') {
        i += 1;
        ws();
        if (text[i] === '}') {
          i += 1;
          return;
        }
        for (;;) {
          ws();
          if (text[i] !== '"') fail(text[i] === '}' ? 'trailing comma before “}”' : 'expected a property name in double quotes');
          string();
          ws();
          if (text[i] !== ':') fail('expected “:” after the property name');
          i += 1;
          value();
          ws();
          if (text[i] === ',') {
            i += 1;
          } else if (text[i] === '}') {
            i += 1;
            return;
          } else {
            fail('expected “,” or “}”');
          }
        }
      }
      if (c === '[') {
        i += 1;
        ws();
        if (text[i] === ']') {
          i += 1;
          return;
        }
        for (;;) {
          ws();
          if (text[i] === ']') fail('trailing comma before “]”');
          value();
          ws();
          if (text[i] === ',') {
            i += 1;
          } else if (text[i] === ']') {
            i += 1;
            return;
          } else {
            fail('expected “,” or “]”');
          }
        }
      }
      if (c === '"') {
        string();
        return;
      }
      if (c === undefined) fail('unexpected end of the text');
      LITERAL.lastIndex = i;
      const m = LITERAL.exec(text);
      if (!m) fail(c === "'" ? 'strings need double quotes' : `unexpected “${c}”`);
      i += m[0].length;
    };
    try {
      value();
      ws();
      if (i < text.length) fail('unexpected text after the end of the document');
      return null;
    } catch (e) {
      return { pos: e.pos, msg: e.message };
    }
  }

  async function renderDocument(db, id) {
    const alive = startPage(id, 'dbs');
    const base = docPath(db, id);
    const [doc, leaves] = await Promise.all([
      api('GET', base, { params: { conflicts: 'true', deleted_conflicts: 'true', revs_info: 'true' } }),
      api('GET', base, { params: { open_revs: 'all', revs: 'true' } }),
    ]);
    if (!alive()) return;
    const rev = doc._rev;
    const conflicts = doc._conflicts || [];

    const root = clear(main());
    root.append(breadcrumbs([['Databases', link.dbs()], [db, link.db(db)], [id, null]]));
    root.append(h('div', { class: 'page-head' },
      h('div', {}, h('h1', { class: 'mono break', text: id }),
        h('p', { class: 'muted' }, 'Current revision ', h('span', { class: 'mono', text: rev })))));

    if (conflicts.length) {
      root.append(h('div', { class: 'callout callout-warn', role: 'note' },
        h('p', {}, h('strong', { text: `This document has ${conflicts.length} conflicting revision${conflicts.length > 1 ? 's' : ''}.` }),
          ' Compare them below and pick the one to keep. ',
          h('a', { href: '#conflicts', text: 'Resolve the conflict', onclick: (e) => { e.preventDefault(); const el = document.getElementById('conflicts'); if (el) { el.scrollIntoView({ block: 'start' }); el.focus(); } } }))));
    }

    // The editor: the body without the fields the server adds for reading.
    const body = { ...doc };
    delete body._conflicts;
    delete body._deleted_conflicts;
    delete body._revs_info;
    const deleteButton = h('button', { type: 'button', class: 'btn btn-danger-ghost', text: 'Delete document' });
    const reloadButton = h('button', { type: 'button', class: 'btn', text: 'Reload', onclick: () => route() });
    const editor = jsonEditor({
      initial: JSON.stringify(body, null, 2),
      saveLabel: 'Save changes',
      expectId: id,
      extraButtons: [reloadButton, deleteButton],
      onSave: async (edited) => {
        const res = await api('PUT', base, { json: { ...edited, _id: id } });
        announce(`Saved ${id}: revision ${res.rev}.`);
        route();
      },
    });
    deleteButton.addEventListener('click', async () => {
      const ok = await confirmDialog({
        title: `Delete document ${id}?`,
        body: [`Revision ${rev} gets a deleted successor; the document disappears from the database.`],
        confirmLabel: 'Delete document',
      });
      if (!ok) return;
      try {
        await api('DELETE', base, { params: { rev } });
        announce(`Document ${id} deleted.`);
        navigate(link.db(db));
      } catch (err) {
        if (err instanceof ApiError && err.status === 401) return handlePageError(err);
        announce(describeError(err), 'error');
      }
    });

    root.append(h('div', { class: 'doc-grid' },
      h('section', { class: 'card', 'aria-labelledby': editor.headingId }, editor.el),
      attachmentsSection(db, id, doc)));
    root.append(revisionsSection(db, id, doc, leaves));
  }

  function attachmentsSection(db, id, doc) {
    const atts = doc._attachments || {};
    const names = Object.keys(atts).sort();
    const headingId = uid('att-heading');
    const list = h('ul', { class: 'att-list' });
    for (const name of names) {
      const att = atts[name];
      list.append(h('li', { class: 'att', dataset: { name } },
        h('div', { class: 'att-main' },
          h('a', { href: attPath(db, id, name), class: 'att-name break', text: name, download: name.split('/').pop() }),
          h('span', { class: 'muted small', text: `${att.content_type || 'unknown type'} · ${fmtBytes(att.length)}` })),
        h('button', {
          type: 'button', class: 'btn btn-danger-ghost btn-small', text: 'Delete', 'aria-label': `Delete attachment ${name}`,
          onclick: async () => {
            const ok = await confirmDialog({ title: `Delete attachment ${name}?`, body: ['The document gets a new revision without it.'], confirmLabel: 'Delete attachment' });
            if (!ok) return;
            try {
              await api('DELETE', attPath(db, id, name), { params: { rev: doc._rev } });
              announce(`Attachment ${name} deleted.`);
              route();
            } catch (err) {
              if (err instanceof ApiError && err.status === 401) return handlePageError(err);
              announce(describeError(err), 'error');
            }
          },
        })));
    }
    const fileId = uid('file');
    const error = h('div', { class: 'form-error', role: 'alert' });
    const upload = h('button', { type: 'submit', class: 'btn', text: 'Upload' });
    const form = h('form', { class: 'upload' },
      h('div', { class: 'field' },
        h('label', { for: fileId, text: 'Add an attachment' }),
        h('input', { id: fileId, name: 'file', type: 'file' })),
      upload, error);
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      clear(error);
      const file = form.elements.file.files[0];
      if (!file) {
        error.append(h('p', { text: 'Choose a file first.' }));
        form.elements.file.focus();
        return;
      }
      upload.disabled = true;
      setText(upload, 'Uploading…');
      try {
        await api('PUT', attPath(db, id, file.name), {
          params: { rev: doc._rev },
          body: file,
          headers: { 'Content-Type': file.type || 'application/octet-stream' },
        });
        announce(`Attachment ${file.name} uploaded (${fmtBytes(file.size)}).`);
        route();
      } catch (err) {
        upload.disabled = false;
        setText(upload, 'Upload');
        if (err instanceof ApiError && err.status === 401) return handlePageError(err);
        error.append(h('p', { text: describeError(err) }));
      }
    });
    return h('section', { class: 'card', 'aria-labelledby': headingId },
      h('h2', { id: headingId, text: `Attachments (${names.length})` }),
      names.length ? list : h('p', { class: 'muted', text: 'No attachments.' }),
      form);
  }

  /** The revision tree drawn from open_revs=all with _revisions, and the conflict resolver. */
  function revisionsSection(db, id, doc, leafAnswers) {
    const winner = doc._rev;
    const leaves = leafAnswers.filter((x) => x.ok).map((x) => x.ok);
    const nodes = new Map();
    const revPos = (r) => Number.parseInt(r, 10);
    // Order branches: the winner first, then live leaves, then deleted ones.
    leaves.sort((a, b) => {
      const rank = (d) => (d._rev === winner ? 0 : d._deleted ? 2 : 1);
      return rank(a) - rank(b) || revPos(b._rev) - revPos(a._rev) || (a._rev < b._rev ? 1 : -1);
    });
    let row = 0;
    for (const leaf of leaves) {
      const revs = leaf._revisions
        ? leaf._revisions.ids.map((hash, i) => `${leaf._revisions.start - i}-${hash}`)
        : [leaf._rev];
      let child = null;
      let usedRow = false;
      for (const r of revs) {
        let node = nodes.get(r);
        const existed = Boolean(node);
        if (!node) {
          node = { rev: r, pos: revPos(r), row, children: new Set(), parent: null, leaf: null };
          nodes.set(r, node);
          usedRow = true;
        }
        if (child) {
          child.parent = r;
          node.children.add(child.rev);
        }
        if (existed) break;
        child = node;
      }
      nodes.get(leaf._rev).leaf = leaf;
      if (usedRow) row += 1;
    }
    const rows = Math.max(1, row);
    const minPos = Math.min(...[...nodes.values()].map((n) => n.pos));
    const maxPos = Math.max(...[...nodes.values()].map((n) => n.pos));
    const colW = 170;
    const rowH = 56;
    const padX = 24;
    const padY = 28;
    const width = padX * 2 + (maxPos - minPos) * colW + 130;
    const height = padY * 2 + (rows - 1) * rowH + 10;
    const x = (n) => padX + 8 + (n.pos - minPos) * colW;
    const y = (n) => padY + n.row * rowH;
    const liveLeaves = leaves.filter((l) => !l._deleted);
    const conflicted = liveLeaves.length > 1;

    const svg = h('svg', {
      class: 'revtree', viewBox: `0 0 ${width} ${height}`, width, height, role: 'img',
      'aria-label': `Revision tree: ${nodes.size} revisions, ${leaves.length} leaf revision${leaves.length === 1 ? '' : 's'}${conflicted ? `, ${liveLeaves.length - 1} in conflict` : ''}.`,
    });
    const edges = h('g', { class: 'edges' });
    const dots = h('g', { class: 'nodes' });
    for (const node of nodes.values()) {
      if (node.parent) {
        const parent = nodes.get(node.parent);
        const x1 = x(parent);
        const y1 = y(parent);
        const x2 = x(node);
        const y2 = y(node);
        const d = y1 === y2
          ? `M${x1} ${y1}H${x2}`
          : `M${x1} ${y1}C${x1 + colW * 0.5} ${y1} ${x2 - colW * 0.5} ${y2} ${x2} ${y2}`;
        edges.append(h('path', { d, class: 'edge' }));
      }
      let kind = 'inner';
      let label = 'ancestor';
      if (node.leaf) {
        if (node.rev === winner) {
          kind = 'winner';
          label = 'winner';
        } else if (node.leaf._deleted) {
          kind = 'deleted';
          label = 'deleted leaf';
        } else {
          kind = 'conflict';
          label = 'conflict';
        }
      }
      const [, hash = ''] = node.rev.split('-');
      dots.append(h('g', { class: `node node-${kind}`, dataset: { rev: node.rev } },
        h('title', { text: `${node.rev} (${label})` }),
        h('circle', { cx: x(node), cy: y(node), r: node.leaf ? 9 : 7 }),
        h('text', { x: x(node) + 15, y: y(node) - 6, class: 'rev-label' }, `${node.pos}-${hash.slice(0, 7)}`),
        node.leaf ? h('text', { x: x(node) + 15, y: y(node) + 13, class: `rev-kind rev-kind-${kind}` }, label) : null));
    }
    svg.append(edges, dots);

    const headingId = 'revisions-heading';
    const section = h('section', { class: 'card', 'aria-labelledby': headingId, id: 'revisions' },
      h('h2', { id: headingId, text: 'Revisions' }),
      h('p', { class: 'muted', text: `${nodes.size} known revision${nodes.size === 1 ? '' : 's'} (older ones may have been pruned), ${leaves.length} leaf revision${leaves.length === 1 ? '' : 's'}.` }),
      h('div', { class: 'revtree-scroll', tabindex: '0', 'aria-label': 'Revision tree (scrollable)' }, svg),
      h('ul', { class: 'legend', 'aria-label': 'Legend' },
        h('li', {}, h('span', { class: 'swatch swatch-winner' }), 'Winning revision'),
        h('li', {}, h('span', { class: 'swatch swatch-conflict' }), 'Conflicting leaf'),
        h('li', {}, h('span', { class: 'swatch swatch-deleted' }), 'Deleted leaf'),
        h('li', {}, h('span', { class: 'swatch swatch-inner' }), 'Ancestor')));

    // The leaves as a table (readable without the picture) and, with
    // conflicts, a form to keep one and delete the other live leaves.
    const resolver = h('form', { class: 'resolver', id: 'conflicts', tabindex: '-1' });
    const fieldset = h('fieldset', {},
      h('legend', { text: conflicted ? 'Pick the revision to keep' : 'Leaf revisions' }));
    const choiceName = uid('winner');
    for (const leaf of leaves) {
      const isWinner = leaf._rev === winner;
      const choiceId = uid('leaf');
      const preview = { ...leaf };
      delete preview._revisions;
      const kind = isWinner ? 'Winner' : leaf._deleted ? 'Deleted' : 'Conflict';
      fieldset.append(h('div', { class: `leaf leaf-${kind.toLowerCase()}`, dataset: { rev: leaf._rev } },
        h('div', { class: 'leaf-head' },
          conflicted && !leaf._deleted
            ? h('input', { type: 'radio', name: choiceName, id: choiceId, value: leaf._rev, checked: isWinner })
            : null,
          h(conflicted && !leaf._deleted ? 'label' : 'span', { for: conflicted && !leaf._deleted ? choiceId : null, class: 'leaf-rev mono', text: leaf._rev }),
          h('span', { class: `badge badge-${kind === 'Winner' ? 'ok' : kind === 'Conflict' ? 'warn' : 'muted'}`, text: kind })),
        h('details', { open: conflicted && leaves.length <= 3 && !leaf._deleted ? true : null },
          h('summary', { text: 'Content' }),
          h('pre', { class: 'code small', text: JSON.stringify(preview, null, 2) }))));
    }
    resolver.append(fieldset);
    if (conflicted) {
      const error = h('div', { class: 'form-error', role: 'alert' });
      const button = h('button', { type: 'submit', class: 'btn btn-primary', text: 'Keep selected revision' });
      resolver.append(h('p', { class: 'hint', text: 'The other live leaf revisions are deleted (as new deleted revisions), so the one you keep becomes the only winner.' }),
        h('div', { class: 'editor-actions' }, button), error);
      resolver.addEventListener('submit', async (event) => {
        event.preventDefault();
        clear(error);
        const chosen = resolver.elements[choiceName] && resolver.elements[choiceName].value;
        if (!chosen) {
          error.append(h('p', { text: 'Choose a revision to keep.' }));
          return;
        }
        const losers = liveLeaves.filter((l) => l._rev !== chosen);
        const ok = await confirmDialog({
          title: 'Resolve the conflict?',
          body: [`Keep ${chosen} and delete ${losers.length} other revision${losers.length > 1 ? 's' : ''}: ${losers.map((l) => l._rev).join(', ')}.`],
          confirmLabel: 'Keep and delete others',
          danger: false,
        });
        if (!ok) return;
        button.disabled = true;
        try {
          const results = await api('POST', `${dbPath(db)}/_bulk_docs`, {
            json: { docs: losers.map((l) => ({ _id: id, _rev: l._rev, _deleted: true })) },
          });
          const failed = results.filter((r) => r.error);
          if (failed.length) {
            throw new Error(`Some revisions were not deleted: ${failed.map((r) => `${r.error} (${r.reason || ''})`).join('; ')}`);
          }
          announce(`Conflict resolved: ${chosen} is the winner.`);
          route();
        } catch (err) {
          button.disabled = false;
          if (err instanceof ApiError && err.status === 401) return handlePageError(err);
          error.append(h('p', { text: describeError(err) }));
        }
      });
    }
    section.append(h('h3', { text: conflicted ? 'Conflicts' : 'Leaf revisions' }), resolver);
    return section;
  }

  // ------------------------------------------------------------ replication

  const POLL_MS = 1000;
  const WINDOW_MS = 3 * 60 * 1000;
  const SERIES_COLORS = ['#0891b2', '#db2777', '#ca8a04', '#16a34a', '#ea580c', '#7c3aed'];
  const STATES = {
    running: { label: 'Running', cls: 'running' },
    pending: { label: 'Pending', cls: 'pending' },
    crashing: { label: 'Crashing', cls: 'crashing' },
    completed: { label: 'Completed', cls: 'completed' },
    failed: { label: 'Failed', cls: 'failed' },
    error: { label: 'Error', cls: 'failed' },
    initializing: { label: 'Starting', cls: 'pending' },
    stopped: { label: 'Stopped', cls: 'stopped' },
  };

  // Kept across visits of the page (not across reloads): samples for the
  // chart, and jobs this console stopped (the server then lists them as pending).
  const replicationMemory = {
    samples: new Map(), // key -> [{t, w}]
    rates: new Map(), // key -> [{t, r}]
    totals: [], // [{t, r}]
    seen: new Set(),
    firstPollDone: false,
    stopped: new Set(),
    labels: new Map(),
    colors: new Map(),
    endpoints: new Map(), // doc key -> {source, target} read from the doc
    counters: new Map(), // key -> last counters seen
    activity: new Map(), // key -> when the counters last changed
  };

  async function renderReplication() {
    const alive = startPage('Replication', 'replication');
    const root = clear(main());
    root.append(h('div', { class: 'page-head' },
      h('div', {}, h('h1', { text: 'Replication' }),
        h('p', { class: 'muted', text: 'Start replications and watch every job of the server live.' }))));

    root.append(replicationForm());

    // The live part.
    const liveText = h('span', { class: 'live-text', text: 'Connecting…' });
    const liveDot = h('span', { class: 'live-dot', 'aria-hidden': 'true' });
    let paused = false;
    const pauseButton = h('button', { type: 'button', class: 'btn btn-small', 'aria-pressed': 'false', text: 'Pause updates' });
    pauseButton.addEventListener('click', () => {
      paused = !paused;
      pauseButton.setAttribute('aria-pressed', String(paused));
      setText(pauseButton, paused ? 'Resume updates' : 'Pause updates');
      liveDot.classList.toggle('paused', paused);
      if (!paused) poll();
    });
    const pollError = h('div', { class: 'form-error', role: 'alert' });

    const chart = throughputChart();
    root.append(h('section', { class: 'card', 'aria-labelledby': 'throughput-heading' },
      h('div', { class: 'section-head' },
        h('h2', { id: 'throughput-heading', text: 'Throughput' }),
        h('div', { class: 'live' }, liveDot, liveText, pauseButton)),
      pollError,
      chart.el));

    const jobsCount = h('span', { class: 'count', text: '' });
    const summary = h('p', { class: 'muted jobs-summary', text: '' });
    const jobsList = h('div', { class: 'jobs', id: 'jobs' });
    const empty = h('div', { class: 'card empty', hidden: true }, h('p', { text: 'No replication jobs. Start one with the form above.' }));
    root.append(h('section', { 'aria-labelledby': 'jobs-heading', class: 'jobs-section' },
      h('div', { class: 'section-head' }, h('h2', { id: 'jobs-heading', tabindex: '-1' }, 'Jobs ', jobsCount), summary),
      empty, jobsList));

    const cards = new Map();
    let timer = null;
    onCleanup(() => clearTimeout(timer));

    async function poll() {
      clearTimeout(timer);
      if (!alive()) return;
      try {
        const [jobs, docs] = await Promise.all([
          api('GET', '/_scheduler/jobs'),
          api('GET', '/_scheduler/docs'),
        ]);
        if (!alive()) return;
        clear(pollError);
        const list = mergeJobs(jobs.jobs || [], docs.docs || []);
        record(list);
        fillMissingEndpoints(list);
        updateCards(list);
        chart.draw(list);
        const now = new Date();
        setText(liveText, paused ? `Paused · last update ${fmtTime(now)}` : `Live · updated ${fmtTime(now)}`);
      } catch (err) {
        if (!alive()) return;
        if (err instanceof ApiError && err.status === 401) {
          handlePageError(err);
          return;
        }
        clear(pollError);
        pollError.append(h('p', { text: `Live update failed: ${describeError(err)} Retrying…` }));
        setText(liveText, 'Reconnecting…');
      }
      if (!paused && alive()) timer = setTimeout(poll, POLL_MS);
    }

    function updateCards(list) {
      const present = new Set(list.map((j) => j.key));
      for (const [key, card] of cards) {
        if (!present.has(key)) {
          if (card.el.contains(document.activeElement)) document.getElementById('jobs-heading').focus();
          card.el.remove();
          cards.delete(key);
        }
      }
      // New cards go in sorted position; existing ones never move (focus stays).
      list.forEach((job, index) => {
        let card = cards.get(job.key);
        if (!card) {
          card = jobCard(job, poll);
          cards.set(job.key, card);
          const next = list.slice(index + 1).map((j) => cards.get(j.key)).find(Boolean);
          jobsList.insertBefore(card.el, next ? next.el : null);
        }
        card.update(job);
      });
      empty.hidden = list.length > 0;
      setText(jobsCount, `(${list.length})`);
      const counts = {};
      for (const job of list) counts[job.state] = (counts[job.state] || 0) + 1;
      setText(summary, Object.entries(counts).map(([s, n]) => `${n} ${(STATES[s] || { label: s }).label.toLowerCase()}`).join(' · '));
    }

    await poll();
  }

  function replicationForm() {
    const error = h('div', { class: 'form-error', role: 'alert' });
    const endpointFields = (role, example) => {
      const urlId = uid(`${role}-url`);
      const userId = uid(`${role}-user`);
      const passId = uid(`${role}-pass`);
      const title = role === 'source' ? 'Source' : 'Target';
      return h('fieldset', { class: 'endpoint' },
        h('legend', { text: title }),
        h('div', { class: 'field' },
          h('label', { for: urlId, text: 'Database name or URL' }),
          h('input', { id: urlId, name: `${role}`, type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: example, 'aria-describedby': `${urlId}-hint` }),
          h('p', { id: `${urlId}-hint`, class: 'hint', text: 'A database on this server, or http(s)://host:port/db' })),
        h('div', { class: 'field-row' },
          h('div', { class: 'field' },
            h('label', { for: userId, text: 'Username (optional)' }),
            h('input', { id: userId, name: `${role}User`, type: 'text', autocomplete: 'off', spellcheck: 'false' })),
          h('div', { class: 'field' },
            h('label', { for: passId, text: 'Password (optional)' }),
            h('input', { id: passId, name: `${role}Pass`, type: 'password', autocomplete: 'new-password' }))));
    };
    const continuousId = uid('continuous');
    const createId = uid('create-target');
    const nameId = uid('job-name');
    const submit = h('button', { type: 'submit', class: 'btn btn-primary', text: 'Start replication' });
    const form = h('form', { class: 'rep-form', 'aria-labelledby': 'new-rep-heading' },
      h('div', { class: 'endpoints' }, endpointFields('source', 'e.g. inventory'), h('div', { class: 'arrow', 'aria-hidden': 'true', text: '→' }), endpointFields('target', 'e.g. https://backup.example.com/inventory')),
      h('div', { class: 'rep-options' },
        h('div', { class: 'check' }, h('input', { id: continuousId, name: 'continuous', type: 'checkbox' }), h('label', { for: continuousId, text: 'Continuous (keep following changes)' })),
        h('div', { class: 'check' }, h('input', { id: createId, name: 'createTarget', type: 'checkbox', checked: true }), h('label', { for: createId, text: 'Create the target if missing' })),
        h('div', { class: 'field field-inline' },
          h('label', { for: nameId, text: 'Job name (optional)' }),
          h('input', { id: nameId, name: 'jobName', type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'generated' })),
        submit),
      error);

    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      clear(error);
      const f = form.elements;
      let source;
      let target;
      try {
        source = endpoint(f.source.value, f.sourceUser.value, f.sourcePass.value, 'source');
        target = endpoint(f.target.value, f.targetUser.value, f.targetPass.value, 'target');
      } catch (err) {
        error.append(h('p', { text: err.message }));
        return;
      }
      const doc = { source, target };
      if (f.continuous.checked) doc.continuous = true;
      if (f.createTarget.checked) doc.create_target = true;
      const jobName = f.jobName.value.trim();
      if (jobName.startsWith('_')) {
        error.append(h('p', { text: 'A job name cannot start with “_”.' }));
        f.jobName.focus();
        return;
      }
      submit.disabled = true;
      try {
        const res = jobName
          ? await api('PUT', `/_replicator/${encodeURIComponent(jobName)}`, { json: doc })
          : await api('POST', '/_replicator', { json: doc });
        // Passwords leave the form once sent; they are never shown again.
        f.sourcePass.value = '';
        f.targetPass.value = '';
        f.jobName.value = '';
        announce(`Replication ${res.id} started (${describeEndpoint(source)} → ${describeEndpoint(target)}).`);
      } catch (err) {
        if (err instanceof ApiError && err.status === 401) return handlePageError(err);
        error.append(h('p', { text: err instanceof ApiError && err.status === 409 ? `A job named “${jobName}” exists already: choose another name or delete it first.` : describeError(err) }));
      } finally {
        submit.disabled = false;
      }
    });
    return h('section', { class: 'card', 'aria-labelledby': 'new-rep-heading' },
      h('h2', { id: 'new-rep-heading', text: 'New replication' }), form);
  }

  /** A replication endpoint for the `_replicator` doc (credentials in `auth`). */
  function endpoint(value, user, password, role) {
    const text = value.trim();
    if (!text) throw new Error(`Enter the ${role}: a database name or URL.`);
    const isUrl = /^https?:\/\//i.test(text);
    if (!isUrl) {
      if (!DB_NAME.test(text) && !text.startsWith('_')) {
        throw new Error(`The ${role} “${text}” is neither a URL nor a valid database name.`);
      }
      if (!user) return text;
      return { url: `${location.origin}${dbPath(text)}`, auth: { basic: { username: user, password } } };
    }
    let url;
    try {
      url = new URL(text);
    } catch {
      throw new Error(`The ${role} URL “${stripCredentials(text)}” is not valid.`);
    }
    if (!user) return url.toString();
    url.username = '';
    url.password = '';
    return { url: url.toString(), auth: { basic: { username: user, password } } };
  }

  function describeEndpoint(ep) {
    return stripCredentials(typeof ep === 'string' ? ep : ep.url);
  }

  /** One list of jobs from `_scheduler/docs` (state) and `_scheduler/jobs` (stats, history). */
  function mergeJobs(jobs, docs) {
    const byKey = new Map();
    for (const d of docs) {
      const key = `doc:${d.database}/${d.doc_id}`;
      byKey.set(key, {
        key,
        kind: 'doc',
        database: d.database,
        docId: d.doc_id,
        repId: d.id,
        state: d.state || 'pending',
        source: d.source,
        target: d.target,
        info: d.info || {},
        errorCount: d.error_count || 0,
        lastUpdated: d.last_updated,
        startTime: d.start_time,
        history: [],
        job: null,
      });
    }
    for (const j of jobs) {
      const docKey = j.database && j.doc_id ? `doc:${j.database}/${j.doc_id}` : null;
      const entry = docKey && byKey.get(docKey);
      if (entry) {
        entry.job = j;
        entry.history = j.history || [];
        entry.info = { ...(entry.info || {}), ...(j.info || {}) };
        entry.repId = entry.repId || j.id;
        entry.source = entry.source || j.source;
        entry.target = entry.target || j.target;
        continue;
      }
      const history = j.history || [];
      const top = history[0] && history[0].type;
      byKey.set(`job:${j.id}`, {
        key: `job:${j.id}`,
        kind: 'transient',
        database: null,
        docId: null,
        repId: j.id,
        state: top === 'crashed' ? 'crashing' : j.pid ? 'running' : 'pending',
        source: j.source,
        target: j.target,
        info: j.info || {},
        errorCount: history.filter((e) => e.type === 'crashed').length,
        lastUpdated: history[0] && history[0].timestamp,
        startTime: j.start_time,
        history,
        job: j,
      });
    }
    const list = [...byKey.values()];
    for (const job of list) {
      job.continuous = Boolean(job.repId && job.repId.includes('+continuous'));
      if (job.kind === 'doc' && !job.job && job.state === 'pending' && replicationMemory.stopped.has(job.key)) {
        job.state = 'stopped';
      }
      if (job.kind === 'doc' && job.job && replicationMemory.stopped.has(job.key)) {
        replicationMemory.stopped.delete(job.key);
      }
      job.error = jobError(job);
    }
    list.sort((a, b) => String(b.startTime || '').localeCompare(String(a.startTime || '')) || a.key.localeCompare(b.key));
    return list;
  }

  function jobError(job) {
    if (job.info && job.info.error) {
      return stripCredentials(typeof job.info.error === 'string' ? job.info.error : JSON.stringify(job.info.error));
    }
    const crash = (job.history || []).find((e) => e.type === 'crashed');
    if (crash && (job.state === 'crashing' || job.state === 'failed')) return stripCredentials(crash.reason || 'crashed');
    return '';
  }

  /** Completed `_replicator` jobs may come without source and target: read them from the doc. */
  function fillMissingEndpoints(list) {
    for (const job of list) {
      const known = replicationMemory.endpoints.get(job.key);
      if (job.source && job.target) {
        replicationMemory.endpoints.set(job.key, { source: job.source, target: job.target });
        continue;
      }
      if (known && known.source !== undefined) {
        job.source = job.source || known.source;
        job.target = job.target || known.target;
        continue;
      }
      if (job.kind === 'doc' && !known) {
        replicationMemory.endpoints.set(job.key, {});
        api('GET', `/${encodeURIComponent(job.database)}/${encodeURIComponent(job.docId)}`).then((doc) => {
          // Only the URLs are kept, without passwords.
          replicationMemory.endpoints.set(job.key, {
            source: describeEndpoint(doc.source || ''),
            target: describeEndpoint(doc.target || ''),
          });
        }, () => {
          replicationMemory.endpoints.delete(job.key);
        });
      }
    }
  }

  /** Differences docs_written between polls into per-job and total rates. */
  function record(list) {
    const mem = replicationMemory;
    const t = Date.now();
    let total = 0;
    for (const job of list) {
      const w = Number(job.info && job.info.docs_written);
      if (!Number.isFinite(w)) continue;
      const samples = mem.samples.get(job.key) || [];
      let prev = samples[samples.length - 1];
      if (!prev && mem.firstPollDone && !mem.seen.has(job.key)) {
        // A job that appeared since the last poll had written nothing before.
        prev = { t: t - POLL_MS, w: 0 };
      }
      mem.seen.add(job.key);
      let rate = 0;
      if (prev && w >= prev.w && t > prev.t) {
        rate = ((w - prev.w) * 1000) / (t - prev.t);
      }
      samples.push({ t, w });
      const counters = JSON.stringify([job.info.docs_read, job.info.docs_written, job.info.changes_pending, job.info.doc_write_failures]);
      if (mem.counters.has(job.key) && mem.counters.get(job.key) !== counters) mem.activity.set(job.key, t);
      mem.counters.set(job.key, counters);
      while (samples.length > 2) samples.shift();
      mem.samples.set(job.key, samples);
      const rates = mem.rates.get(job.key) || [];
      rates.push({ t, r: rate });
      while (rates.length && rates[0].t < t - WINDOW_MS - 5000) rates.shift();
      mem.rates.set(job.key, rates);
      job.rate = rate;
      total += rate;
    }
    for (const job of list) {
      if (!mem.labels.has(job.key)) mem.labels.set(job.key, job.docId || `${String(job.repId || job.key).slice(0, 8)}…`);
    }
    mem.totals.push({ t, r: total });
    while (mem.totals.length && mem.totals[0].t < t - WINDOW_MS - 5000) mem.totals.shift();
    mem.firstPollDone = true;
  }

  /** When the job last changed: its state (server) or its counters (seen here). */
  function lastActivity(job) {
    const seen = replicationMemory.activity.get(job.key);
    const server = job.lastUpdated ? Date.parse(job.lastUpdated) : 0;
    const t = Math.max(seen || 0, Number.isNaN(server) ? 0 : server);
    return t ? new Date(t).toISOString() : job.lastUpdated;
  }

  function colorFor(key) {
    const mem = replicationMemory;
    if (!mem.colors.has(key)) mem.colors.set(key, SERIES_COLORS[mem.colors.size % SERIES_COLORS.length]);
    return mem.colors.get(key);
  }

  /** The live chart: total docs written per second and one line per active job. */
  function throughputChart() {
    const nowValue = h('dd', { text: '0' });
    const peakValue = h('dd', { text: '0' });
    const writtenValue = h('dd', { text: '0' });
    const activeValue = h('dd', { text: '0' });
    const svgHolder = h('div', { class: 'chart-holder' });
    const legend = h('ul', { class: 'legend chart-legend', 'aria-label': 'Chart lines' });
    const el = h('div', { class: 'chart' },
      h('dl', { class: 'stats stats-compact' },
        h('div', { class: 'stat' }, h('dt', { text: 'Now (docs/s)' }), nowValue),
        h('div', { class: 'stat' }, h('dt', { text: 'Peak (docs/s)' }), peakValue),
        h('div', { class: 'stat' }, h('dt', { text: 'Written in view' }), writtenValue),
        h('div', { class: 'stat' }, h('dt', { text: 'Running jobs' }), activeValue)),
      svgHolder, legend);

    function draw(list) {
      const mem = replicationMemory;
      const now = Date.now();
      const width = Math.max(320, Math.round(svgHolder.clientWidth || 800));
      const height = 220;
      const pad = { l: 56, r: 16, t: 14, b: 28 };
      const plotW = width - pad.l - pad.r;
      const plotH = height - pad.t - pad.b;
      // The window grows with the data, from 1 to 3 minutes.
      const since = mem.totals.length ? now - mem.totals[0].t : 0;
      const windowMs = Math.min(WINDOW_MS, Math.max(60000, Math.ceil(since / 30000) * 30000));
      const totals = mem.totals.filter((p) => p.t >= now - windowMs);
      let peak = 0;
      let written = 0;
      for (let i = 0; i < totals.length; i += 1) {
        peak = Math.max(peak, totals[i].r);
        if (i > 0) written += (totals[i].r * (totals[i].t - totals[i - 1].t)) / 1000;
      }
      const top = niceMax(peak);
      const xOf = (t) => pad.l + plotW - ((now - t) / windowMs) * plotW;
      const yOf = (r) => pad.t + plotH - (r / top) * plotH;
      const current = totals.length ? totals[totals.length - 1].r : 0;

      const svg = h('svg', {
        class: 'chart-svg', viewBox: `0 0 ${width} ${height}`, width, height, role: 'img',
        'aria-label': `Documents written per second over the last ${windowMs / 60000} minutes: now ${fmtRate(current)}, peak ${fmtRate(peak)}.`,
        dataset: { peak: String(peak), current: String(current), points: String(totals.length) },
      });
      const grid = h('g', { class: 'grid' });
      const ticks = 4;
      for (let i = 0; i <= ticks; i += 1) {
        const v = (top / ticks) * i;
        const y = yOf(v);
        grid.append(h('line', { x1: pad.l, x2: width - pad.r, y1: y, y2: y }),
          h('text', { x: pad.l - 8, y: y + 4, class: 'axis-label', 'text-anchor': 'end' }, fmtRate(v)));
      }
      const step = windowMs <= 90000 ? 15000 : 30000;
      for (let back = 0; back <= windowMs; back += step) {
        const x = xOf(now - back);
        const label = back === 0 ? 'now' : back % 60000 === 0 ? `−${back / 60000} min` : `−${back / 1000} s`;
        grid.append(h('line', { x1: x, x2: x, y1: pad.t, y2: pad.t + plotH, class: 'vline' }),
          h('text', { x, y: height - 8, class: 'axis-label', 'text-anchor': back === 0 ? 'end' : back === windowMs ? 'start' : 'middle' }, label));
      }
      svg.append(grid);
      // Per-job lines (jobs that wrote something in the window).
      const legendItems = [];
      const active = [];
      for (const [key, rates] of mem.rates) {
        const pts = rates.filter((p) => p.t >= now - windowMs);
        if (!pts.some((p) => p.r > 0)) continue;
        active.push([key, pts]);
      }
      const showPerJob = active.length > 1;
      if (showPerJob) {
        for (const [key, pts] of active.slice(0, 6)) {
          svg.append(h('polyline', { class: 'series', stroke: colorFor(key), points: pts.map((p) => `${xOf(p.t).toFixed(1)},${yOf(p.r).toFixed(1)}`).join(' ') }));
          legendItems.push(h('li', {}, h('span', { class: 'swatch line-swatch', dataset: { color: colorFor(key) } }), mem.labels.get(key) || key));
        }
      }
      if (totals.length) {
        const line = totals.map((p) => `${xOf(p.t).toFixed(1)},${yOf(p.r).toFixed(1)}`).join(' ');
        const first = totals[0];
        const last = totals[totals.length - 1];
        svg.append(
          h('path', { class: 'total-area', d: `M${xOf(first.t).toFixed(1)},${yOf(0)} L${line.replace(/ /g, ' L')} L${xOf(last.t).toFixed(1)},${yOf(0)} Z` }),
          h('polyline', { class: 'total-line', points: line }),
          h('circle', { class: 'total-dot', cx: xOf(last.t), cy: yOf(last.r), r: 4 }));
      }
      svg.append(h('line', { class: 'axis', x1: pad.l, x2: width - pad.r, y1: pad.t + plotH, y2: pad.t + plotH }));
      clear(svgHolder).append(svg);
      // Line swatches take their colour from script (CSP: no inline styles).
      clear(legend).append(h('li', {}, h('span', { class: 'swatch swatch-total' }), 'All jobs'), ...legendItems);
      for (const sw of legend.querySelectorAll('[data-color]')) sw.style.backgroundColor = sw.dataset.color;
      setText(nowValue, fmtRate(current));
      setText(peakValue, fmtRate(peak));
      setText(writtenValue, fmtNumber(Math.round(written)));
      setText(activeValue, fmtNumber(list.filter((j) => j.state === 'running').length));
    }

    return { el, draw };
  }

  function niceMax(v) {
    if (v <= 0) return 10;
    const exp = 10 ** Math.floor(Math.log10(v));
    for (const m of [1, 2, 2.5, 5, 10]) {
      if (v <= m * exp) return m * exp;
    }
    return 10 * exp;
  }

  /** A job's card; `update(job)` refreshes it in place. */
  function jobCard(first, refresh) {
    const titleId = uid('job-title');
    const badge = h('span', { class: 'state' });
    const title = h('h3', { id: titleId, class: 'job-title break' });
    const kind = h('span', { class: 'tag' });
    const updated = h('span', { class: 'muted small' });
    const source = h('span', { class: 'mono break' });
    const target = h('span', { class: 'mono break' });
    const read = h('dd');
    const writtenEl = h('dd');
    const pending = h('dd');
    const failures = h('dd');
    const rate = h('dd');
    const errorBox = h('div', { class: 'job-error', hidden: true });
    const historyList = h('ol', { class: 'history' });
    const historySummary = h('summary');
    const history = h('details', { class: 'job-history' }, historySummary, historyList);
    const progress = h('div', { class: 'progress', 'aria-hidden': 'true' }, h('span', { class: 'progress-bar' }));
    const stop = h('button', { type: 'button', class: 'btn btn-small', text: 'Stop' });
    const restart = h('button', { type: 'button', class: 'btn btn-small', text: 'Restart' });
    const remove = h('button', { type: 'button', class: 'btn btn-small btn-danger-ghost', text: 'Delete' });
    const actionError = h('div', { class: 'form-error', role: 'alert' });
    const el = h('article', { class: 'job card', 'aria-labelledby': titleId },
      h('header', { class: 'job-head' }, badge, title, kind, updated),
      h('p', { class: 'route' }, h('span', { class: 'route-label', text: 'From' }), source, h('span', { class: 'route-label', text: 'to' }), target),
      h('dl', { class: 'job-stats' },
        h('div', { title: 'Documents read from the source' }, h('dt', { text: 'Read' }), read),
        h('div', { title: 'Documents written to the target' }, h('dt', { text: 'Written' }), writtenEl),
        h('div', { title: 'Changes of the source not replicated yet' }, h('dt', { text: 'Pending' }), pending),
        h('div', { title: 'Documents the target refused' }, h('dt', { text: 'Failures' }), failures),
        h('div', { title: 'Documents written per second, now' }, h('dt', { text: 'Docs/s' }), rate)),
      progress,
      errorBox,
      history,
      h('div', { class: 'job-actions' }, stop, restart, remove),
      actionError);
    let job = first;

    async function act(label, fn) {
      clear(actionError);
      for (const b of [stop, restart, remove]) b.disabled = true;
      try {
        await fn();
        refresh();
      } catch (err) {
        if (err instanceof ApiError && err.status === 401) return handlePageError(err);
        actionError.append(h('p', { text: `${label} failed: ${describeError(err)}` }));
      } finally {
        for (const b of [stop, restart, remove]) b.disabled = false;
      }
    }

    stop.addEventListener('click', () => act('Stop', async () => {
      await api('POST', '/_replicate', { json: { replication_id: job.repId, cancel: true } });
      if (job.kind === 'doc') replicationMemory.stopped.add(job.key);
      announce(`Replication ${job.docId || job.repId} stopped.`);
    }));
    restart.addEventListener('click', () => act('Restart', async () => {
      const path = `/${encodeURIComponent(job.database)}/${encodeURIComponent(job.docId)}`;
      const doc = await api('GET', path);
      const fresh = {};
      for (const [k, v] of Object.entries(doc)) {
        if (k === '_rev' || k === 'owner' || k.startsWith('_replication_')) continue;
        fresh[k] = v;
      }
      // Deleting and re-creating the doc makes the replicator start afresh
      // (from its last checkpoint), whatever state the job was in.
      await api('DELETE', path, { params: { rev: doc._rev } });
      await api('PUT', path, { json: fresh });
      replicationMemory.stopped.delete(job.key);
      announce(`Replication ${job.docId} restarted.`);
    }));
    remove.addEventListener('click', async () => {
      const name = job.docId || job.repId;
      const ok = await confirmDialog({
        title: `Delete replication ${name}?`,
        body: [job.kind === 'doc'
          ? 'Its _replicator document is deleted, which stops the job. Replicated documents stay in the target.'
          : 'The job is cancelled. Replicated documents stay in the target.'],
        confirmLabel: 'Delete replication',
      });
      if (!ok) return;
      act('Delete', async () => {
        if (job.kind === 'doc') {
          const path = `/${encodeURIComponent(job.database)}/${encodeURIComponent(job.docId)}`;
          const doc = await api('GET', path);
          await api('DELETE', path, { params: { rev: doc._rev } });
        } else {
          await api('POST', '/_replicate', { json: { replication_id: job.repId, cancel: true } });
        }
        announce(`Replication ${name} deleted.`);
      });
    });

    function update(next) {
      job = next;
      const state = STATES[job.state] || { label: job.state, cls: 'pending' };
      badge.className = `state state-${state.cls}`;
      setText(badge, state.label);
      el.dataset.state = job.state;
      el.dataset.key = job.key;
      if (job.docId) el.dataset.docId = job.docId;
      setText(title, job.docId || `Transient job ${String(job.repId || '').split('+')[0].slice(0, 12)}`);
      setText(kind, `${job.continuous ? 'Continuous' : 'One-shot'}${job.kind === 'transient' ? ' · _replicate' : ''}`);
      const lastIso = lastActivity(job);
      setText(updated, lastIso ? `Updated ${fmtAgo(lastIso)}` : '');
      updated.title = lastIso ? `Last change: ${new Date(lastIso).toLocaleString('en-GB')}` : '';
      setText(source, stripCredentials(job.source) || '—');
      setText(target, stripCredentials(job.target) || '—');
      const info = job.info || {};
      setText(read, fmtNumber(info.docs_read));
      setText(writtenEl, fmtNumber(info.docs_written));
      setText(pending, info.changes_pending === null || info.changes_pending === undefined ? '—' : fmtNumber(info.changes_pending));
      setText(failures, fmtNumber(info.doc_write_failures));
      failures.classList.toggle('bad', Number(info.doc_write_failures) > 0);
      setText(rate, fmtRate(job.rate || 0));
      const w = Number(info.docs_written) || 0;
      const p = Number(info.changes_pending) || 0;
      const fraction = job.state === 'completed' ? 1 : w + p > 0 ? w / (w + p) : 0;
      progress.hidden = !(job.state === 'running' || job.state === 'completed');
      progress.firstChild.style.width = `${Math.round(fraction * 100)}%`;
      errorBox.hidden = !job.error;
      if (job.error) {
        const text = `${job.state === 'failed' ? 'Failed' : 'Error'}${job.errorCount > 1 ? ` (${job.errorCount} crashes)` : ''}: ${job.error}`;
        if (errorBox.textContent !== text) {
          clear(errorBox).append(h('strong', { text: job.state === 'failed' ? 'Failed' : 'Error' }),
            h('span', { text: `${job.errorCount > 1 ? ` (${job.errorCount} crashes)` : ''}: ${job.error}` }));
        }
      }
      const events = job.history || [];
      history.hidden = events.length === 0;
      const crashes = events.filter((e) => e.type === 'crashed').length;
      setText(historySummary, `History: ${events.length} event${events.length === 1 ? '' : 's'}${crashes ? `, ${crashes} crash${crashes > 1 ? 'es' : ''}` : ''}`);
      const signature = JSON.stringify(events);
      if (historyList.dataset.signature !== signature) {
        historyList.dataset.signature = signature;
        clear(historyList).append(...events.map((e) => h('li', { class: `event event-${e.type}` },
          h('time', { datetime: e.timestamp, text: e.timestamp ? new Date(e.timestamp).toLocaleString('en-GB') : '' }),
          h('span', { class: 'event-type', text: e.type }),
          e.reason ? h('span', { class: 'event-reason', text: stripCredentials(e.reason) }) : null)));
      }
      const name = job.docId || job.repId;
      stop.setAttribute('aria-label', `Stop replication ${name}`);
      restart.setAttribute('aria-label', `Restart replication ${name}`);
      remove.setAttribute('aria-label', `Delete replication ${name}`);
      stop.hidden = !(job.repId && job.job && ['running', 'pending', 'crashing'].includes(job.state));
      restart.hidden = job.kind !== 'doc';
      remove.hidden = false;
    }
    update(first);
    return { el, update };
  }

  // ------------------------------------------------------------------ start

  async function start() {
    document.getElementById('logout').addEventListener('click', logout);
    // The skip link must not change the hash (that would be a route).
    document.querySelector('.skip-link').addEventListener('click', (event) => {
      event.preventDefault();
      main().focus();
    });
    window.addEventListener('hashchange', route);
    try {
      const info = await api('GET', '/');
      const vendor = info.vendor ? `${info.vendor.name} ${info.vendor.version}` : 'Recliner';
      setText(document.getElementById('server-info'), `${vendor} · CouchDB ${info.version} API`);
    } catch {
      // The footer is optional.
    }
    try {
      await loadSession();
    } catch (err) {
      announce(describeError(err), 'error');
    }
    route();
  }

  start();
})();
