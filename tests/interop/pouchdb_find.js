'use strict';
// pouchdb-find (PouchDB's Mango plugin) against recliner over HTTP: it
// creates indexes, lists and deletes them, and queries with selectors,
// sort, fields, limit, skip and bookmarks, and explain, as an application
// using PouchDB against CouchDB does.
//
//   RECLINER_URL=http://127.0.0.1:5984 node pouchdb_find.js

const { assert, serverUrl, uniqueName, runSteps, pouchdb } = require('./lib');

const PouchDB = pouchdb();
const remote = new PouchDB(`${serverUrl()}/${uniqueName('pouch-find')}`);

runSteps('pouchdb_find', [
  ['seed documents', async () => {
    const docs = [];
    for (let n = 0; n < 60; n++) {
      docs.push({ _id: `doc${String(n).padStart(2, '0')}`, n, kind: n % 2 ? 'odd' : 'even', tags: [`t${n % 5}`] });
    }
    const written = await remote.bulkDocs(docs);
    assert.ok(written.every((r) => r.ok), JSON.stringify(written));
  }],

  ['createIndex, getIndexes and an index-backed find', async () => {
    const made = await remote.createIndex({ index: { fields: ['kind', 'n'] }, ddoc: 'kind-n', name: 'kind-n' });
    assert.equal(made.result, 'created');
    const again = await remote.createIndex({ index: { fields: ['kind', 'n'] }, ddoc: 'kind-n', name: 'kind-n' });
    assert.equal(again.result, 'exists');
    const { indexes } = await remote.getIndexes();
    assert.deepEqual(indexes.map((i) => i.name), ['_all_docs', 'kind-n']);

    const found = await remote.find({
      selector: { kind: 'odd', n: { $gte: 40 } },
      sort: [{ kind: 'desc' }, { n: 'desc' }],
      fields: ['_id', 'n'],
      limit: 3,
    });
    assert.deepEqual(found.docs, [{ _id: 'doc59', n: 59 }, { _id: 'doc57', n: 57 }, { _id: 'doc55', n: 55 }]);
    assert.equal(found.warning, undefined);
  }],

  ['bookmarks page through every match', async () => {
    const seen = [];
    let bookmark;
    for (;;) {
      const page = await remote.find({ selector: { kind: 'even' }, limit: 7, bookmark });
      if (page.docs.length === 0) break;
      seen.push(...page.docs.map((d) => d._id));
      bookmark = page.bookmark;
    }
    assert.equal(seen.length, 30);
    assert.equal(new Set(seen).size, 30);
  }],

  ['a find without an index warns, and explain names the index', async () => {
    const scan = await remote.find({ selector: { tags: { $elemMatch: { $eq: 't3' } } }, limit: 100 });
    assert.equal(scan.docs.length, 12);
    assert.match(scan.warning, /No matching index found/);
    const explained = await remote.explain({ selector: { kind: 'odd', n: { $gt: 10 } } });
    assert.equal(explained.index.name, 'kind-n');
    assert.deepEqual(explained.mrargs.start_key, ['odd', 10]);
  }],

  ['deleteIndex', async () => {
    const { indexes } = await remote.getIndexes();
    const index = indexes.find((i) => i.name === 'kind-n');
    const deleted = await remote.deleteIndex(index);
    assert.equal(deleted.ok, true);
    const after = await remote.getIndexes();
    assert.deepEqual(after.indexes.map((i) => i.name), ['_all_docs']);
    await remote.destroy();
  }],
]);
