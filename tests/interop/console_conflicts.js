'use strict';
// The console's conflicts page end to end in a real browser: a database with
// conflicted documents (two and three live leaves), plain ones and one whose
// only other leaf is deleted; the page's scan finds exactly the conflicted
// ones; a revision picked for one document and the winner rule for others
// resolve them; then the field rule ("the latest by updated_at") resolves the
// rest, except a document edited since the scan, which is left alone and
// named. Every outcome is checked over HTTP.

const { assert, uniqueName, runSteps, waitFor } = require('./lib');
const {
  USER, PASSWORD, api, enc, openSession, login, visit, heading, shot, noProblems, closeAll,
} = require('./console_lib');

const SCRIPT = 'console_conflicts.js';
const db = uniqueName('console-conflicts');
const CONFLICTED = 8;
let session;
let page;

/** A revision id of generation `pos` with a 32-hex hash made of `c`. */
function rev(pos, c, i) {
  return `${pos}-${c.repeat(24)}${String(i).padStart(8, '0')}`;
}

/** The leaves of conflicted document i: "a" (later updated_at) loses to "b". */
function conflictedLeaves(i) {
  const id = `c-${i}`;
  const base = `${'0'.repeat(24)}${String(i).padStart(8, '0')}`;
  const leaf = (c, updated, extra = {}) => ({
    _id: id,
    _rev: rev(2, c, i),
    _revisions: { start: 2, ids: [rev(2, c, i).slice(2), base] },
    side: c,
    updated_at: updated,
    ...extra,
  });
  const leaves = [leaf('a', `2026-03-0${(i % 9) + 1}T10:00:00Z`), leaf('b', '2026-01-01T10:00:00Z')];
  if (i === CONFLICTED - 1) leaves.push(leaf('c', '2025-12-31T00:00:00Z'));
  return leaves;
}

async function docWithConflicts(id) {
  const res = await api('GET', `/${enc(db)}/${enc(id)}?conflicts=true`);
  assert.equal(res.status, 200, res.text);
  return res.json;
}

function rowIds() {
  return page.locator('table.conflicts-table tbody tr').evaluateAll((rows) => rows.map((r) => r.dataset.id));
}

async function resolveAndConfirm() {
  await page.getByRole('button', { name: /^Resolve \d+ selected document/ }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByRole('button', { name: 'Resolve', exact: true }).click();
}

const steps = [
  ['a database with conflicts', async () => {
    assert.equal((await api('PUT', `/${enc(db)}`)).status, 201);
    const docs = [];
    for (let i = 0; i < 20; i += 1) docs.push({ _id: `plain-${i}`, n: i });
    assert.equal((await api('POST', `/${enc(db)}/_bulk_docs`, { docs })).status, 201);
    const leaves = [];
    for (let i = 0; i < CONFLICTED; i += 1) leaves.push(...conflictedLeaves(i));
    // One document whose other leaf is deleted: no conflict to show.
    leaves.push({ _id: 'gone-0', _rev: rev(1, 'd', 0), _revisions: { start: 1, ids: [rev(1, 'd', 0).slice(2)] }, side: 'd' });
    leaves.push({ _id: 'gone-0', _rev: rev(1, 'e', 0), _revisions: { start: 1, ids: [rev(1, 'e', 0).slice(2)] }, _deleted: true });
    const res = await api('POST', `/${enc(db)}/_bulk_docs`, { docs: leaves, new_edits: false });
    assert.equal(res.status, 201, res.text);
    const c7 = await docWithConflicts(`c-${CONFLICTED - 1}`);
    assert.equal(c7._conflicts.length, 2, JSON.stringify(c7));
    assert.equal(c7._rev, rev(2, 'c', CONFLICTED - 1), 'the "c" leaf has the greatest hash and wins');
  }],

  ['log in and scan the database', async () => {
    session = await openSession('admin');
    page = session.page;
    await login(session, USER, PASSWORD);
    await visit(page, `#/db/${enc(db)}/conflicts`);
    await heading(page, 'Conflicts');
    await page.locator('.scan-text', { hasText: 'Scan complete' }).waitFor({ timeout: 15000 });
    const text = await page.locator('.scan-text').textContent();
    assert.match(text, new RegExp(`${CONFLICTED} documents in conflict`));
    const ids = await rowIds();
    assert.deepEqual(ids.sort(), Array.from({ length: CONFLICTED }, (_, i) => `c-${i}`).sort());
    // The tab of this page is the current one.
    const current = await page.locator('.tabs a[aria-current="page"]').textContent();
    assert.equal(current, 'Conflicts');
    noProblems();
  }],

  ['pick a revision for one document, the winner for two', async () => {
    // Only c-0, c-1 and c-2 selected.
    await page.getByRole('checkbox', { name: 'Select every document' }).uncheck();
    for (const id of ['c-1', 'c-2']) await page.getByRole('checkbox', { name: `Select ${id}` }).check();
    // For c-0, open its revisions and pick the losing "a" leaf (by keyboard).
    const row = page.locator('tr[data-id="c-0"]');
    await row.locator('summary').focus();
    await page.keyboard.press('Enter');
    const pick = row.getByRole('radio', { name: new RegExp(rev(2, 'a', 0)) });
    await pick.waitFor({ timeout: 10000 });
    // The differences between the leaves are named.
    assert.match(await row.locator('.leaf-picks').textContent(), /side: "a"/);
    await pick.check();
    assert.ok(await page.getByRole('checkbox', { name: 'Select c-0' }).isChecked(), 'a pick selects its document');
    await shot(page, 'conflicts');
    await resolveAndConfirm();
    await page.locator('#status', { hasText: '3 documents resolved.' }).waitFor({ timeout: 15000 });
    await page.locator('.scan-text', { hasText: `Scan complete` }).waitFor({ timeout: 15000 });
    await waitFor('the rescan to list the rest', async () => (await rowIds()).length === CONFLICTED - 3);

    const c0 = await docWithConflicts('c-0');
    assert.equal(c0._rev, rev(2, 'a', 0), 'the picked leaf is the winner');
    assert.equal(c0.side, 'a');
    assert.equal(c0._conflicts, undefined);
    for (const i of [1, 2]) {
      const doc = await docWithConflicts(`c-${i}`);
      assert.equal(doc._rev, rev(2, 'b', i), 'the winner is kept');
      assert.equal(doc._conflicts, undefined);
    }
    noProblems();
  }],

  ['the field rule resolves the rest, and a document changed since the scan is left alone', async () => {
    // c-3 changes behind the page's back: its "a" leaf is deleted.
    const del = await api('DELETE', `/${enc(db)}/c-3?rev=${rev(2, 'a', 3)}`);
    assert.equal(del.status, 200, del.text);
    await page.getByRole('checkbox', { name: 'Select every document' }).check();
    await page.getByRole('radio', { name: /The latest by a field/ }).check();
    await page.getByLabel('Field (a dotted path)').fill('updated_at');
    await resolveAndConfirm();
    await page.locator('#status', { hasText: `${CONFLICTED - 4} documents resolved.` }).waitFor({ timeout: 15000 });
    const alert = page.locator('.resolve-outcome');
    await alert.locator('li', { hasText: 'c-3' }).waitFor({ timeout: 10000 });
    assert.match(await alert.textContent(), /changed since the scan/);

    // c-3 still has its winner, alive, and no conflict left by its own change.
    const c3 = await docWithConflicts('c-3');
    assert.equal(c3._rev, rev(2, 'b', 3));
    assert.equal(c3._deleted, undefined);
    for (let i = 4; i < CONFLICTED; i += 1) {
      const doc = await docWithConflicts(`c-${i}`);
      assert.equal(doc._rev, rev(2, 'a', i), `c-${i}: the leaf with the latest updated_at is kept`);
      assert.equal(doc._conflicts, undefined, `c-${i} has no conflict left`);
    }
    await page.locator('.scan-text', { hasText: 'Scan complete' }).waitFor({ timeout: 15000 });
    await page.locator('.empty', { hasText: 'No document of' }).waitFor({ timeout: 10000 });
    await shot(page, 'conflicts-resolved');
    noProblems();
  }],

  ['clean up', async () => {
    await closeAll();
    await api('DELETE', `/${enc(db)}`);
    noProblems();
  }],
];

runSteps(SCRIPT, steps, { timeoutMs: 150000 });
