'use strict';
// nano (the official CouchDB client for Node.js) against recliner: server
// info and uuids, databases (create, list, get, destroy), documents (insert,
// get, head, update, destroy), bulk writes, _all_docs (GET and POST keys),
// changes, and standalone attachments (insert, get, destroy).
//
//   RECLINER_URL=http://127.0.0.1:5984 node nano_basics.js

const crypto = require('node:crypto');
const { assert, serverUrl, uniqueName, runSteps, md5Digest } = require('./lib');

const base = serverUrl();
const nano = require('nano')({ url: base });
const dbName = uniqueName('nano');
let db;
const revs = {};

/** Runs `fn`, expecting nano to reject with HTTP `status`; answers the error. */
async function rejects(status, what, fn) {
  let err;
  try {
    await fn();
  } catch (e) {
    err = e;
  }
  assert.ok(err, `${what}: expected HTTP ${status}, but the call succeeded`);
  assert.equal(err.statusCode, status, `${what}: ${err.statusCode} ${err.error} ${err.reason} (${err.message})`);
  return err;
}

runSteps('nano_basics', [
  ['server info and uuids', async () => {
    const info = await nano.info();
    assert.equal(info.couchdb, 'Welcome');
    assert.ok(info.version, 'a version');
    const { uuids } = await nano.uuids(3);
    assert.equal(uuids.length, 3);
    assert.equal(new Set(uuids).size, 3);
    for (const id of uuids) {
      assert.match(id, /^[0-9a-f]{32}$/);
    }
  }],

  ['create, list and get a database', async () => {
    const created = await nano.db.create(dbName);
    assert.equal(created.ok, true);
    const list = await nano.db.list();
    assert.ok(list.includes(dbName), `db.list includes ${dbName}: ${JSON.stringify(list)}`);
    const info = await nano.db.get(dbName);
    assert.equal(info.db_name, dbName);
    assert.equal(info.doc_count, 0);
    assert.equal(info.doc_del_count, 0);
    const again = await rejects(412, 'creating an existing database', () => nano.db.create(dbName));
    assert.equal(again.error, 'file_exists');
    await rejects(404, 'getting a missing database', () => nano.db.get(`${dbName}-missing`));
    db = nano.use(dbName);
  }],

  ['insert, get, head, update and destroy a document', async () => {
    const first = await db.insert({ name: 'first', list: [1, 'two', { three: 3 }] }, 'doc-1');
    assert.equal(first.ok, true);
    assert.equal(first.id, 'doc-1');
    assert.match(first.rev, /^1-[0-9a-f]{32}$/);

    const doc = await db.get('doc-1');
    assert.deepEqual(doc, { _id: 'doc-1', _rev: first.rev, name: 'first', list: [1, 'two', { three: 3 }] });

    const headers = await db.head('doc-1');
    assert.equal(headers.etag, `"${first.rev}"`, `HEAD etag: ${JSON.stringify(headers)}`);

    const updated = await db.insert({ ...doc, name: 'first, updated' });
    assert.match(updated.rev, /^2-/);
    const conflict = await rejects(409, 'updating a stale revision', () => db.insert({ ...doc, name: 'stale' }));
    assert.equal(conflict.error, 'conflict');

    const withRevs = await db.get('doc-1', { revs: true, revs_info: true });
    assert.equal(withRevs._revisions.start, 2);
    assert.equal(withRevs._revisions.ids.length, 2);
    const old = await db.get('doc-1', { rev: first.rev });
    assert.equal(old.name, 'first');

    const generated = await db.insert({ name: 'server-chosen id' });
    assert.match(generated.id, /^[0-9a-f]{32}$/);

    const destroyed = await db.destroy('doc-1', updated.rev);
    assert.equal(destroyed.ok, true);
    assert.match(destroyed.rev, /^3-/);
    const gone = await rejects(404, 'getting a deleted document', () => db.get('doc-1'));
    assert.equal(gone.reason, 'deleted');
    await rejects(404, 'getting a missing document', () => db.get('never-written'));
    const info = await nano.db.get(dbName);
    assert.equal(info.doc_count, 1);
    assert.equal(info.doc_del_count, 1);
  }],

  ['bulk insert, update and delete', async () => {
    const docs = Array.from({ length: 50 }, (_, i) => ({
      _id: `bulk-${String(i).padStart(2, '0')}`,
      i,
      even: i % 2 === 0,
    }));
    const written = await db.bulk({ docs });
    assert.equal(written.length, 50);
    for (const r of written) {
      assert.ok(r.ok, `bulk row ${JSON.stringify(r)}`);
      revs[r.id] = r.rev;
    }
    // Update the even ones, delete the odd ones, one with a stale rev.
    const changes = docs.map((d) =>
      d.i % 2 === 0
        ? { ...d, _rev: revs[d._id], updated: true }
        : { _id: d._id, _rev: revs[d._id], _deleted: true });
    changes.push({ _id: 'bulk-00', _rev: revs['bulk-00'], stale: true });
    const second = await db.bulk({ docs: changes });
    assert.equal(second.length, 51);
    const errors = second.filter((r) => r.error);
    assert.deepEqual(errors.map((r) => [r.id, r.error]), [['bulk-00', 'conflict']]);
    for (const r of second.filter((row) => row.ok)) {
      revs[r.id] = r.rev;
    }
    const even = await db.get('bulk-10');
    assert.equal(even.updated, true);
    await rejects(404, 'a bulk-deleted document', () => db.get('bulk-11'));
  }],

  ['_all_docs: list with include_docs, ranges, limit, and fetch by keys', async () => {
    const all = await db.list({ include_docs: true });
    // 25 even bulk docs and the one with a generated id.
    assert.equal(all.total_rows, 26);
    assert.equal(all.rows.length, 26);
    const bulkRows = all.rows.filter((r) => r.id.startsWith('bulk-'));
    assert.deepEqual(bulkRows.map((r) => r.id), Array.from({ length: 25 }, (_, i) => `bulk-${String(i * 2).padStart(2, '0')}`));
    for (const row of bulkRows) {
      assert.equal(row.key, row.id);
      assert.equal(row.value.rev, revs[row.id]);
      assert.equal(row.doc._rev, revs[row.id]);
      assert.equal(row.doc.updated, true);
    }

    const range = await db.list({ startkey: 'bulk-10', endkey: 'bulk-20', limit: 3 });
    assert.deepEqual(range.rows.map((r) => r.id), ['bulk-10', 'bulk-12', 'bulk-14']);
    const descending = await db.list({ descending: true, limit: 2, startkey: 'bulk-20' });
    assert.deepEqual(descending.rows.map((r) => r.id), ['bulk-20', 'bulk-18']);

    const fetched = await db.fetch({ keys: ['bulk-02', 'bulk-03', 'missing'] });
    assert.equal(fetched.rows.length, 3);
    assert.equal(fetched.rows[0].doc._id, 'bulk-02');
    assert.equal(fetched.rows[1].value.deleted, true, `deleted row: ${JSON.stringify(fetched.rows[1])}`);
    assert.equal(fetched.rows[2].error, 'not_found', `missing row: ${JSON.stringify(fetched.rows[2])}`);
  }],

  ['changes', async () => {
    const changes = await db.changes({ since: 0 });
    const ids = changes.results.map((r) => r.id);
    assert.equal(new Set(ids).size, ids.length, 'one row per document');
    assert.ok(ids.includes('bulk-11') && ids.includes('doc-1'), 'deletions are in the feed');
    const deleted = changes.results.find((r) => r.id === 'bulk-11');
    assert.equal(deleted.deleted, true);
    assert.ok(changes.last_seq, 'a last_seq');
    const after = await db.changes({ since: changes.last_seq });
    assert.equal(after.results.length, 0);
  }],

  ['attachments: insert, get, insert binary, destroy', async () => {
    const text = Buffer.from('plain text attachment \u2603\n', 'utf8');
    const att1 = await db.attachment.insert('with-att', 'hello.txt', text, 'text/plain');
    assert.equal(att1.ok, true);
    assert.match(att1.rev, /^1-/);
    // nano answers text/* bodies as strings, anything else as a Buffer.
    const got = await db.attachment.get('with-att', 'hello.txt');
    assert.equal(got, text.toString('utf8'), 'text attachment');

    const binary = crypto.randomBytes(256 * 1024);
    const att2 = await db.attachment.insert('with-att', 'data.bin', binary, 'application/octet-stream', { rev: att1.rev });
    assert.match(att2.rev, /^2-/);
    const gotBinary = await db.attachment.get('with-att', 'data.bin');
    assert.ok(Buffer.isBuffer(gotBinary), `attachment.get answers a Buffer for binary data, got ${typeof gotBinary}`);
    assert.ok(gotBinary.equals(binary), 'binary attachment bytes');

    const doc = await db.get('with-att');
    assert.deepEqual(Object.keys(doc._attachments).sort(), ['data.bin', 'hello.txt']);
    assert.equal(doc._attachments['data.bin'].digest, md5Digest(binary));
    assert.equal(doc._attachments['data.bin'].length, binary.length);
    assert.equal(doc._attachments['hello.txt'].content_type, 'text/plain');
    assert.equal(doc._attachments['hello.txt'].stub, true);

    const inline = await db.get('with-att', { attachments: true });
    assert.equal(inline._attachments['hello.txt'].data, text.toString('base64'));

    const removed = await db.attachment.destroy('with-att', 'hello.txt', { rev: att2.rev });
    assert.match(removed.rev, /^3-/);
    await rejects(404, 'a removed attachment', () => db.attachment.get('with-att', 'hello.txt'));
    const still = await db.attachment.get('with-att', 'data.bin');
    assert.ok(still.equals(binary), 'the other attachment is kept');
  }],

  ['destroy the database', async () => {
    const destroyed = await nano.db.destroy(dbName);
    assert.equal(destroyed.ok, true);
    const list = await nano.db.list();
    assert.ok(!list.includes(dbName), `db.list no longer includes ${dbName}`);
    await rejects(404, 'getting a destroyed database', () => nano.db.get(dbName));
  }],
]);
