'use strict';
// One database, many users: a database with per-document access
// (`PUT /db?access=true`) synced by stock PouchDB as three users and an
// admin. Each user syncs both ways and gets exactly the documents whose
// `_access` names them or one of their roles; a shared document reaches
// both users; a user removed from a document loses it on their side at
// the next sync, and nothing they sync back changes the server's copy;
// a user's attempts to read, write or replicate around the rule fail.
//
//   RECLINER_URL=http://admin:password@127.0.0.1:5984 node pouchdb_access.js

const { assert, serverUrl, uniqueName, runSteps, pouchdb, http } = require('./lib');

const PouchDB = pouchdb();
const adminBase = serverUrl();
const parsed = new URL(adminBase);
parsed.username = '';
parsed.password = '';
const plainBase = parsed.toString().replace(/\/+$/, '');
const db = uniqueName('many-users');
const users = {
  alice: { roles: ['team'] },
  bob: { roles: [] },
  carol: { roles: ['team'] },
};
const password = 'a-long-enough-password';
const locals = {};

function asUser(name) {
  const url = new URL(`${plainBase}/${db}`);
  url.username = name;
  url.password = password;
  return url.toString();
}

async function userHttp(name, method, path, body) {
  const url = new URL(`${plainBase}/${db}${path}`);
  url.username = name;
  url.password = password;
  return http(method, url.toString(), body === undefined ? {} : { body });
}

async function localIds(name) {
  const all = await locals[name].allDocs();
  return all.rows.map((r) => r.id).sort();
}

async function sync(name) {
  return locals[name].sync(new PouchDB(asUser(name)));
}

runSteps('pouchdb_access', [
  ['the admin creates three users and a database with per-document access', async () => {
    for (const [name, { roles }] of Object.entries(users)) {
      const created = await http('PUT', `${adminBase}/_users/org.couchdb.user:${name}`, {
        body: { name, password, roles, type: 'user' },
      });
      assert.equal(created.status, 201, created.text);
    }
    const refused = await http('PUT', `${adminBase}/${db}?access=yes`);
    assert.equal(refused.status, 400);
    assert.deepEqual(refused.json, { error: 'bad_request', reason: 'The `access` value should be a boolean.' });
    assert.equal((await http('PUT', `${adminBase}/${db}?access=true`)).status, 201);
    assert.deepEqual((await http('GET', `${adminBase}/${db}`)).json.props, { access: true });
    const security = { members: { names: Object.keys(users) }, admins: { names: [] } };
    assert.equal((await http('PUT', `${adminBase}/${db}/_security`, { body: security })).status, 200);
    const docs = [
      { _id: 'a1', _access: ['alice'], v: 'a' },
      { _id: 'b1', _access: ['bob'], v: 'b' },
      { _id: 'c1', _access: ['carol'], v: 'c' },
      { _id: 'shared-ab', _access: ['alice', 'bob'], v: 'ab' },
      { _id: 'team-doc', _access: ['team'], v: 'team' },
      { _id: 'admins-only', v: 'x' },
    ];
    const written = await http('POST', `${adminBase}/${db}/_bulk_docs`, { body: { docs } });
    assert.equal(written.status, 201, written.text);
  }],
  ['each user syncs with stock PouchDB and gets exactly theirs', async () => {
    for (const name of Object.keys(users)) {
      locals[name] = new PouchDB(uniqueName(`${name}-local`), { adapter: 'memory' });
      const result = await sync(name);
      assert.equal(result.pull.doc_write_failures, 0);
    }
    assert.deepEqual(await localIds('alice'), ['a1', 'shared-ab', 'team-doc']);
    assert.deepEqual(await localIds('bob'), ['b1', 'shared-ab']);
    assert.deepEqual(await localIds('carol'), ['c1', 'team-doc']);
    assert.deepEqual((await locals.alice.get('shared-ab'))._access, ['alice', 'bob']);
  }],
  ['a document a user writes for themselves reaches the server, and only them', async () => {
    await locals.bob.put({ _id: 'bob-note', _access: ['bob'], text: 'mine' });
    const pushed = await sync('bob');
    assert.equal(pushed.push.docs_written, 1);
    assert.equal(pushed.push.doc_write_failures, 0);
    const seen = await http('GET', `${adminBase}/${db}/bob-note`);
    assert.deepEqual(seen.json._access, ['bob']);
    await sync('alice');
    assert.ok(!(await localIds('alice')).includes('bob-note'));
  }],
  ['an edit of a shared document reaches the other user', async () => {
    const doc = await locals.alice.get('shared-ab');
    doc.v = 'edited by alice';
    await locals.alice.put(doc);
    await sync('alice');
    await sync('bob');
    assert.equal((await locals.bob.get('shared-ab')).v, 'edited by alice');
  }],
  ['writing documents for others, or taking oneself off them, counts as write failures', async () => {
    await locals.alice.put({ _id: 'for-bob-only', _access: ['bob'], text: 'sneaky' });
    await locals.alice.put({ _id: 'no-access-field', text: 'sneaky' });
    // Alice reads the team's document through her role; handing it to
    // carol alone takes her off it, which only an admin may do.
    const team = await locals.alice.get('team-doc');
    team._access = ['carol'];
    team.v = 'handed over';
    await locals.alice.put(team);
    const result = await sync('alice');
    assert.equal(result.push.doc_write_failures, 3, JSON.stringify(result.push));
    for (const id of ['for-bob-only', 'no-access-field']) {
      assert.equal((await http('GET', `${adminBase}/${db}/${id}`)).status, 404, id);
    }
    const stored = await http('GET', `${adminBase}/${db}/team-doc`);
    assert.deepEqual(stored.json._access, ['team']);
    assert.equal(stored.json.v, 'team');
  }],
  ['a user revoked from a document loses it at the next sync, and gives nothing back', async () => {
    const current = (await http('GET', `${adminBase}/${db}/shared-ab`)).json;
    current._access = ['alice'];
    const revoked = await http('PUT', `${adminBase}/${db}/shared-ab`, { body: current });
    assert.equal(revoked.status, 201, revoked.text);
    const pulled = await sync('bob');
    assert.equal(pulled.pull.doc_write_failures, 0);
    await assert.rejects(locals.bob.get('shared-ab'), (err) => err.status === 404);
    assert.ok(!(await localIds('bob')).includes('shared-ab'));
    // Syncing again sends nothing back: the server's tree has one leaf.
    const again = await sync('bob');
    assert.equal(again.push.doc_write_failures, 0);
    const leaves = await http('GET', `${adminBase}/${db}/shared-ab?open_revs=all`, {
      headers: { accept: 'application/json' },
    });
    assert.equal(leaves.json.length, 1, leaves.text);
    assert.equal(leaves.json[0].ok._rev, revoked.json.rev);
    // Alice keeps it.
    await sync('alice');
    assert.equal((await locals.alice.get('shared-ab'))._rev, revoked.json.rev);
  }],
  ['given back, the document reaches the user again', async () => {
    const current = (await http('GET', `${adminBase}/${db}/shared-ab`)).json;
    current._access = ['alice', 'bob'];
    current.v = 'back';
    assert.equal((await http('PUT', `${adminBase}/${db}/shared-ab`, { body: current })).status, 201);
    await sync('bob');
    assert.equal((await locals.bob.get('shared-ab')).v, 'back');
  }],
  ['around the rule, a user reads nothing of others', async () => {
    for (const id of ['a1', 'admins-only', 'does-not-exist']) {
      const got = await userHttp('bob', 'GET', `/${id}`);
      assert.equal(got.status, 404, `${id}: ${got.text}`);
      assert.deepEqual(got.json, { error: 'not_found', reason: 'missing' });
    }
    const remote = new PouchDB(asUser('bob'));
    const all = await remote.allDocs();
    assert.deepEqual(all.rows.map((r) => r.id).sort(), ['b1', 'bob-note', 'shared-ab']);
    assert.equal(all.total_rows, 3);
    const a1Rev = (await http('GET', `${adminBase}/${db}/a1`)).json._rev;
    const bulk = await remote.bulkGet({ docs: [{ id: 'a1', rev: a1Rev }] });
    assert.equal(bulk.results[0].docs[0].error.error, 'not_found');
    const diff = await remote.revsDiff({ a1: [a1Rev] });
    assert.deepEqual(diff, { a1: { missing: [a1Rev] } });
    const changes = await remote.changes({ since: 0 });
    assert.ok(changes.results.every((r) => ['b1', 'bob-note', 'shared-ab'].includes(r.id)), JSON.stringify(changes.results));
    const view = await userHttp('bob', 'GET', '/_design/app/_view/all');
    assert.equal(view.status, 403, view.text);
  }],
  ['a pull as a user from another user\'s checkpoints learns nothing', async () => {
    const checkpoints = await http('GET', `${adminBase}/${db}/_local_docs?include_docs=true`);
    const bobs = checkpoints.json.rows.filter((r) => r.doc._access && r.doc._access.includes('bob'));
    assert.ok(bobs.length > 0, checkpoints.text);
    const peek = await userHttp('alice', 'GET', `/${bobs[0].id}`);
    assert.equal(peek.status, 404, peek.text);
  }],
  ['an admin replicates the whole database with _access intact', async () => {
    const copy = new PouchDB(uniqueName('admin-copy'), { adapter: 'memory' });
    const result = await copy.replicate.from(new PouchDB(`${adminBase}/${db}`));
    assert.equal(result.doc_write_failures, 0);
    const ids = (await copy.allDocs()).rows.map((r) => r.id);
    for (const id of ['a1', 'b1', 'c1', 'shared-ab', 'team-doc', 'admins-only', 'bob-note']) {
      assert.ok(ids.includes(id), `${id} in ${ids}`);
    }
    assert.deepEqual((await copy.get('c1'))._access, ['carol']);
  }],
]);
