'use strict';
// The web console (/_utils) end to end in a real browser (Chromium or
// Firefox, driven by playwright-core: Chromium over its DevTools protocol,
// Firefox over WebDriver BiDi): log in through the form, create a database, create and
// edit a document, resolve a conflict by picking a winner, upload an
// attachment, start replications from the form and watch the live
// dashboard (throughput chart, states), stop and delete a job, log out.
// The login form and a database's link are worked by keyboard alone.
// Every outcome is checked on the page and, where it matters, over HTTP.
// Any console error or uncaught page error fails the run.
//
// Environment: RECLINER_URL (with an admin's credentials), CONSOLE_SCREENSHOTS
// (folder for PNG screenshots, created), BROWSER (`chromium`, the default, or
// `firefox`), BROWSER_PATH (default /usr/bin/chromium or /usr/bin/firefox-esr).

const { assert, uniqueName, runSteps, waitFor, sleep, http } = require('./lib');
const {
  USER, PASSWORD, ORIGIN, CONSOLE, BROWSER, api, enc, openSession, noProblems, expectRefusals, closeAll,
  visit: visitIn, heading: headingIn, shot: shotIn,
} = require('./console_lib');

const SCRIPT = 'console_browser.js';

const db = uniqueName('console');
const source = uniqueName('console-src');
const liveTarget = uniqueName('console-live');
const snapshotTarget = uniqueName('console-snap');
const liveJob = uniqueName('live');
const snapshotJob = uniqueName('snap');
const INITIAL_DOCS = 500;
const BATCHES = 16;
const BATCH_SIZE = 200;
const TOTAL_DOCS = INITIAL_DOCS + BATCHES * BATCH_SIZE;

let context;
let page;

/** Opens a route of the console in this script's page. */
async function visit(route, options) {
  await visitIn(page, route, options);
}

async function heading(text) {
  await headingIn(page, text);
}

async function shot(name, options) {
  await shotIn(page, name, options);
}

async function writeDocs(dbName, from, count) {
  const docs = [];
  for (let i = from; i < from + count; i += 1) {
    docs.push({ _id: `doc-${String(i).padStart(6, '0')}`, n: i, text: `document number ${i}` });
  }
  const res = await api('POST', `/${enc(dbName)}/_bulk_docs`, { docs });
  assert.equal(res.status, 201, res.text);
}

async function docCount(dbName) {
  const res = await api('GET', `/${enc(dbName)}`);
  return res.status === 200 ? res.json.doc_count : -1;
}

function card(docId) {
  return page.locator(`article.job[data-doc-id="${docId}"]`);
}

async function cardStat(docId, label) {
  const text = await card(docId).locator('.job-stats div', { hasText: label }).locator('dd').textContent();
  return Number(text.replace(/[^0-9]/g, ''));
}

const steps = [
  [`start ${BROWSER}`, async () => {
    ({ context, page } = await openSession('admin'));
  }],

  ['the console asks for a login', async () => {
    const res = await page.goto(CONSOLE);
    assert.ok(res.ok(), `GET ${CONSOLE}: ${res.status()}`);
    assert.equal(new URL(page.url()).pathname, '/_utils/');
    const csp = res.headers()['content-security-policy'] || '';
    assert.match(csp, /default-src 'self'/, 'the page carries its CSP');
    await heading('Log in to Recliner');
    await page.getByLabel('User name').waitFor();
    await page.getByLabel('Password').waitFor();
    // Anonymous requests are refused: the console must log in.
    const anon = await http('GET', `${ORIGIN}/_all_dbs`);
    assert.equal(anon.status, 401);
    await shot('login');
    noProblems();
  }],

  ['log in through the form', async () => {
    // By keyboard alone: type, Tab to the password, Enter submits.
    await page.getByLabel('User name').focus();
    await page.keyboard.type(USER);
    await page.keyboard.press('Tab');
    const focused = await page.evaluate(() => document.activeElement && document.activeElement.labels
      && [...document.activeElement.labels].map((l) => l.textContent.trim()).join(' '));
    assert.equal(focused, 'Password', 'Tab moves from the user name to the password');
    await page.keyboard.type(PASSWORD);
    await page.keyboard.press('Enter');
    await heading('Databases');
    await page.locator('#user-name', { hasText: USER }).waitFor();
    const cookies = await context.cookies(ORIGIN);
    assert.ok(cookies.some((c) => c.name === 'AuthSession' && c.value), 'an AuthSession cookie is set');
    const who = await page.evaluate(() => fetch('/_session').then((r) => r.json()));
    assert.equal(who.userCtx.name, USER);
    assert.ok(!page.url().includes(PASSWORD));
    noProblems();
  }],

  ['create a database', async () => {
    await page.getByLabel('New database name').fill(db);
    await page.getByRole('button', { name: 'Create database' }).click();
    await heading(db);
    assert.equal(page.url(), `${CONSOLE}/#/db/${enc(db)}`);
    const res = await api('GET', `/${enc(db)}`);
    assert.equal(res.status, 200);
    assert.equal(res.json.doc_count, 0);
    // The list shows it (found by prefix), with its counts.
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Databases' }).click();
    await heading('Databases');
    await page.getByLabel('Find by name prefix').fill('console-');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    // The unfiltered list may show the row too: wait for the search's own
    // page (drawn at once, with its rows), or the row focused below would
    // be replaced, with the focus, when the search's page arrives.
    await page.locator('.page-head p.muted', { hasText: 'Names starting with' }).waitFor();
    const row = page.locator(`tr[data-db="${db}"]`);
    await row.waitFor();
    assert.equal((await row.locator('td').first().textContent()).trim(), '0');
    // A database opens from the keyboard: its link takes focus, Enter follows it.
    await row.getByRole('link', { name: db, exact: true }).focus();
    await page.keyboard.press('Enter');
    await heading(db);
    noProblems();
  }],

  ['add a document and edit it', async () => {
    await visit(`#/db/${enc(db)}`);
    await heading(db);
    await page.getByRole('link', { name: 'New document' }).click();
    await heading('New document');
    const editor = page.getByRole('textbox', { name: 'Document JSON' });
    await editor.fill('{\n  "_id": "doc-1",\n  "name": "first",\n  "tags": ["a", "b"]\n}');
    await page.getByRole('button', { name: 'Create document' }).click();
    await heading('doc-1');
    let res = await api('GET', `/${enc(db)}/doc-1`);
    assert.equal(res.status, 200);
    assert.equal(res.json.name, 'first');
    assert.match(res.json._rev, /^1-/);

    // A parse error is shown before saving, and saving is blocked.
    const text = await editor.inputValue();
    await editor.fill(text.replace('"first"', '"edited",'));
    await page.locator('.json-msg-error', { hasText: 'Invalid JSON' }).waitFor();
    assert.ok(await page.getByRole('button', { name: 'Save changes' }).isDisabled());
    assert.equal(await editor.getAttribute('aria-invalid'), 'true');
    await editor.fill(text.replace('"first"', '"edited"'));
    await page.locator('.json-msg-ok').waitFor();
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.locator('.page-head .mono', { hasText: /^2-/ }).waitFor();
    res = await api('GET', `/${enc(db)}/doc-1`);
    assert.equal(res.json.name, 'edited');
    assert.deepEqual(res.json.tags, ['a', 'b']);
    assert.match(res.json._rev, /^2-/);

    // A stale revision is refused by the server and the reason is shown.
    await api('PUT', `/${enc(db)}/doc-1`, { ...res.json, name: 'changed elsewhere' });
    const stale = await editor.inputValue();
    await editor.fill(stale.replace('"edited"', '"mine"'));
    await page.locator('.json-msg-ok').waitFor();
    const conflictAnswer = page.waitForResponse((r) => r.request().method() === 'PUT' && r.status() === 409);
    await page.getByRole('button', { name: 'Save changes' }).click();
    await conflictAnswer;
    await page.locator('.json-msg-error', { hasText: 'Conflict' }).waitFor();
    // That 409 is the expected answer: forget the browser's log line for it.
    expectRefusals(/status of 409/);
    await page.getByRole('button', { name: 'Reload' }).click();
    await page.locator('.page-head .mono', { hasText: /^3-/ }).waitFor();
    noProblems();
  }],

  ['upload an attachment and see it listed', async () => {
    const bytes = Buffer.from('Notes from the console test.\nLine two.\n');
    await page.getByLabel('Add an attachment').setInputFiles({ name: 'notes.txt', mimeType: 'text/plain', buffer: bytes });
    await page.getByRole('button', { name: 'Upload' }).click();
    const item = page.locator('li.att[data-name="notes.txt"]');
    await item.waitFor();
    assert.match(await item.textContent(), /text\/plain/);
    const href = await item.locator('a').getAttribute('href');
    assert.equal(href, `/${enc(db)}/doc-1/notes.txt`);
    const res = await api('GET', `/${enc(db)}/doc-1/notes.txt`);
    assert.equal(res.status, 200);
    assert.equal(res.text, bytes.toString());
    // The link downloads the same bytes with the session cookie.
    const fetched = await page.evaluate((u) => fetch(u).then((r) => r.text()), href);
    assert.equal(fetched, bytes.toString());
    const doc = await api('GET', `/${enc(db)}/doc-1`);
    assert.equal(doc.json._attachments['notes.txt'].content_type, 'text/plain');
    await page.locator('h2', { hasText: 'Attachments (1)' }).waitFor();
    noProblems();
  }],

  ['a conflict made over HTTP shows in the list and the revision tree', async () => {
    const res = await api('POST', `/${enc(db)}/_bulk_docs`, {
      new_edits: false,
      docs: [
        { _id: 'conflicted', _rev: '1-aaaa', colour: 'grey' },
        { _id: 'conflicted', _rev: '2-bbbb', colour: 'red', _revisions: { start: 2, ids: ['bbbb', 'aaaa'] } },
        { _id: 'conflicted', _rev: '3-cccc', colour: 'dark red', _revisions: { start: 3, ids: ['cccc', 'bbbb', 'aaaa'] } },
        { _id: 'conflicted', _rev: '2-dddd', colour: 'blue', _revisions: { start: 2, ids: ['dddd', 'aaaa'] } },
      ],
    });
    assert.equal(res.status, 201, res.text);
    const before = await api('GET', `/${enc(db)}/conflicted?conflicts=true`);
    assert.equal(before.json._rev, '3-cccc');
    assert.deepEqual(before.json._conflicts, ['2-dddd']);

    await visit(`#/db/${enc(db)}`);
    await heading(db);
    await page.locator('tr[data-id="conflicted"] .badge-warn', { hasText: '1 conflict' }).waitFor();
    await page.locator('tr[data-id="doc-1"]').waitFor();
    await shot('database');

    await page.getByRole('link', { name: 'conflicted', exact: true }).click();
    await heading('conflicted');
    await page.locator('.callout-warn', { hasText: '1 conflicting revision' }).waitFor();
    assert.equal(await page.locator('svg.revtree .node').count(), 4);
    assert.equal(await page.locator('svg.revtree .node-winner').getAttribute('data-rev'), '3-cccc');
    assert.equal(await page.locator('svg.revtree .node-conflict').getAttribute('data-rev'), '2-dddd');
    await shot('document', { fullPage: true });
    noProblems();
  }],

  ['pick the losing revision as the winner', async () => {
    await page.getByLabel('2-dddd').check();
    await page.getByRole('button', { name: 'Keep selected revision' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.waitFor();
    assert.match(await dialog.textContent(), /3-cccc/);
    await dialog.getByRole('button', { name: 'Keep and delete others' }).click();
    await page.locator('#status', { hasText: 'Conflict resolved' }).waitFor();
    await page.locator('.page-head .mono', { hasText: '2-dddd' }).waitFor();
    assert.equal(await page.locator('.callout-warn').count(), 0);

    const leaves = await api('GET', `/${enc(db)}/conflicted?open_revs=all`, undefined);
    assert.equal(leaves.status, 200);
    const live = leaves.json.filter((l) => l.ok && !l.ok._deleted);
    assert.equal(live.length, 1, `one live leaf remains: ${leaves.text}`);
    assert.equal(live[0].ok._rev, '2-dddd');
    assert.equal(live[0].ok.colour, 'blue');
    const after = await api('GET', `/${enc(db)}/conflicted?conflicts=true`);
    assert.equal(after.json._rev, '2-dddd');
    assert.equal(after.json._conflicts, undefined);
    // The tree now shows the deleted leaf and no conflict.
    assert.equal(await page.locator('svg.revtree .node-conflict').count(), 0);
    assert.equal(await page.locator('svg.revtree .node-deleted').count(), 1);
    noProblems();
  }],

  ['the databases page lists counts and sizes', async () => {
    await visit(`#/dbs?prefix=console-`);
    await heading('Databases');
    const row = page.locator(`tr[data-db="${db}"]`);
    await row.waitFor();
    assert.equal((await row.locator('td').first().textContent()).trim(), '2');
    assert.match(await row.textContent(), /\d+(\.\d)? (B|KB|MB)/);
    await visit(`#/dbs`);
    await heading('Databases');
    await page.locator('tr[data-db="_replicator"]').waitFor();
    await shot('databases');
    noProblems();
  }],

  ['start a continuous replication from the form while the source grows', async () => {
    let res = await api('PUT', `/${enc(source)}`);
    assert.equal(res.status, 201);
    await writeDocs(source, 0, INITIAL_DOCS);

    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Replication' }).click();
    await heading('Replication');
    const form = page.locator('form.rep-form');
    await form.getByRole('group', { name: 'Source' }).getByLabel('Database name or URL').fill(source);
    await form.getByRole('group', { name: 'Target' }).getByLabel('Database name or URL').fill(liveTarget);
    await form.getByLabel('Continuous').check();
    assert.ok(await form.getByLabel('Create the target if missing').isChecked());
    await form.getByLabel('Job name (optional)').fill(liveJob);
    await page.getByRole('button', { name: 'Start replication', exact: true }).click();
    await card(liveJob).waitFor({ timeout: 15000 });
    res = await api('GET', `/_replicator/${enc(liveJob)}`);
    assert.equal(res.status, 200);
    assert.equal(res.json.continuous, true);

    // Writes in batches while the job follows them.
    for (let b = 0; b < BATCHES; b += 1) {
      await writeDocs(source, INITIAL_DOCS + b * BATCH_SIZE, BATCH_SIZE);
      await sleep(350);
    }
    await waitFor('the target to hold every document', async () => (await docCount(liveTarget)) === TOTAL_DOCS, { timeoutMs: 30000, intervalMs: 250 });

    // The dashboard caught up: running, all written, nothing pending.
    await waitFor('the card to show every document written', async () => (await cardStat(liveJob, 'Written')) === TOTAL_DOCS, { timeoutMs: 15000 });
    await waitFor('no pending changes', async () => (await cardStat(liveJob, 'Pending')) === 0, { timeoutMs: 15000 });
    assert.equal((await card(liveJob).locator('.state').textContent()).trim(), 'Running');
    // The chart drew a non-zero throughput.
    const chart = page.locator('svg.chart-svg');
    const peak = Number(await chart.getAttribute('data-peak'));
    assert.ok(peak > 0, `the chart's peak is ${peak}`);
    const points = (await page.locator('svg.chart-svg .total-line').getAttribute('points')).trim().split(/\s+/)
      .map((p) => p.split(',').map(Number));
    const baseline = Math.max(...points.map(([, y]) => y));
    assert.ok(points.some(([, y]) => y < baseline - 20), 'the total line rises above zero');
    const peakText = await page.locator('.chart .stat', { hasText: 'Peak' }).locator('dd').textContent();
    assert.ok(Number(peakText.replace(/[^0-9.]/g, '')) > 0, `peak shown: ${peakText}`);
    noProblems();
  }],

  ['a one-shot replication with credentials reaches completed', async () => {
    const form = page.locator('form.rep-form');
    const src = form.getByRole('group', { name: 'Source' });
    await src.getByLabel('Database name or URL').fill(`${ORIGIN}/${enc(source)}`);
    await src.getByLabel('Username (optional)').fill(USER);
    await src.getByLabel('Password (optional)').fill(PASSWORD);
    await form.getByRole('group', { name: 'Target' }).getByLabel('Database name or URL').fill(snapshotTarget);
    await form.getByLabel('Continuous').uncheck();
    await form.getByLabel('Job name (optional)').fill(snapshotJob);
    await page.getByRole('button', { name: 'Start replication', exact: true }).click();
    await card(snapshotJob).waitFor({ timeout: 15000 });
    // The password left the form and shows nowhere.
    assert.equal(await src.getByLabel('Password (optional)').inputValue(), '');
    const doc = await api('GET', `/_replicator/${enc(snapshotJob)}`);
    assert.equal(doc.json.source.auth.basic.username, USER);
    assert.equal(doc.json.source.auth.basic.password, PASSWORD);

    await card(snapshotJob).locator('.state', { hasText: 'Completed' }).waitFor({ timeout: 30000 });
    assert.equal(await docCount(snapshotTarget), TOTAL_DOCS);
    await waitFor('the written count of the completed job', async () => (await cardStat(snapshotJob, 'Written')) === TOTAL_DOCS);
    const sched = await api('GET', `/_scheduler/docs/_replicator/${enc(snapshotJob)}`);
    assert.equal(sched.json.state, 'completed');
    await waitFor('the source and target on the card', async () => {
      const route = await card(snapshotJob).locator('.route').textContent();
      return route.includes(`${ORIGIN}/${source}`) && route.includes(snapshotTarget);
    }, { timeoutMs: 5000 });
    const body = await page.locator('body').innerText();
    assert.ok(!body.includes(`:${PASSWORD}@`), 'no URL with a password is shown');
    if (PASSWORD.length >= 6) assert.ok(!body.includes(PASSWORD), 'the password is not shown');
    // Let the chart show the snapshot's burst, then picture the dashboard.
    await sleep(1500);
    const peak = Number(await page.locator('svg.chart-svg').getAttribute('data-peak'));
    assert.ok(peak > 0);
    await shot('replication-full', { fullPage: true });
    // The dashboard itself: the chart and the first jobs.
    await page.locator('#throughput-heading').evaluate((el) => {
      window.scrollTo(0, el.closest('section').getBoundingClientRect().top + window.scrollY - 16);
    });
    await shot('replication');
    noProblems();
  }],

  ['stop, then delete the continuous job', async () => {
    await card(liveJob).getByRole('button', { name: `Stop replication ${liveJob}` }).click();
    await card(liveJob).locator('.state', { hasText: 'Stopped' }).waitFor({ timeout: 10000 });
    const jobs = await api('GET', '/_scheduler/jobs');
    assert.ok(!jobs.json.jobs.some((j) => j.doc_id === liveJob), 'the job no longer runs');
    // Stopped: new documents are not replicated.
    await writeDocs(source, TOTAL_DOCS, 10);
    await sleep(1500);
    assert.equal(await docCount(liveTarget), TOTAL_DOCS);

    await card(liveJob).getByRole('button', { name: `Delete replication ${liveJob}` }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByRole('button', { name: 'Delete replication' }).click();
    await card(liveJob).waitFor({ state: 'detached', timeout: 10000 });
    const gone = await api('GET', `/_replicator/${enc(liveJob)}`);
    assert.equal(gone.status, 404);
    noProblems();
  }],

  ['restart the completed one-shot job', async () => {
    await card(snapshotJob).getByRole('button', { name: `Restart replication ${snapshotJob}` }).click();
    await waitFor('the restarted job to copy the new documents', async () => (await docCount(snapshotTarget)) === TOTAL_DOCS + 10, { timeoutMs: 20000, intervalMs: 250 });
    await card(snapshotJob).locator('.state', { hasText: 'Completed' }).waitFor({ timeout: 20000 });
    noProblems();
  }],

  ['log out', async () => {
    await page.getByRole('button', { name: 'Log out' }).click();
    await heading('Log in to Recliner');
    const who = await page.evaluate(() => fetch('/_session').then((r) => r.json()));
    assert.equal(who.userCtx.name, null);
    // A reload keeps the login form (no session) and shows no data.
    await visit(`#/db/${enc(db)}`, { reload: true });
    await heading('Log in to Recliner');
    noProblems();
  }],

  ['clean up', async () => {
    await closeAll();
    for (const name of [db, source, liveTarget, snapshotTarget]) {
      await api('DELETE', `/${enc(name)}`);
    }
    const doc = await api('GET', `/_replicator/${enc(snapshotJob)}`);
    if (doc.status === 200) await api('DELETE', `/_replicator/${enc(snapshotJob)}?rev=${doc.json._rev}`);
    noProblems();
  }],
];

runSteps(SCRIPT, steps, { timeoutMs: 150000 });
