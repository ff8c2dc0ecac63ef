'use strict';
// PouchDB live two-way sync with recliner (longpoll changes feeds on both
// sides): writes, edits, deletions and attachments made on either side show
// up on the other within a bounded time; a second client sees them too; then
// the syncs are cancelled and complete.
//
//   RECLINER_URL=http://127.0.0.1:5984 node pouchdb_live_sync.js

const { assert, serverUrl, uniqueName, runSteps, waitFor, sleep, md5Digest, pouchdb, http, fetchAs } = require('./lib');

const PouchDB = pouchdb();
const base = serverUrl();
const dbName = uniqueName('pouch-live');
const remoteUrl = `${base}/${dbName}`;
const WAIT = { timeoutMs: 10000 };

const local = new PouchDB(uniqueName('live-a'), { adapter: 'memory' });
const other = new PouchDB(uniqueName('live-b'), { adapter: 'memory' });
let remote;
const syncs = [];
const syncErrors = [];

/** Starts a live sync and records its errors; `retry: false` so errors surface. */
function startSync(db, label) {
  const sync = db.sync(remote, { live: true, retry: false });
  const done = new Promise((resolve) => {
    sync.on('complete', (info) => resolve(info));
  });
  sync.on('error', (err) => {
    syncErrors.push(`${label}: ${err && (err.stack || err.message || JSON.stringify(err))}`);
  });
  sync.on('denied', (err) => {
    syncErrors.push(`${label} denied: ${JSON.stringify(err)}`);
  });
  syncs.push({ sync, done, label });
}

/** No sync has failed so far. */
function noErrors() {
  assert.deepEqual(syncErrors, [], 'live sync errors');
}

/** Waits until `db` holds `id` at `rev` (or, with `deleted`, has it deleted at `rev`). */
async function waitForRev(label, db, id, rev, { deleted = false } = {}) {
  await waitFor(`${id}@${rev} on ${label}`, async () => {
    noErrors();
    if (deleted) {
      const leaves = await db.get(id, { open_revs: [rev] });
      return leaves.length === 1 && leaves[0].ok && leaves[0].ok._deleted === true;
    }
    const doc = await db.get(id).catch(() => null);
    return doc !== null && doc._rev === rev;
  }, WAIT);
  noErrors();
}

runSteps('pouchdb_live_sync', [
  ['create the remote database and seed both sides', async () => {
    remote = new PouchDB(remoteUrl);
    assert.equal((await remote.info()).db_name, dbName);
    await local.put({ _id: 'seed-local', from: 'local' });
    await remote.put({ _id: 'seed-remote', from: 'recliner' });
  }],

  ['start live sync (local <-> recliner, other <-> recliner)', async () => {
    startSync(local, 'local');
    startSync(other, 'other');
    const seedLocal = await local.get('seed-local');
    const seedRemote = await remote.get('seed-remote');
    await waitForRev('recliner', remote, 'seed-local', seedLocal._rev);
    await waitForRev('local', local, 'seed-remote', seedRemote._rev);
    await waitForRev('other', other, 'seed-local', seedLocal._rev);
  }],

  ['a local write reaches recliner and the other client', async () => {
    const put = await local.put({ _id: 'from-local', n: 1, text: '\u00e9t\u00e9' });
    await waitForRev('recliner', remote, 'from-local', put.rev);
    await waitForRev('other', other, 'from-local', put.rev);
    const doc = await remote.get('from-local');
    assert.deepEqual(doc, { _id: 'from-local', _rev: put.rev, n: 1, text: '\u00e9t\u00e9' });
  }],

  ['a recliner write reaches both clients', async () => {
    const put = await remote.put({ _id: 'from-recliner', n: 2 });
    await waitForRev('local', local, 'from-recliner', put.rev);
    await waitForRev('other', other, 'from-recliner', put.rev);
  }],

  ['a raw HTTP write on recliner reaches the clients', async () => {
    const res = await http('PUT', `${remoteUrl}/from-curl`, { body: { n: 3, via: 'plain HTTP' } });
    assert.equal(res.status, 201, res.text);
    await waitForRev('local', local, 'from-curl', res.json.rev);
    await waitForRev('other', other, 'from-curl', res.json.rev);
  }],

  ['an edit on one client reaches the other through recliner', async () => {
    const doc = await other.get('from-local');
    doc.n = 10;
    doc.edited_by = 'other';
    const put = await other.put(doc);
    await waitForRev('recliner', remote, 'from-local', put.rev);
    await waitForRev('local', local, 'from-local', put.rev);
    assert.equal((await local.get('from-local')).edited_by, 'other');
  }],

  ['a deletion on a client reaches recliner and the other client', async () => {
    const doc = await local.get('from-recliner');
    const removed = await local.remove(doc);
    await waitForRev('recliner', remote, 'from-recliner', removed.rev, { deleted: true });
    await waitForRev('other', other, 'from-recliner', removed.rev, { deleted: true });
    const gone = await http('GET', `${remoteUrl}/from-recliner`);
    assert.equal(gone.status, 404, gone.text);
  }],

  ['an attachment put on recliner reaches the clients', async () => {
    const bytes = Buffer.from('attached over live sync\n');
    const res = await http('PUT', `${remoteUrl}/with-att/note.txt`, {
      body: bytes,
      headers: { 'content-type': 'text/plain' },
    });
    assert.equal(res.status, 201, res.text);
    await waitForRev('local', local, 'with-att', res.json.rev);
    await waitForRev('other', other, 'with-att', res.json.rev);
    for (const [label, db] of [['local', local], ['other', other]]) {
      const doc = await db.get('with-att', { attachments: true, binary: true });
      const att = doc._attachments['note.txt'];
      assert.equal(att.content_type, 'text/plain', `${label} content_type`);
      assert.ok(att.data.equals(bytes), `${label}: attachment bytes`);
      assert.equal(att.digest, md5Digest(bytes), `${label}: digest`);
    }
  }],

  ['an attachment added on a client reaches recliner', async () => {
    const bytes = Buffer.from(Array.from({ length: 4096 }, (_, i) => i % 256));
    const doc = await local.get('from-local');
    const put = await local.putAttachment('from-local', 'bytes.bin', doc._rev, bytes, 'application/octet-stream');
    await waitForRev('recliner', remote, 'from-local', put.rev);
    const res = await fetchAs(`${remoteUrl}/from-local/bytes.bin`);
    assert.equal(res.status, 200);
    assert.ok(Buffer.from(await res.arrayBuffer()).equals(bytes), 'attachment bytes on recliner');
    await waitForRev('other', other, 'from-local', put.rev);
  }],

  ['concurrent edits on both clients converge to one winner with a conflict', async () => {
    // Stop the other client first so both edit the same revision offline.
    const otherSync = syncs.find((s) => s.label === 'other');
    otherSync.sync.cancel();
    await otherSync.done;
    const base1 = await local.get('from-curl');
    const base2 = await other.get('from-curl');
    assert.equal(base1._rev, base2._rev);
    const a = await local.put({ ...base1, side: 'local' });
    await waitForRev('recliner', remote, 'from-curl', a.rev);
    const b = await other.put({ ...base2, side: 'other' });
    startSync(other, 'other (again)');
    const expectedWinner = a.rev > b.rev ? a.rev : b.rev;
    const expectedLoser = a.rev > b.rev ? b.rev : a.rev;
    for (const [label, db] of [['recliner', remote], ['local', local], ['other', other]]) {
      await waitFor(`the conflict on ${label}`, async () => {
        noErrors();
        const doc = await db.get('from-curl', { conflicts: true });
        return doc._rev === expectedWinner && JSON.stringify(doc._conflicts) === JSON.stringify([expectedLoser]);
      }, WAIT);
    }
  }],

  ['after an idle spell with heartbeats, a write still arrives', async () => {
    // A third client with a short heartbeat: recliner holds its longpoll
    // requests open, sending newlines, until something changes.
    const third = new PouchDB(uniqueName('live-c'), { adapter: 'memory' });
    const feed = third.replicate.from(remote, { live: true, retry: false, heartbeat: 500 });
    let error = null;
    feed.on('error', (err) => { error = err; });
    const done = new Promise((resolve) => feed.on('complete', resolve));
    const seed = await remote.get('from-local');
    await waitFor('third client caught up', async () => {
      assert.equal(error, null);
      return (await third.get('from-local').catch(() => ({})))._rev === seed._rev;
    }, WAIT);
    await sleep(2500);
    assert.equal(error, null, 'no error while idle');
    const put = await remote.put({ _id: 'after-idle', idle: true });
    await waitFor('after-idle on the third client', async () => {
      assert.equal(error, null);
      return (await third.get('after-idle').catch(() => ({})))._rev === put.rev;
    }, WAIT);
    feed.cancel();
    await done;
  }],

  ['cancel the live syncs', async () => {
    for (const { sync } of syncs) {
      sync.cancel();
    }
    await waitFor('every sync to complete', async () => {
      const results = await Promise.race([
        Promise.all(syncs.map((s) => s.done)).then(() => true),
        new Promise((resolve) => setTimeout(() => resolve(false), 200)),
      ]);
      return results;
    }, WAIT);
    noErrors();
  }],

  ['destroy the remote database', async () => {
    await remote.destroy();
    const res = await http('GET', remoteUrl);
    assert.equal(res.status, 404, res.text);
  }],
]);
