'use strict';
// PouchDB's HTTP adapter used directly, as applications use a remote
// database: documents, bulk writes with conflicts, allDocs with keys,
// changes (one-shot, doc_ids filter, live), attachments, revs_diff and
// bulkGet, _local docs.
//
//   RECLINER_URL=http://127.0.0.1:5984 node pouchdb_remote_api.js

const { assert, serverUrl, uniqueName, runSteps, waitFor, storedDigest, pouchdb, http } = require('./lib');

const PouchDB = pouchdb();
const base = serverUrl();
const dbName = uniqueName('pouch-api');
let remote;
const revs = {};

async function status(promise) {
  try {
    await promise;
    return 'ok';
  } catch (err) {
    return err.status;
  }
}

runSteps('pouchdb_remote_api', [
  ['open the remote database', async () => {
    remote = new PouchDB(`${base}/${dbName}`);
    const info = await remote.info();
    assert.equal(info.db_name, dbName);
    assert.equal(info.doc_count, 0);
  }],

  ['put, get with revs_info, update, conflict, remove', async () => {
    const a = await remote.put({ _id: 'a', v: 1 });
    const a2 = await remote.put({ _id: 'a', _rev: a.rev, v: 2 });
    assert.equal(await status(remote.put({ _id: 'a', _rev: a.rev, v: 'stale' })), 409);
    const doc = await remote.get('a', { revs_info: true });
    assert.equal(doc.v, 2);
    assert.deepEqual(doc._revs_info.map((r) => [r.rev, r.status]), [[a2.rev, 'available'], [a.rev, 'available']]);
    const posted = await remote.post({ v: 'posted' });
    assert.match(posted.id, /^[0-9a-f]{32}$/);
    const removed = await remote.remove('a', a2.rev);
    assert.match(removed.rev, /^3-/);
    assert.equal(await status(remote.get('a')), 404);
    const old = await remote.get('a', { rev: a.rev });
    assert.equal(old.v, 1);
    revs.posted = posted;
  }],

  ['bulkDocs reports per-document conflicts', async () => {
    const first = await remote.bulkDocs([{ _id: 'b1', n: 1 }, { _id: 'b2', n: 2 }, { _id: 'b3', n: 3 }]);
    assert.ok(first.every((r) => r.ok), JSON.stringify(first));
    const second = await remote.bulkDocs([
      { _id: 'b1', _rev: first[0].rev, n: 10 },
      { _id: 'b2', n: 'no rev' },
      { _id: 'b4', n: 4 },
    ]);
    assert.equal(second[0].ok, true, JSON.stringify(second[0]));
    assert.equal(second[1].status, 409, JSON.stringify(second[1]));
    assert.equal(second[1].name, 'conflict');
    assert.equal(second[2].ok, true);
  }],

  ['allDocs: all, keys with a deleted and a missing id, range, include_docs', async () => {
    const all = await remote.allDocs();
    assert.deepEqual(all.rows.map((r) => r.id), ['b1', 'b2', 'b3', 'b4', revs.posted.id].sort());
    const keyed = await remote.allDocs({ keys: ['b2', 'a', 'zzz'], include_docs: true });
    assert.equal(keyed.rows[0].doc.n, 2);
    assert.equal(keyed.rows[1].value.deleted, true, JSON.stringify(keyed.rows[1]));
    assert.equal(keyed.rows[1].doc, null, JSON.stringify(keyed.rows[1]));
    assert.equal(keyed.rows[2].error, 'not_found', JSON.stringify(keyed.rows[2]));
    // The posted document's id is a random hex uuid, which may itself fall
    // in a range such as b2..b3: leave it out of the range checks.
    const named = (rows) => rows.filter((r) => r.id !== revs.posted.id);
    const range = await remote.allDocs({ startkey: 'b2', endkey: 'b3', include_docs: true });
    assert.deepEqual(named(range.rows).map((r) => [r.id, r.doc.n]), [['b2', 2], ['b3', 3]]);
    const exclusive = await remote.allDocs({ startkey: 'b1', endkey: 'b3', inclusive_end: false });
    assert.deepEqual(named(exclusive.rows).map((r) => r.id), ['b1', 'b2']);
  }],

  ['changes: one-shot, since, doc_ids, style all_docs with include_docs', async () => {
    const all = await remote.changes({ include_docs: true, style: 'all_docs' });
    const ids = all.results.map((r) => r.id);
    assert.deepEqual([...ids].sort(), ['a', 'b1', 'b2', 'b3', 'b4', revs.posted.id].sort());
    const a = all.results.find((r) => r.id === 'a');
    assert.equal(a.deleted, true);
    assert.equal(a.doc._deleted, true);
    const b1 = all.results.find((r) => r.id === 'b1');
    assert.equal(b1.doc.n, 10);
    assert.deepEqual(b1.changes, [{ rev: b1.doc._rev }]);

    const filtered = await remote.changes({ doc_ids: ['b3', 'a'] });
    assert.deepEqual(filtered.results.map((r) => r.id).sort(), ['a', 'b3']);

    const after = await remote.changes({ since: all.last_seq });
    assert.equal(after.results.length, 0);
  }],

  ['live changes see new writes, then cancel', async () => {
    const seen = [];
    let error = null;
    const feed = remote.changes({ live: true, since: 'now', include_docs: true })
      .on('change', (change) => seen.push(change))
      .on('error', (err) => { error = err; });
    const completed = new Promise((resolve) => feed.on('complete', resolve));
    // `since: 'now'` is resolved when the feed's request reaches the server,
    // which a loaded machine may delay: write until one write is seen.
    const revs = new Map();
    let n = 0;
    let lastPut = 0;
    await waitFor('a new write in the live feed', async () => {
      assert.equal(error, null);
      if (seen.some((c) => revs.get(c.id) === c.doc._rev)) {
        return true;
      }
      if (Date.now() - lastPut > 1000) {
        n += 1;
        const put = await remote.put({ _id: `live-${n}`, live: true });
        revs.set(`live-${n}`, put.rev);
        lastPut = Date.now();
      }
      return false;
    });
    feed.cancel();
    await completed;
    assert.ok(seen.every((c) => c.id.startsWith('live-')), `only new changes: ${JSON.stringify(seen.map((c) => c.id))}`);
  }],

  ['attachments: putAttachment, getAttachment, removeAttachment', async () => {
    const bytes = Buffer.from('attachment through the HTTP adapter\n');
    const put = await remote.putAttachment('with-att', 'a.txt', bytes, 'text/plain');
    const got = await remote.getAttachment('with-att', 'a.txt');
    assert.ok(Buffer.isBuffer(got) && got.equals(bytes), `attachment bytes: ${got}`);
    const doc = await remote.get('with-att');
    // Stored gzip-compressed (a text type), as CouchDB stores it.
    const stored = await storedDigest(`${base}/${dbName}/with-att/a.txt`);
    assert.equal(stored.encoding, 'gzip');
    assert.equal(doc._attachments['a.txt'].digest, stored.digest);
    assert.equal(doc._attachments['a.txt'].length, bytes.length);
    const inline = await remote.get('with-att', { attachments: true });
    assert.equal(inline._attachments['a.txt'].data, bytes.toString('base64'));
    const removed = await remote.removeAttachment('with-att', 'a.txt', put.rev);
    assert.equal(await status(remote.getAttachment('with-att', 'a.txt')), 404);
    const after = await remote.get('with-att');
    assert.equal(after._rev, removed.rev);
    assert.equal(after._attachments, undefined);
  }],

  ['revsDiff and bulkGet', async () => {
    const b1 = await remote.get('b1');
    const diff = await remote.revsDiff({ b1: [b1._rev, '9-deadbeef'], nope: ['1-abc'] });
    assert.deepEqual(diff, {
      b1: { missing: ['9-deadbeef'], possible_ancestors: [b1._rev] },
      nope: { missing: ['1-abc'] },
    });
    const got = await remote.bulkGet({ docs: [{ id: 'b1', rev: b1._rev }, { id: 'nope', rev: '1-abc' }], revs: true });
    assert.equal(got.results.length, 2);
    assert.equal(got.results[0].docs[0].ok._rev, b1._rev);
    assert.equal(got.results[0].docs[0].ok._revisions.start, 2);
    assert.ok(got.results[1].docs[0].error, JSON.stringify(got.results[1]));
  }],

  ['_local documents', async () => {
    const put = await remote.put({ _id: '_local/state', step: 1 });
    const doc = await remote.get('_local/state');
    assert.equal(doc.step, 1);
    await remote.put({ ...doc, step: 2 });
    assert.equal((await remote.get('_local/state')).step, 2);
    const all = await remote.allDocs();
    assert.ok(!all.rows.some((r) => r.id.startsWith('_local/')), '_local docs are not in allDocs');
    assert.ok(put.rev, 'a _local rev');
    await remote.remove(await remote.get('_local/state'));
    assert.equal(await status(remote.get('_local/state')), 404);
  }],

  ['destroy the remote database', async () => {
    await remote.destroy();
    const res = await http('GET', `${base}/${dbName}`);
    assert.equal(res.status, 404, res.text);
  }],
]);
