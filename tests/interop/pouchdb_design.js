'use strict';
// PouchDB (node) against recliner's design-document functions: views read
// with query() (ranges, include_docs, grouped reductions), replications
// pulled through a filter function with query_params and through
// `filter: '_view'`, a filtered `changes()` on the remote database, and a
// push that recliner's validate_doc_update refuses in part (PouchDB reports
// the refusals and the accepted documents arrive).
//
//   RECLINER_URL=http://127.0.0.1:5984 node pouchdb_design.js

const { assert, serverUrl, uniqueName, runSteps, pouchdb } = require('./lib');

const PouchDB = pouchdb();
const base = serverUrl();
const dbName = uniqueName('pouch-design');
const remoteUrl = `${base}/${dbName}`;
let remote;

const ids = (docs) => docs.map((d) => d.id || d._id).filter((id) => !id.startsWith('_design/')).sort();

runSteps('pouchdb_design', [
  ['seed the remote database with a design document and typed documents', async () => {
    remote = new PouchDB(remoteUrl);
    await remote.put({
      _id: '_design/app',
      filters: { by_type: 'function (doc, req) { return doc.type === req.query.type; }' },
      views: {
        big: { map: 'function (doc) { if (doc.n > 6) { emit(doc.n); } }' },
        count: { map: 'function (doc) { if (doc.type) { emit(doc.type, 1); } }', reduce: '_count' },
      },
      validate_doc_update: "function (newDoc) { if (newDoc.type === 'banned') { throw({forbidden: 'banned documents are refused'}); } }",
    });
    const docs = [];
    for (let n = 0; n < 10; n++) {
      docs.push({ _id: `d${n}`, n, type: n % 3 === 0 ? 'fizz' : 'plain' });
    }
    const written = await remote.bulkDocs(docs);
    assert.ok(written.every((r) => r.ok), JSON.stringify(written));
  }],

  ['a filtered changes() on the remote database', async () => {
    const changes = await remote.changes({ filter: 'app/by_type', query_params: { type: 'fizz' } });
    assert.deepEqual(ids(changes.results), ['d0', 'd3', 'd6', 'd9']);
    const viewed = await remote.changes({ filter: '_view', view: 'app/big' });
    assert.deepEqual(ids(viewed.results), ['d7', 'd8', 'd9']);
  }],

  ["query() on the remote database's views", async () => {
    const rows = await remote.query('app/big', { reduce: false, descending: true });
    assert.deepEqual(rows.rows.map((r) => r.key), [9, 8, 7]);
    assert.equal(rows.total_rows, 3);
    const ranged = await remote.query('app/big', { startkey: 8, endkey: 9, include_docs: true, reduce: false });
    assert.deepEqual(ranged.rows.map((r) => r.doc._id), ['d8', 'd9']);
    const counted = await remote.query('app/count', { group: true });
    assert.deepEqual(counted.rows, [{ key: 'fizz', value: 4 }, { key: 'plain', value: 6 }]);
  }],

  ['a pull replication through a filter function with query_params', async () => {
    const local = new PouchDB(uniqueName('fizz'), { adapter: 'memory' });
    const result = await local.replicate.from(remote, { filter: 'app/by_type', query_params: { type: 'fizz' } });
    assert.equal(result.ok, true, JSON.stringify(result));
    const all = await local.allDocs();
    assert.deepEqual(ids(all.rows), ['d0', 'd3', 'd6', 'd9']);
  }],

  ["a pull replication through filter: '_view'", async () => {
    const local = new PouchDB(uniqueName('big'), { adapter: 'memory' });
    const result = await local.replicate.from(remote, { filter: '_view', view: 'app/big' });
    assert.equal(result.ok, true, JSON.stringify(result));
    const all = await local.allDocs();
    assert.deepEqual(ids(all.rows), ['d7', 'd8', 'd9']);
  }],

  ['a push that validate_doc_update refuses in part', async () => {
    const local = new PouchDB(uniqueName('push'), { adapter: 'memory' });
    await local.bulkDocs([
      { _id: 'ok1', type: 'fine' },
      { _id: 'bad1', type: 'banned' },
      { _id: 'ok2', type: 'fine' },
    ]);
    const denied = [];
    const result = await new Promise((resolve, reject) => {
      local.replicate.to(remote)
        .on('denied', (err) => denied.push(err))
        .on('complete', resolve)
        .on('error', reject);
    });
    assert.equal(result.doc_write_failures, 1, JSON.stringify(result));
    assert.equal(result.docs_written, 2, JSON.stringify(result));
    assert.equal(denied.length, 1, JSON.stringify(denied));
    assert.equal((await remote.get('ok2')).type, 'fine');
    const missing = await remote.get('bad1').catch((err) => err);
    assert.equal(missing.status, 404);
    // A direct write gets the refusal as an error.
    const refused = await remote.put({ _id: 'bad2', type: 'banned' }).catch((err) => err);
    assert.equal(refused.status, 403);
    assert.equal(refused.name, 'forbidden');
    assert.equal(refused.message, 'banned documents are refused');
  }],

  ['destroy the remote database', async () => {
    await remote.destroy();
  }],
]);
