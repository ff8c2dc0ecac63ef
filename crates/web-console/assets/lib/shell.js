// The console around every page: the session, the status line, the router
// (pages by the URL's hash), the error pages and the login form.

import { ApiError, api, describeError } from './api.js';
import { clear, h, setText, uid } from './dom.js';
import { link } from './paths.js';

// ---------------------------------------------------------------- session

export const session = { name: null, roles: [] };

export async function loadSession() {
  const data = await api('GET', '/_session');
  session.name = data.userCtx ? data.userCtx.name : null;
  session.roles = data.userCtx ? data.userCtx.roles || [] : [];
  renderChrome();
  return session.name;
}

export function renderChrome() {
  const loggedIn = Boolean(session.name);
  document.getElementById('nav').hidden = !loggedIn;
  document.getElementById('user').hidden = !loggedIn;
  const admin = session.roles.includes('_admin');
  setText(document.getElementById('user-name'), loggedIn ? `${session.name}${admin ? ' (admin)' : ''}` : '');
  // Pages only server admins may use are not offered to anyone else.
  for (const a of document.querySelectorAll('[data-admin-only]')) a.hidden = !admin;
}

export async function logout() {
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
export function announce(message, kind = 'ok') {
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

export const main = () => document.getElementById('main');
let page = { generation: 0, cleanups: [] };
let afterLogin = '#/dbs';

export function navigate(hash) {
  if (location.hash === hash) {
    route();
  } else {
    location.hash = hash;
  }
}

export function parseHash() {
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
export function startPage(title, navKey) {
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

export function onCleanup(fn) {
  page.cleanups.push(fn);
}

/** Renders the page a route names; set once by the entry module. */
let renderPage = async () => {};

/** Sets the function that renders a route's page: `(segments, params)`. */
export function setPages(render) {
  renderPage = render;
}

let firstRoute = true;
let lastPath = null;
export async function route() {
  const { segments, params } = parseHash();
  const [head] = segments;
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
    await renderPage(segments, params);
  } catch (err) {
    handlePageError(err);
  }
  if (!firstRoute) focusHeading();
  firstRoute = false;
  if (lastPath !== segments.join('/')) window.scrollTo(0, 0);
  lastPath = segments.join('/');
}

export function focusHeading() {
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
export function handlePageError(err) {
  if (err instanceof ApiError && err.status === 401) {
    const hash = location.hash || '#/dbs';
    // The answer comes later: by then the user may be on another page,
    // which this error must not replace.
    const generation = page.generation;
    const stillHere = () => page.generation === generation;
    const loggedOut = () => {
      if (!stillHere()) return;
      session.name = null;
      session.roles = [];
      renderChrome();
      afterLogin = hash;
      renderLogin('Your session has ended or you are not logged in. Log in to continue.');
    };
    api('GET', '/_session').then((data) => {
      if (!stillHere()) return;
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

export function showErrorPage(err, forbidden) {
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
  const form = openDatabaseForm();
  root.append(
    h('p', { class: 'muted', text: `You are logged in as ${session.name || 'a user'} without the rights this page needs (server admins may see everything).` }),
    form,
    h('button', { type: 'button', class: 'btn', onclick: () => logout(), text: 'Log in as someone else' }));
  focusHeading();
}

// ------------------------------------------------------------------ login

/** A form to open a database by name, for users who may not list them. */
export function openDatabaseForm() {
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
  return form;
}

export function renderLogin(message) {
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
