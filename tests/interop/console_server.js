'use strict';
// The console's Server and Activity pages end to end in a real browser.
// Server, as the admin: a live setting changed (`[replicator] max_jobs`) is
// applied at once and shows in `_config`; one the server reads only at start
// (`[couchdb] os_process_timeout`) says a restart is needed; a value the
// setting cannot take shows the server's reason inline; a key is added and
// deleted; a server admin is added with a masked password and removed; a
// continuous replication shows in the active tasks; the charts measure
// requests per second and replicated documents. Activity: databases created,
// written and deleted over HTTP show with their counts, and in the log. A
// plain user sees why both pages are not for them.

const { assert, uniqueName, runSteps, waitFor, sleep } = require('./lib');
const {
  USER, PASSWORD, api, apiAs, enc, openSession, login, visit, heading, shot, noProblems,
  expectRefusals, closeAll, createUser,
} = require('./console_lib');

const SCRIPT = 'console_server.js';
const src = uniqueName('console-server-src');
const dst = uniqueName('console-server-dst');
const busy = uniqueName('console-activity');
const repId = uniqueName('console-server-rep');
const plainUser = uniqueName('plain');
const newAdmin = uniqueName('ops');
let session;
let page;

/** The value `_config` shows for a key, or its status when missing. */
async function configValue(section, key) {
  const res = await api('GET', `/_node/_local/_config/${enc(section)}/${enc(key)}`);
  return res.status === 200 ? res.json : res.status;
}

/** The configuration row of a key. */
function configRow(section, key) {
  return page.locator(`table.config-table tr[data-section="${section}"][data-key="${key}"]`);
}

/** Writes `n` documents to `db` in one request. */
async function writeDocs(db, n, prefix) {
  const docs = Array.from({ length: n }, (_, i) => ({ _id: `${prefix}-${String(i).padStart(5, '0')}`, n: i }));
  const res = await api('POST', `/${enc(db)}/_bulk_docs`, { docs });
  assert.equal(res.status, 201, res.text);
}

const steps = [
  ['log in and open the Server page', async () => {
    session = await openSession('admin');
    page = session.page;
    await login(session, USER, PASSWORD);
    await visit(page, '#/server');
    await heading(page, 'Server');
    await page.getByRole('heading', { name: 'Configuration' }).waitFor();
    await page.locator('.node-facts .stat', { hasText: 'Recliner' }).first().waitFor();
    // Node facts from _up, _versions, _membership and _system.
    await page.locator('.node-facts .stat', { hasText: /Status\s*ok/ }).waitFor({ timeout: 10000 });
    const versions = (await api('GET', '/_node/_local/_versions')).json;
    await page.locator('.node-facts .stat', { hasText: versions.recliner.version }).first().waitFor();
    const node = (await api('GET', '/_membership')).json.all_nodes[0];
    await page.locator('.node-facts .stat', { hasText: node }).first().waitFor();
    noProblems();
  }],

  ['a live setting is applied at once', async () => {
    await page.getByLabel('Section', { exact: true }).first().selectOption('replicator');
    const row = configRow('replicator', 'max_jobs');
    assert.match(await row.textContent(), /At once/);
    const input = page.getByLabel('[replicator] max_jobs', { exact: true });
    assert.equal(await input.inputValue(), await configValue('replicator', 'max_jobs'));
    await input.fill('42');
    await input.press('Enter');
    await row.locator('.config-note-live', { hasText: 'Applied: the server uses it from now on.' }).waitFor();
    assert.equal(await configValue('replicator', 'max_jobs'), '42');
    // The other keys of the section only.
    assert.equal(await page.locator('table.config-table tbody:not([hidden])').count(), 1);
    noProblems();
  }],

  ['a value the setting cannot take shows the server\'s reason', async () => {
    const input = page.getByLabel('[replicator] max_jobs', { exact: true });
    await input.fill('many');
    await input.press('Enter');
    const alert = configRow('replicator', 'max_jobs').getByRole('alert');
    await alert.waitFor();
    assert.match(await alert.textContent(), /Bad request: max_jobs must be a non-negative integer/);
    assert.equal(await configValue('replicator', 'max_jobs'), '42', 'unchanged');
    // Escape puts the saved value back.
    await input.press('Escape');
    assert.equal(await input.inputValue(), '42');
    expectRefusals(/400/);
  }],

  ['a setting read at start says a restart is needed', async () => {
    await page.getByLabel('Section', { exact: true }).first().selectOption('');
    await page.getByLabel('Find a key').fill('os_process');
    const row = configRow('couchdb', 'os_process_timeout');
    assert.match(await row.textContent(), /At next start/);
    assert.equal(await page.locator('.restart-note').isHidden(), true);
    await page.getByLabel('[couchdb] os_process_timeout', { exact: true }).fill('6000');
    await page.getByRole('button', { name: 'Save [couchdb] os_process_timeout' }).click();
    await row.locator('.config-note-later', { hasText: 'Applies at the next start' }).waitFor();
    const note = page.locator('.restart-note');
    await note.waitFor();
    assert.match(await note.textContent(), /A restart is needed for the changes of \[couchdb\] os_process_timeout/);
    assert.equal(await configValue('couchdb', 'os_process_timeout'), '6000');
    // What the server says applies at start, the page shows.
    const atStart = (await api('GET', '/_node/_local/_config/_applied_at_start')).json;
    assert.ok(atStart.couchdb.includes('os_process_timeout'), JSON.stringify(atStart));
    assert.ok(!(atStart.replicator || []).includes('max_jobs'));
    await page.getByLabel('Find a key').fill('port');
    assert.match(await configRow('chttpd', 'port').textContent(), /At next start/);
    await page.getByLabel('Find a key').fill('');
    noProblems();
  }],

  ['a key is added and deleted', async () => {
    await page.getByLabel('Section', { exact: true }).last().fill('console_test');
    await page.getByLabel('Key', { exact: true }).fill('greeting');
    await page.getByLabel('Value', { exact: true }).fill('hello');
    await page.getByRole('button', { name: 'Add key' }).click();
    const input = page.getByLabel('[console_test] greeting', { exact: true });
    await input.waitFor();
    assert.equal(await input.inputValue(), 'hello');
    assert.equal(await configValue('console_test', 'greeting'), 'hello');
    await waitFor('the new key focused', () => input.evaluate((el) => el === document.activeElement));
    await page.getByRole('button', { name: 'Delete [console_test] greeting' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByRole('button', { name: 'Delete', exact: true }).click();
    await configRow('console_test', 'greeting').waitFor({ state: 'detached' });
    assert.equal(await configValue('console_test', 'greeting'), 404);
    noProblems();
  }],

  ['a server admin is added with a masked password, then removed', async () => {
    await page.getByLabel('Section', { exact: true }).last().fill('admins');
    await page.getByLabel('Key', { exact: true }).fill(newAdmin);
    const value = page.getByLabel('Value', { exact: true });
    assert.equal(await value.getAttribute('type'), 'password', 'a password is typed masked');
    await value.fill('s3cret-pw');
    await page.getByRole('button', { name: 'Add key' }).click();
    const input = page.getByLabel(`New password for server admin ${newAdmin}`);
    await input.waitFor();
    assert.equal(await input.getAttribute('type'), 'password');
    assert.equal(await input.inputValue(), '', 'the hash is never put in a field');
    const hash = await configValue('admins', newAdmin);
    assert.match(hash, /^-pbkdf2/);
    assert.ok(!(await page.locator('main').textContent()).includes(hash), 'the hash is not shown');
    assert.equal((await apiAs(newAdmin, 's3cret-pw', 'GET', '/_node/_local/_config/admins')).status, 200);
    await shot(page, 'server-config-admins');
    await page.getByRole('button', { name: `Delete [admins] ${newAdmin}` }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete', exact: true }).click();
    await configRow('admins', newAdmin).waitFor({ state: 'detached' });
    assert.equal(await configValue('admins', newAdmin), 404);
    noProblems();
  }],

  ['a continuous replication shows in the active tasks and the charts move', async () => {
    assert.equal((await api('PUT', `/${enc(src)}`)).status, 201);
    assert.equal((await api('PUT', `/${enc(dst)}`)).status, 201);
    await writeDocs(src, 500, 'first');
    const doc = { source: `${new URL(process.env.RECLINER_URL).origin}/${enc(src)}`, target: dst, continuous: true };
    // The source's URL carries the admin's password: the page must not show it.
    const withCreds = new URL(process.env.RECLINER_URL);
    doc.source = `${withCreds.origin.replace('://', `://${enc(USER)}:${enc(PASSWORD)}@`)}/${enc(src)}`;
    doc.target = `${withCreds.origin.replace('://', `://${enc(USER)}:${enc(PASSWORD)}@`)}/${enc(dst)}`;
    assert.equal((await api('PUT', `/_replicator/${enc(repId)}`, doc)).status, 201);
    const row = page.locator('table.tasks-table tr[data-type="replication"]', { hasText: src });
    await row.waitFor({ timeout: 20000 });
    const text = await row.textContent();
    assert.match(text, new RegExp(dst));
    assert.match(text, /Continuous/);
    assert.match(text, /written/);
    assert.ok(!text.includes(PASSWORD), 'no password in the tasks table');
    // Documents written while it runs: replicated documents per second.
    for (let i = 0; i < 6; i += 1) {
      await writeDocs(src, 300, `more${i}`);
      await sleep(700);
    }
    await waitFor('the replication chart above zero', async () => Number(await page.locator('[data-chart="replication"]').getAttribute('data-peak')) > 0, { timeoutMs: 20000 });
    await waitFor('requests per second above zero', async () => Number(await page.locator('[data-chart="requests"]').getAttribute('data-current')) > 0, { timeoutMs: 15000 });
    assert.ok(Number(await page.locator('[data-chart="writes"]').getAttribute('data-peak')) > 0);
    assert.ok(Number(await page.locator('[data-chart="openDbs"]').getAttribute('data-current')) >= 2);
    assert.equal(await page.locator('[data-chart="requests"] svg polyline').count(), 1);
    await page.getByLabel('Section', { exact: true }).first().selectOption('replicator');
    await page.locator('.page-head').scrollIntoViewIfNeeded();
    await shot(page, 'server', { fullPage: true });
    noProblems();
  }],

  ['the replication ends and leaves the table', async () => {
    const rep = (await api('GET', `/_replicator/${enc(repId)}`)).json;
    assert.equal((await api('DELETE', `/_replicator/${enc(repId)}?rev=${rep._rev}`)).status, 200);
    await page.locator('table.tasks-table tr[data-type="replication"]', { hasText: src }).waitFor({ state: 'detached', timeout: 15000 });
    noProblems();
  }],

  ['Activity: databases changing show with their counts and in the log', async () => {
    await visit(page, '#/activity');
    await heading(page, 'Activity');
    await page.locator('.live-text', { hasText: 'Live' }).waitFor();
    await sleep(300);
    assert.equal((await api('PUT', `/${enc(busy)}`)).status, 201);
    for (let i = 0; i < 5; i += 1) {
      const res = await api('PUT', `/${enc(busy)}/doc-${i}`, { i });
      assert.equal(res.status, 201, res.text);
    }
    const row = page.locator(`table.activity-table tr[data-db="${busy}"]`);
    await row.waitFor({ timeout: 15000 });
    // One "created" and then "updated" events (the server may merge close ones).
    await waitFor('updates counted', async () => Number(await row.locator('.last-minute').textContent()) >= 2, { timeoutMs: 15000 });
    assert.match(await row.textContent(), /Updated/);
    const log = page.locator('.activity-log');
    await log.locator(`li[data-db="${busy}"][data-type="created"]`).waitFor();
    await log.locator(`li[data-db="${busy}"][data-type="updated"]`).first().waitFor();
    // The busiest database lately is first.
    const first = await page.locator('table.activity-table tbody tr').first().getAttribute('data-db');
    assert.equal(first, busy);
    await shot(page, 'activity');
    // Deleted: the event, and the row says so.
    assert.equal((await api('DELETE', `/${enc(busy)}`)).status, 200);
    await page.locator(`table.activity-table tr[data-db="${busy}"][data-type="deleted"]`).waitFor({ timeout: 15000 });
    await log.locator(`li[data-db="${busy}"][data-type="deleted"]`).waitFor();
    await shot(page, 'activity-deleted');
    // Keyboard: the database's link is reachable, a deleted one has none.
    assert.equal(await page.locator(`table.activity-table tr[data-db="${busy}"] a`).count(), 0);
    noProblems();
  }],

  ['the feed survives its timeouts and errors, and a new visit follows it again', async () => {
    // A long poll that times out answers no results and the same last_seq:
    // three such answers, then the real feed again.
    let timeouts = 0;
    const timeout = (route) => {
      const since = new URL(route.request().url()).searchParams.get('since');
      timeouts += 1;
      return route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify({ results: [], last_seq: since }) });
    };
    await page.route('**/_db_updates?*', timeout);
    // The poll in flight ends with an event; the next ones "time out".
    const first = uniqueName('console-activity-timeouts');
    assert.equal((await api('PUT', `/${enc(first)}`)).status, 201);
    await waitFor('three timed out polls', () => timeouts >= 3);
    await page.unroute('**/_db_updates?*', timeout);
    assert.equal((await api('DELETE', `/${enc(first)}`)).status, 200);
    await page.locator(`table.activity-table tr[data-db="${first}"][data-type="deleted"]`).waitFor({ timeout: 15000 });
    assert.equal(await page.locator('.live-text').textContent(), 'Live');

    // The server cannot be reached: "reconnecting", then the events missed
    // meanwhile arrive (the feed goes on from its last sequence).
    const failing = (route) => route.abort('connectionrefused');
    await page.route('**/_db_updates?*', failing);
    const during = uniqueName('console-activity-outage');
    assert.equal((await api('PUT', `/${enc(during)}`)).status, 201);
    await page.locator('.live-text', { hasText: 'Reconnecting' }).waitFor({ timeout: 10000 });
    const alert = page.locator('main .form-error[role="alert"]');
    await alert.locator('p', { hasText: /The feed stopped: .* Reconnecting in \d+ s\./ }).waitFor();
    await shot(page, 'activity-reconnecting');
    const missed = uniqueName('console-activity-missed');
    assert.equal((await api('PUT', `/${enc(missed)}`)).status, 201);
    await page.unroute('**/_db_updates?*', failing);
    await page.locator(`table.activity-table tr[data-db="${missed}"]`).waitFor({ timeout: 15000 });
    await page.locator('.live-text', { hasText: 'Live' }).waitFor();
    assert.equal(await alert.textContent(), '');

    // Left and opened again: one feed stops, another starts; counts kept.
    await visit(page, '#/server');
    await heading(page, 'Server');
    await visit(page, '#/activity');
    await heading(page, 'Activity');
    await page.locator(`table.activity-table tr[data-db="${busy}"]`).waitFor();
    const again = uniqueName('console-activity-again');
    assert.equal((await api('PUT', `/${enc(again)}`)).status, 201);
    await page.locator(`table.activity-table tr[data-db="${again}"]`).waitFor({ timeout: 15000 });
    for (const db of [during, missed, again]) assert.equal((await api('DELETE', `/${enc(db)}`)).status, 200);
    expectRefusals(/_db_updates|ERR_|NetworkError|NS_ERROR/);
  }],

  ['a plain user is told the pages are for server admins', async () => {
    const password = await createUser(plainUser);
    const user = await openSession('user');
    await login(user, plainUser, password);
    await visit(user.page, '#/server');
    await heading(user.page, 'Server');
    const note = user.page.locator('.admin-only');
    await note.waitFor();
    assert.match(await note.textContent(), /Server admins only/);
    assert.match(await note.textContent(), /You are not a server admin/);
    assert.equal(await user.page.locator('table.config-table').count(), 0, 'no configuration');
    assert.equal(await user.page.locator('.tasks-table').count(), 0, 'no tasks');
    await shot(user.page, 'server-refused');
    await visit(user.page, '#/activity');
    await heading(user.page, 'Activity');
    await user.page.locator('.admin-only', { hasText: 'You are not a server admin' }).waitFor();
    assert.equal(await user.page.locator('.activity-table').count(), 0);
    expectRefusals(/401/);
  }],

  ['clean up', async () => {
    await closeAll();
    for (const [section, key] of [['replicator', 'max_jobs'], ['couchdb', 'os_process_timeout']]) {
      assert.equal((await api('DELETE', `/_node/_local/_config/${section}/${key}`)).status, 200);
    }
    await api('DELETE', `/${enc(src)}`);
    await api('DELETE', `/${enc(dst)}`);
    const u = (await api('GET', `/_users/org.couchdb.user:${enc(plainUser)}`)).json;
    if (u && u._rev) await api('DELETE', `/_users/org.couchdb.user:${enc(plainUser)}?rev=${u._rev}`);
    noProblems();
  }],
];

runSteps(SCRIPT, steps, { timeoutMs: 150000 });
