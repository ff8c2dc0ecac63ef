'use strict';
// PouchDB (memory adapter) pushes a database to recliner and pulls it back
// into a fresh local database; all three must then agree on every document:
// winning revision and body, conflicts, the whole revision tree, and the
// attachments' bytes and digests.
//
//   RECLINER_URL=http://127.0.0.1:5984 node pouchdb_replication.js

const crypto = require('node:crypto');
const { assert, serverUrl, uniqueName, runSteps, md5Digest, isCompressible, pouchdb, http, fetchAs } = require('./lib');

const PouchDB = pouchdb();
const base = serverUrl();
const dbName = uniqueName('pouch-repl');
const remoteUrl = `${base}/${dbName}`;

const source = new PouchDB(uniqueName('source'), { adapter: 'memory' });
const fresh = new PouchDB(uniqueName('fresh'), { adapter: 'memory' });
let remote;

// Attachment contents, by document id and attachment name.
const helloText = Buffer.from('Hello, Recliner! \u2713 caf\u00e9\n', 'utf8');
const noteText = Buffer.from('a note kept in a folder-like attachment name\n', 'utf8');
const bigBinary = crypto.randomBytes(5 * 1024 * 1024);
const expectedAttachments = {
  'att-text': { 'hello.txt': helloText, 'dir/note.txt': noteText },
  'att-big': { 'blob.bin': bigBinary },
};

// Revision ids for the conflict, written with new_edits:false.
const rev = (pos, letter) => `${pos}-${letter.repeat(32)}`;
const conflictBranches = [
  { _id: 'conflicted', _rev: rev(2, 'b'), _revisions: { start: 2, ids: ['b'.repeat(32), 'a'.repeat(32)] }, side: 'b' },
  { _id: 'conflicted', _rev: rev(2, 'c'), _revisions: { start: 2, ids: ['c'.repeat(32), 'a'.repeat(32)] }, side: 'c' },
  {
    _id: 'conflicted',
    _rev: rev(3, 'e'),
    _revisions: { start: 3, ids: ['e'.repeat(32), 'd'.repeat(32), 'a'.repeat(32)] },
    _deleted: true,
  },
];

// Every document id written to the source, deleted ones included.
const allIds = [];

const designDoc = {
  _id: '_design/app',
  language: 'javascript',
  views: {
    by_type: { map: 'function (doc) { if (doc.type) { emit(doc.type, doc.n || null); } }' },
    count_by_type: {
      map: 'function (doc) { if (doc.type) { emit(doc.type, 1); } }',
      reduce: '_count',
    },
  },
};

/**
 * A plain-JSON copy of a document, for deep comparison. PouchDB's leveldb
 * adapters set an attachment's `revpos` to the revision that carries its data
 * whenever they store bytes (pouchdb-adapter-leveldb-core saveAttachment), so
 * a pulled document's stubs say `revpos: 2` where CouchDB and the source say 1:
 * comparisons with a pulled PouchDB copy leave `revpos` out.
 */
function normalize(doc, { ignoreRevpos = false } = {}) {
  const copy = JSON.parse(JSON.stringify(doc));
  for (const att of Object.values(copy._attachments || {})) {
    if (ignoreRevpos) {
      delete att.revpos;
    }
    // PouchDB digests text as it is; CouchDB and Recliner store it
    // compressed and digest the compressed bytes. The bytes are compared below.
    if (isCompressible(att.content_type)) {
      delete att.digest;
    }
  }
  return copy;
}

/** The revision tree of `id`: every leaf with its `_revisions` path, sorted by rev. */
async function revTree(db, id, opts) {
  const leaves = await db.get(id, { open_revs: 'all', revs: true });
  return leaves
    .map((leaf) => {
      assert.ok(leaf.ok, `open_revs for ${id} answered a missing leaf: ${JSON.stringify(leaf)}`);
      return normalize(leaf.ok, opts);
    })
    .sort((x, y) => (x._rev < y._rev ? -1 : x._rev > y._rev ? 1 : 0));
}

/** Winner with _conflicts, or {deleted: true} when the winner is a deletion. */
async function winner(db, id, opts) {
  try {
    return normalize(await db.get(id, { conflicts: true }), opts);
  } catch (err) {
    if (err.status === 404) {
      return { missing: err.reason || err.message };
    }
    throw err;
  }
}

/** `a` and `b` (labelled) hold the same documents, revision trees and attachments. */
async function compareDatabases(labelA, a, labelB, b, opts = {}) {
  const idsOf = async (db) =>
    (await db.allDocs()).rows.map((row) => `${row.id} ${row.value.rev}`).sort();
  assert.deepEqual(await idsOf(b), await idsOf(a), `_all_docs ids and revs: ${labelB} vs ${labelA}`);
  for (const id of allIds) {
    assert.deepEqual(await winner(b, id, opts), await winner(a, id, opts), `winner of ${id}: ${labelB} vs ${labelA}`);
    assert.deepEqual(
      await revTree(b, id, opts),
      await revTree(a, id, opts),
      `revision tree of ${id}: ${labelB} vs ${labelA}`,
    );
  }
  // Attachments of every leaf of the conflicted document, by revision.
  for (const [label, db] of [[labelA, a], [labelB, b]]) {
    const leaves = await db.get('conflicted-atts', { open_revs: 'all', attachments: true, binary: true });
    const texts = leaves.map((l) => [l.ok._rev, l.ok._attachments['branch.txt'].data.toString()]).sort();
    assert.deepEqual(texts, [[rev(2, '1'), 'branch one\n'], [rev(2, '2'), 'branch two, longer\n']], `${label}: leaf attachments`);
  }
  for (const [id, atts] of Object.entries(expectedAttachments)) {
    for (const [label, db] of [[labelA, a], [labelB, b]]) {
      const doc = await db.get(id, { attachments: true, binary: true });
      assert.deepEqual(Object.keys(doc._attachments).sort(), Object.keys(atts).sort(), `attachment names of ${id} on ${label}`);
      for (const [name, bytes] of Object.entries(atts)) {
        const att = doc._attachments[name];
        assert.ok(Buffer.isBuffer(att.data), `${label}: ${id}/${name} data is a Buffer, got ${typeof att.data}`);
        assert.equal(att.data.length, bytes.length, `${label}: ${id}/${name} length`);
        assert.ok(att.data.equals(bytes), `${label}: ${id}/${name} bytes differ from what was written`);
        if (!isCompressible(att.content_type)) {
          assert.equal(att.digest, md5Digest(bytes), `${label}: ${id}/${name} digest`);
        }
      }
    }
  }
}

runSteps('pouchdb_replication', [
  ['create the remote database', async () => {
    remote = new PouchDB(remoteUrl);
    const info = await remote.info(); // the HTTP adapter creates the database
    assert.equal(info.db_name, dbName);
    assert.equal(info.doc_count, 0);
    const res = await http('GET', `${base}/_all_dbs`);
    assert.ok(res.json.includes(dbName), `_all_dbs lists ${dbName}: ${res.text}`);
  }],

  ['write the source: plain docs, edits, a deletion, a design doc, a _local doc', async () => {
    const docs = [];
    for (let n = 0; n < 25; n += 1) {
      docs.push({
        _id: `doc-${String(n).padStart(3, '0')}`,
        type: n % 2 ? 'odd' : 'even',
        n,
        nested: { list: [n, String(n), n % 3 === 0, null], deep: { x: n / 4 } },
        text: 'unicode \u00e9\u00e8 \u65e5\u672c \ud83d\ude80',
      });
    }
    docs.push({ _id: 'a/b c+d?e', type: 'odd-id', note: 'id needing URL escaping' });
    const results = await source.bulkDocs(docs);
    for (const r of results) {
      assert.ok(r.ok, `bulkDocs wrote ${JSON.stringify(r)}`);
    }
    allIds.push(...docs.map((d) => d._id));

    let edited = await source.put({ _id: 'edited', version: 1 });
    for (let v = 2; v <= 4; v += 1) {
      edited = await source.put({ _id: 'edited', _rev: edited.rev, version: v });
    }
    assert.match(edited.rev, /^4-/);
    allIds.push('edited');

    const doomed = await source.put({ _id: 'deleted', doomed: true });
    const doomed2 = await source.put({ _id: 'deleted', _rev: doomed.rev, doomed: 'soon' });
    const removed = await source.remove('deleted', doomed2.rev);
    assert.match(removed.rev, /^3-/);
    allIds.push('deleted');

    await source.put(designDoc);
    allIds.push(designDoc._id);

    await source.put({ _id: '_local/not-replicated', secret: true });
  }],

  ['write a conflict on the source with bulkDocs new_edits:false', async () => {
    const results = await source.bulkDocs(conflictBranches, { new_edits: false });
    for (const r of results) {
      assert.ok(!r.error, `new_edits:false write failed: ${JSON.stringify(r)}`);
    }
    const doc = await source.get('conflicted', { conflicts: true });
    assert.equal(doc._rev, rev(2, 'c'));
    assert.deepEqual(doc._conflicts, [rev(2, 'b')]);
    allIds.push('conflicted');
  }],

  ['write edge cases: a long history, a deleted doc with a body, a non-ASCII id, attachments on conflicting branches', async () => {
    let long = await source.put({ _id: 'long-history', step: 0 });
    for (let step = 1; step < 40; step += 1) {
      long = await source.put({ _id: 'long-history', _rev: long.rev, step });
    }
    assert.match(long.rev, /^40-/);
    allIds.push('long-history');

    const tomb = await source.put({ _id: 'tombstone-with-body', alive: true });
    await source.put({ _id: 'tombstone-with-body', _rev: tomb.rev, _deleted: true, reason: 'kept in the tombstone' });
    allIds.push('tombstone-with-body');

    await source.put({ _id: 'caf\u00e9-\u65e5\u672c-\ud83d\ude80', unicode: true });
    allIds.push('caf\u00e9-\u65e5\u672c-\ud83d\ude80');

    // Two branches with different attachments: the puller fetches each leaf's
    // attachments, not only the winner's.
    const branchAtt = (letter, text) => ({
      _id: 'conflicted-atts',
      _rev: rev(2, letter),
      _revisions: { start: 2, ids: [letter.repeat(32), 'f'.repeat(32)] },
      branch: letter,
      _attachments: { 'branch.txt': { content_type: 'text/plain', data: Buffer.from(text) } },
    });
    const results = await source.bulkDocs(
      [branchAtt('1', 'branch one\n'), branchAtt('2', 'branch two, longer\n')],
      { new_edits: false },
    );
    for (const r of results) {
      assert.ok(!r.error, `new_edits:false write failed: ${JSON.stringify(r)}`);
    }
    allIds.push('conflicted-atts');
  }],

  ['write attachments on the source: text, a slash in a name, 5 MiB binary', async () => {
    const text = await source.put({
      _id: 'att-text',
      kind: 'text',
      _attachments: {
        'hello.txt': { content_type: 'text/plain', data: helloText },
        'dir/note.txt': { content_type: 'text/plain', data: noteText },
      },
    });
    // A later edit keeps the attachments as stubs (revpos 1 under rev 2).
    const doc = await source.get('att-text');
    doc.kind = 'text, edited';
    const edited = await source.put(doc);
    assert.match(edited.rev, /^2-/, `edit of ${text.id}`);

    await source.put({
      _id: 'att-big',
      kind: 'binary',
      _attachments: { 'blob.bin': { content_type: 'application/octet-stream', data: bigBinary } },
    });
    allIds.push('att-text', 'att-big');
  }],

  ['push the source to recliner', async () => {
    const result = await source.replicate.to(remote);
    assert.equal(result.ok, true, `replication result: ${JSON.stringify(result)}`);
    assert.equal(result.doc_write_failures, 0, `write failures: ${JSON.stringify(result.errors)}`);
    assert.ok(result.docs_written >= allIds.length, `docs_written ${result.docs_written} < ${allIds.length}`);
  }],

  ['recliner matches the source', async () => {
    await compareDatabases('source', source, 'recliner', remote);
    const [srcInfo, remoteInfo] = await Promise.all([source.info(), remote.info()]);
    assert.equal(remoteInfo.doc_count, srcInfo.doc_count, 'doc_count');
    const local = await remote.get('_local/not-replicated').catch((err) => err);
    assert.equal(local.status, 404, `_local docs are not replicated: ${JSON.stringify(local)}`);
  }],

  ['recliner holds the conflict, the deletion and the attachments (plain HTTP)', async () => {
    const conflicted = await http('GET', `${remoteUrl}/conflicted?conflicts=true`);
    assert.equal(conflicted.status, 200, conflicted.text);
    assert.equal(conflicted.json._rev, rev(2, 'c'));
    assert.deepEqual(conflicted.json._conflicts, [rev(2, 'b')]);
    const leaves = await remote.get('conflicted', { open_revs: 'all', revs: true });
    assert.deepEqual(
      leaves.map((l) => [l.ok._rev, l.ok._deleted === true, l.ok._revisions.ids.length]).sort(),
      [[rev(2, 'b'), false, 2], [rev(2, 'c'), false, 2], [rev(3, 'e'), true, 3]],
    );

    const deleted = await http('GET', `${remoteUrl}/deleted`);
    assert.equal(deleted.status, 404, deleted.text);
    assert.equal(deleted.json.reason, 'deleted', deleted.text);

    const escaped = await http('GET', `${remoteUrl}/${encodeURIComponent('a/b c+d?e')}`);
    assert.equal(escaped.status, 200, escaped.text);
    assert.equal(escaped.json._id, 'a/b c+d?e');

    const big = await fetchAs(`${remoteUrl}/att-big/blob.bin`);
    assert.equal(big.status, 200);
    assert.equal(big.headers.get('content-type'), 'application/octet-stream');
    const bytes = Buffer.from(await big.arrayBuffer());
    assert.ok(bytes.equals(bigBinary), `GET /att-big/blob.bin: ${bytes.length} bytes, not what was pushed`);
    const note = await fetchAs(`${remoteUrl}/att-text/dir/note.txt`);
    assert.equal(note.status, 200);
    assert.ok(Buffer.from(await note.arrayBuffer()).equals(noteText));
  }],

  ['recliner keeps the edge cases', async () => {
    const long = await http('GET', `${remoteUrl}/long-history?revs=true`);
    assert.equal(long.json._revisions.start, 40);
    assert.equal(long.json._revisions.ids.length, 40);
    const tomb = await remote.get('tombstone-with-body', { open_revs: 'all' });
    assert.equal(tomb.length, 1);
    assert.equal(tomb[0].ok._deleted, true);
    assert.equal(tomb[0].ok.reason, 'kept in the tombstone');
    const unicode = await http('GET', `${remoteUrl}/${encodeURIComponent('caf\u00e9-\u65e5\u672c-\ud83d\ude80')}`);
    assert.equal(unicode.status, 200, unicode.text);
    assert.equal(unicode.json.unicode, true);
    const loser = await fetchAs(`${remoteUrl}/conflicted-atts/branch.txt?rev=${rev(2, '1')}`);
    assert.equal(loser.status, 200);
    assert.equal(await loser.text(), 'branch one\n');
  }],

  ['push and pull many docs in small batches', async () => {
    const many = new PouchDB(uniqueName('many'), { adapter: 'memory' });
    const docs = Array.from({ length: 230 }, (_, i) => ({ _id: `many-${String(i).padStart(4, '0')}`, i }));
    await many.bulkDocs(docs);
    const manyRemote = new PouchDB(`${base}/${dbName}-many`);
    const pushed = await many.replicate.to(manyRemote, { batch_size: 50, batches_limit: 2 });
    assert.equal(pushed.docs_written, 230, JSON.stringify(pushed));
    const back = new PouchDB(uniqueName('many-back'), { adapter: 'memory' });
    const pulled = await back.replicate.from(manyRemote, { batch_size: 40 });
    assert.equal(pulled.docs_written, 230, JSON.stringify(pulled));
    const rows = (await back.allDocs({ include_docs: true })).rows;
    assert.deepEqual(rows.map((r) => r.doc.i), docs.map((d) => d.i));
    assert.equal((await manyRemote.info()).doc_count, 230);
    await manyRemote.destroy();
  }],

  ['a second push writes nothing (checkpoint on recliner)', async () => {
    const result = await source.replicate.to(remote);
    assert.equal(result.ok, true);
    assert.equal(result.docs_written, 0, `second push: ${JSON.stringify(result)}`);
  }],

  ['pull recliner into a fresh local database', async () => {
    const result = await fresh.replicate.from(remote);
    assert.equal(result.ok, true, `replication result: ${JSON.stringify(result)}`);
    assert.equal(result.doc_write_failures, 0, `write failures: ${JSON.stringify(result.errors)}`);
    assert.ok(result.docs_written >= allIds.length, `docs_written ${result.docs_written} < ${allIds.length}`);
  }],

  ['the fresh database matches recliner and the source', async () => {
    await compareDatabases('recliner', remote, 'fresh', fresh, { ignoreRevpos: true });
    await compareDatabases('source', source, 'fresh', fresh, { ignoreRevpos: true });
  }],

  ['the replicated design document works locally', async () => {
    const odd = await fresh.query('app/by_type', { key: 'odd' });
    assert.equal(odd.rows.length, 12);
    const counts = await fresh.query('app/count_by_type', { group: true });
    assert.deepEqual(counts.rows, [
      { key: 'even', value: 13 },
      { key: 'odd', value: 12 },
      { key: 'odd-id', value: 1 },
    ]);
  }],

  ['an edit on recliner is pulled incrementally', async () => {
    const doc = await remote.get('doc-000');
    doc.edited_on = 'recliner';
    const put = await remote.put(doc);
    const result = await fresh.replicate.from(remote);
    assert.equal(result.docs_written, 1, `incremental pull: ${JSON.stringify(result)}`);
    const local = await fresh.get('doc-000');
    assert.equal(local._rev, put.rev);
    assert.equal(local.edited_on, 'recliner');
  }],

  ['destroy the remote database', async () => {
    await remote.destroy();
    const res = await http('GET', remoteUrl);
    assert.equal(res.status, 404, `GET after destroy: ${res.status} ${res.text}`);
  }],
]);
