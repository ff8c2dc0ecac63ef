// Recliner's web console: a single-page app on the server's own CouchDB API,
// in plain modules with no dependencies. Pages are chosen by the URL's hash;
// this entry module maps each route to its page and starts the console.

import { api, describeError } from './lib/api.js';
import { setText } from './lib/dom.js';
import { announce, loadSession, logout, main, route, setPages } from './lib/shell.js';
import { renderDatabase } from './pages/database.js';
import { renderDatabases } from './pages/databases.js';
import { renderDocument, renderNewDocument } from './pages/document.js';
import { renderReplication } from './pages/replication.js';
import { renderMango } from './pages/mango.js';
import { renderViews } from './pages/views.js';
import { renderSearch } from './pages/search.js';
import { renderConflicts } from './pages/conflicts.js';
import { renderPermissions } from './pages/permissions.js';
import { renderUsers } from './pages/users.js';
import { renderServer } from './pages/server.js';
import { renderActivity } from './pages/activity.js';

/**
 * The pages below `#/db/NAME/`, by their next segment; each is called with
 * the database, the segments after its own and the route's parameters.
 */
const DATABASE_PAGES = {
  doc: (db, rest, params) => (rest.length ? renderDocument(db, rest.join('/')) : renderDatabase(db, params)),
  new: (db) => renderNewDocument(db),
  mango: renderMango,
  views: renderViews,
  search: renderSearch,
  conflicts: renderConflicts,
  permissions: renderPermissions,
};

/**
 * The pages of the server, by the route's first segment; each is called
 * with the segments after it and the route's parameters.
 */
const SERVER_PAGES = {
  replication: () => renderReplication(),
  users: renderUsers,
  server: renderServer,
  activity: renderActivity,
};

/** Renders the page of a route (`#/db/NAME/...`, `#/replication`, ...). */
function renderRoute(segments, params) {
  const [head, db, sub, ...rest] = segments;
  if (head === 'db' && db) {
    const page = DATABASE_PAGES[sub];
    return page ? page(db, rest, params) : renderDatabase(db, params);
  }
  const page = SERVER_PAGES[head];
  return page ? page(segments.slice(1), params) : renderDatabases(params);
}

async function start() {
  setPages(renderRoute);
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
