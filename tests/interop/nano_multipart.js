'use strict';
// nano's multipart calls against recliner: a document with attachments
// uploaded as one multipart/related PUT, and read back as multipart/related
// (GET ?attachments=true with Accept: multipart/related).
//
//   RECLINER_URL=http://127.0.0.1:5984 node nano_multipart.js

const crypto = require('node:crypto');
const { assert, serverUrl, uniqueName, runSteps, md5Digest, storedDigest } = require('./lib');

const base = serverUrl();
const nano = require('nano')({ url: base });
const dbName = uniqueName('nano-mp');
let db;
let rev1;

// nano states each part's length as the JS string length: keep text ASCII.
const text = 'multipart text attachment\n';
const binary = crypto.randomBytes(64 * 1024);

runSteps('nano_multipart', [
  ['create the database', async () => {
    await nano.db.create(dbName);
    db = nano.use(dbName);
  }],

  ['multipart/related PUT of a document with two attachments', async () => {
    const res = await db.multipart.insert(
      { kind: 'multipart', n: 1 },
      [
        { name: 'note.txt', data: text, content_type: 'text/plain' },
        { name: 'data.bin', data: binary, content_type: 'application/octet-stream' },
      ],
      'mp-doc',
    );
    assert.equal(res.ok, true, JSON.stringify(res));
    assert.match(res.rev, /^1-/);
    rev1 = res.rev;

    const doc = await db.get('mp-doc');
    assert.equal(doc.kind, 'multipart');
    assert.equal(doc._rev, rev1);
    assert.deepEqual(Object.keys(doc._attachments).sort(), ['data.bin', 'note.txt']);
    const bin = doc._attachments['data.bin'];
    assert.equal(bin.stub, true);
    assert.equal(bin.length, binary.length);
    assert.equal(bin.digest, md5Digest(binary));
    assert.equal(bin.content_type, 'application/octet-stream');
    // Text is stored gzip-compressed, as CouchDB stores it, under the digest
    // of the compressed bytes.
    const stored = await storedDigest(`${base}/${dbName}/mp-doc/note.txt`);
    assert.equal(stored.encoding, 'gzip');
    assert.equal(doc._attachments['note.txt'].digest, stored.digest);
    assert.equal(doc._attachments['note.txt'].length, Buffer.byteLength(text));

    assert.equal(await db.attachment.get('mp-doc', 'note.txt'), text);
    const gotBinary = await db.attachment.get('mp-doc', 'data.bin');
    assert.ok(Buffer.isBuffer(gotBinary) && gotBinary.equals(binary), 'binary attachment bytes');
  }],

  ['multipart/related GET of the document with its attachments', async () => {
    const body = await db.multipart.get('mp-doc');
    // nano hands back multipart/related bodies as text and JSON bodies parsed.
    assert.equal(typeof body, 'string', `expected a multipart/related answer, got JSON: ${JSON.stringify(body).slice(0, 300)}`);
    assert.ok(body.includes('"_id":"mp-doc"'), 'the document part');
    assert.ok(body.includes('"follows":true'), 'attachments marked as following');
    // The text travels as stored, gzip-compressed, as CouchDB sends it.
    assert.ok(body.includes('"encoding":"gzip"'), 'the text attachment is marked gzip-encoded');
    assert.ok(/Content-Encoding: gzip/i.test(body), 'the text attachment part is gzip-encoded');
  }],

  ['destroy the database', async () => {
    await nano.db.destroy(dbName);
  }],
]);
