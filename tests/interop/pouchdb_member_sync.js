'use strict';
// PouchDB as a logged-in member, not an admin: the admin (RECLINER_URL's
// credentials) creates a user and a database that lists the user as a
// member; PouchDB then syncs with it both ways as that user, with the
// credentials in the URL and with PouchDB's `auth` option, and is refused
// where the user is no member and with a wrong password.
//
//   RECLINER_URL=http://admin:password@127.0.0.1:5984 node pouchdb_member_sync.js

const { assert, serverUrl, uniqueName, runSteps, pouchdb, http } = require('./lib');

const PouchDB = pouchdb();
const adminBase = serverUrl();
const parsed = new URL(adminBase);
parsed.username = '';
parsed.password = '';
const plainBase = parsed.toString().replace(/\/+$/, '');
const user = uniqueName('pat');
const password = 'pats-secret-password';
const shared = uniqueName('shared');
const closed = uniqueName('closed');

function asUser(db, name = user, pass = password) {
  const url = new URL(`${plainBase}/${db}`);
  url.username = name;
  url.password = pass;
  return url.toString();
}

runSteps('pouchdb_member_sync', [
  ['the admin creates the user and two databases, one shared with the user', async () => {
    const created = await http('PUT', `${adminBase}/_users/org.couchdb.user:${user}`, {
      body: { name: user, password, roles: [], type: 'user' },
    });
    assert.equal(created.status, 201, created.text);
    for (const db of [shared, closed]) {
      assert.equal((await http('PUT', `${adminBase}/${db}`)).status, 201);
    }
    const security = { members: { names: [user] }, admins: { names: [] } };
    const set = await http('PUT', `${adminBase}/${shared}/_security`, { body: security });
    assert.equal(set.status, 200, set.text);
  }],
  ['the user logs in through _session', async () => {
    const login = await http('POST', `${plainBase}/_session`, { body: { name: user, password } });
    assert.equal(login.status, 200, login.text);
    assert.match(login.headers.get('set-cookie'), /^AuthSession=[^;]+;/);
  }],
  ['PouchDB pushes and pulls as the member, credentials in the URL', async () => {
    const local = new PouchDB(uniqueName('member-local'), { adapter: 'memory' });
    await local.bulkDocs([{ _id: 'a', v: 1 }, { _id: 'b', v: 2 }]);
    const remote = new PouchDB(asUser(shared));
    await remote.put({ _id: 'from-server', v: 3 });
    const result = await local.sync(remote);
    assert.equal(result.push.docs_written, 2);
    assert.equal(result.pull.docs_written, 1);
    assert.equal((await local.get('from-server')).v, 3);
    const seen = await http('GET', `${adminBase}/${shared}/a`);
    assert.equal(seen.json.v, 1);
  }],
  ['PouchDB with its auth option reads the same database', async () => {
    const remote = new PouchDB(`${plainBase}/${shared}`, { auth: { username: user, password } });
    const all = await remote.allDocs();
    assert.deepEqual(all.rows.map((r) => r.id), ['a', 'b', 'from-server']);
  }],
  ['where the user is no member, and with a wrong password, PouchDB is refused', async () => {
    const outside = new PouchDB(asUser(closed));
    await assert.rejects(outside.info(), (err) => err.status === 403);
    const wrong = new PouchDB(asUser(shared, user, 'not-the-password'));
    await assert.rejects(wrong.info(), (err) => err.status === 401);
    const anonymous = new PouchDB(`${plainBase}/${shared}`);
    await assert.rejects(anonymous.info(), (err) => err.status === 401);
  }],
]);
