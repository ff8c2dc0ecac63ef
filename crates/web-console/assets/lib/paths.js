// Request paths of the server's API and the console's own hash links.

/** A database name in a request path. */
export function dbPath(db) {
  return `/${encodeURIComponent(db)}`;
}

/** A document id in a request path: design docs keep their slash. */
export function docPath(db, id) {
  if (id.startsWith('_design/')) {
    return `${dbPath(db)}/_design/${encodeURIComponent(id.slice(8))}`;
  }
  return `${dbPath(db)}/${encodeURIComponent(id)}`;
}

export function attPath(db, id, name) {
  return `${docPath(db, id)}/${encodeURIComponent(name)}`;
}

/** Hash links (every segment encoded so any name round-trips). */
export const link = {
  dbs: (params) => `#/dbs${query(params)}`,
  db: (db, params) => `#/db/${encodeURIComponent(db)}${query(params)}`,
  doc: (db, id) => `#/db/${encodeURIComponent(db)}/doc/${encodeURIComponent(id)}`,
  newDoc: (db) => `#/db/${encodeURIComponent(db)}/new`,
  /** A page of a database below its documents (`mango`, `views`, ...). */
  dbPage: (db, name, params) => `#/db/${encodeURIComponent(db)}/${name}${query(params)}`,
  replication: () => '#/replication',
  users: (params) => `#/users${query(params)}`,
  server: (params) => `#/server${query(params)}`,
  activity: () => '#/activity',
};

export function query(params) {
  if (!params) return '';
  const parts = [];
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '') continue;
    parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(v)}`);
  }
  return parts.length ? `?${parts.join('&')}` : '';
}
