'use strict';
// The console's Views page end to end in a real browser: a database with
// documents and a design document with two views (one reduced by _sum), a
// show, a list, an update, a filter and a validate_doc_update. The page
// lists them; views run with key, startkey/endkey, descending, limit, skip
// and include_docs, and with reduce grouped exactly and by level, each
// compared with the same query over HTTP, and a reload of the run's link
// shows the same rows. A new view is written and saved (checked over HTTP),
// a map function with a syntax error shows the server's compile error under
// it and changes nothing, an edit conflict is named, a view is deleted. A
// member sees and runs the views without edit controls; a database admin by
// role gets them.

const { assert, uniqueName, runSteps, waitFor } = require('./lib');
const {
  USER, PASSWORD, api, enc, openSession, login, visit, heading, shot, noProblems, expectRefusals, closeAll, createUser,
} = require('./console_lib');

const SCRIPT = 'console_views.js';
const db = uniqueName('console-views');
const member = uniqueName('views-member');
const designer = uniqueName('views-designer');
const DOCS = 30;
const DDOC = '_design/shop';
let page;

const DESIGN = {
  _id: DDOC,
  language: 'javascript',
  views: {
    by_kind: {
      map: 'function (doc) { if (doc.kind) emit([doc.kind, doc.n], doc.n); }',
      reduce: '_sum',
    },
    by_n: {
      map: 'function (doc) { if (typeof doc.n === "number") emit(doc.n, doc.name); }',
    },
  },
  shows: { detail: 'function (doc, req) { return doc ? doc.name : "none"; }' },
  lists: { names: 'function (head, req) { var row; while ((row = getRow())) { send(row.value + "\\n"); } }' },
  updates: { touch: 'function (doc, req) { doc.touched = true; return [doc, "touched"]; }' },
  filters: { fruit: 'function (doc, req) { return doc.kind === "fruit"; }' },
  validate_doc_update: 'function (newDoc, oldDoc, userCtx) { if (newDoc.n === -1) throw({forbidden: "no -1"}); }',
};

function dbUrl(p = '') {
  return `/${enc(db)}${p}`;
}

/** The view's answer over HTTP as the admin, for `params`. */
async function viewHttp(view, params = {}) {
  const q = new URLSearchParams(params).toString();
  const res = await api('GET', dbUrl(`/${DDOC}/_view/${view}${q ? `?${q}` : ''}`));
  assert.equal(res.status, 200, res.text);
  return res.json;
}

/** Rows as the page shows them: key, value, id and doc cells' text. */
function pageRows() {
  return page.locator('.view-table tbody tr').evaluateAll((trs) => trs.map((tr) => {
    const cell = (c) => {
      const el = tr.querySelector(`.${c}`);
      return el ? el.textContent : null;
    };
    return { key: cell('cell-key'), value: cell('cell-value'), id: cell('cell-id'), doc: cell('cell-doc') };
  }));
}

/** The same rows as the page would show an HTTP answer's. */
function expected(answer, { ids = true } = {}) {
  return answer.rows.map((row) => ({
    key: JSON.stringify(row.key),
    value: JSON.stringify(row.value),
    id: ids ? row.id : null,
    doc: row.doc === undefined ? null : JSON.stringify(row.doc),
  }));
}

/** Waits for the page to show `rows` once its run is over, then checks them. */
async function expectRows(rows) {
  await waitFor('the view run to show the expected rows', async () => {
    const busy = await page.locator('.view-results').getAttribute('aria-busy');
    return busy === 'false' && JSON.stringify(await pageRows()) === JSON.stringify(rows);
  }).catch(() => {});
  assert.equal(await page.locator('.view-results').getAttribute('aria-busy'), 'false');
  assert.deepEqual(await pageRows(), rows);
}

async function ddocOverHttp() {
  const res = await api('GET', dbUrl(`/${DDOC}`));
  assert.equal(res.status, 200, res.text);
  return res.json;
}

/** The route's parameters of the current page. */
async function routeParams() {
  const hash = await page.evaluate(() => window.location.hash);
  return Object.fromEntries(new URLSearchParams(hash.split('?')[1] || ''));
}

const steps = [
  ['a database with documents and a design document', async () => {
    assert.equal((await api('PUT', dbUrl())).status, 201);
    const docs = [];
    for (let i = 0; i < DOCS; i += 1) {
      docs.push({ _id: `doc-${String(i).padStart(2, '0')}`, n: i, name: `item ${i}`, kind: ['fruit', 'veg', 'nut'][i % 3] });
    }
    assert.equal((await api('POST', dbUrl('/_bulk_docs'), { docs })).status, 201);
    const res = await api('PUT', dbUrl(`/${DDOC}`), DESIGN);
    assert.equal(res.status, 201, res.text);
    const other = await api('PUT', dbUrl('/_design/other'), { views: { all: { map: 'function (doc) { emit(doc._id, null); }' } } });
    assert.equal(other.status, 201, other.text);
  }],

  ['the design documents, views and functions are listed', async () => {
    const session = await openSession('admin');
    page = session.page;
    await login(session, USER, PASSWORD);
    await visit(page, `#/db/${enc(db)}/views`);
    await heading(page, 'Views');
    const card = page.locator(`section[data-ddoc="${DDOC}"]`);
    await card.waitFor({ timeout: 10000 });
    const views = await card.locator('tbody tr').evaluateAll((trs) => trs.map((tr) => tr.dataset.view));
    assert.deepEqual(views, ['by_kind', 'by_n']);
    assert.equal(await card.locator('tr[data-view="by_kind"] td').first().textContent(), '_sum');
    for (const [kind, name] of [['shows', 'detail'], ['lists', 'names'], ['updates', 'touch'], ['filters', 'fruit'], ['validate_doc_update', 'validate_doc_update']]) {
      const text = await card.locator(`[data-kind="${kind}"] dd`).textContent();
      assert.ok(text.includes(name), `${kind}: ${text}`);
    }
    // The list function links to running it over each view, and that works.
    const listLink = card.getByRole('link', { name: 'Run list names over view by_n' });
    const href = await listLink.getAttribute('href');
    assert.equal(href, `/${enc(db)}/_design/shop/_list/names/by_n`);
    const listed = await api('GET', href);
    assert.equal(listed.status, 200, listed.text);
    assert.ok(listed.text.includes('item 7'), listed.text);
    assert.ok(await page.locator('section[data-ddoc="_design/other"]').isVisible());
    // An admin gets the edit controls.
    assert.ok(await page.getByRole('link', { name: 'New view', exact: true }).isVisible());
    assert.ok(await card.getByRole('link', { name: 'Edit by_n' }).isVisible());
    await shot(page, 'views-list');
    noProblems();
  }],

  ['a view run with startkey, endkey, limit, skip and include_docs', async () => {
    // By keyboard: the view's link, then the form.
    await page.locator(`section[data-ddoc="${DDOC}"]`).getByRole('link', { name: 'Run by_n' }).focus();
    await page.keyboard.press('Enter');
    await heading(page, 'by_n');
    await expectRows(expected(await viewHttp('by_n', { limit: 20 })));
    assert.match(await page.locator('.view-summary').textContent(), new RegExp(`total_rows ${DOCS}`));
    await page.getByLabel('Start key').fill('5');
    await page.getByLabel('End key').fill('20');
    await page.getByLabel('Limit (rows per page)').fill('4');
    await page.getByLabel('Skip').fill('2');
    await page.getByLabel('Include documents').check();
    await page.getByLabel('End key').press('Enter');
    const want = await viewHttp('by_n', { startkey: 5, endkey: 20, include_docs: true, limit: 4, skip: 2 });
    await expectRows(expected(want));
    assert.equal(want.rows[0].key, 7);
    const summary = await page.locator('.view-summary').textContent();
    assert.match(summary, /Rows 3–6/);
    assert.match(summary, new RegExp(`total_rows ${want.total_rows} · offset ${want.offset}`));
    assert.deepEqual(await routeParams(), { startkey: '5', endkey: '20', include_docs: 'true', limit: '4', skip: '2' });
    await shot(page, 'views', { fullPage: true });

    // The next page, then a reload of its link shows the same run.
    await page.getByRole('link', { name: 'Next →' }).click();
    const next = await viewHttp('by_n', { startkey: 5, endkey: 20, include_docs: true, limit: 4, skip: 6 });
    await expectRows(expected(next));
    assert.equal(await page.getByLabel('Skip').inputValue(), '6');
    await page.reload();
    await heading(page, 'by_n');
    await expectRows(expected(next));
    assert.equal(await page.getByLabel('Start key').inputValue(), '5');
    assert.ok(await page.getByLabel('Include documents').isChecked());
    noProblems();
  }],

  ['descending, a key, and JSON checked before sending', async () => {
    await page.getByLabel('Start key').fill('20');
    await page.getByLabel('End key').fill('5');
    await page.getByLabel('Skip').fill('0');
    await page.getByLabel('Include documents').uncheck();
    await page.getByLabel('Descending').check();
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await expectRows(expected(await viewHttp('by_n', { startkey: 20, endkey: 5, descending: true, limit: 4 })));
    assert.equal((await pageRows())[0].key, '20');

    await page.getByRole('button', { name: 'Clear options' }).click();
    await page.getByLabel('Key', { exact: true }).fill('13');
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await expectRows(expected(await viewHttp('by_n', { key: 13 })));
    assert.equal((await pageRows()).length, 1);

    // Not JSON: named under the field, nothing sent, the rows stay.
    await page.getByLabel('Key', { exact: true }).fill('item 13');
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    const error = page.locator('.view-options .field-error', { hasText: 'Key is not JSON' });
    await error.waitFor({ timeout: 5000 });
    assert.equal(await page.getByLabel('Key', { exact: true }).getAttribute('aria-invalid'), 'true');
    assert.equal(await page.evaluate(() => document.activeElement.name), 'key');
    assert.equal((await routeParams()).key, '13');
    await page.getByLabel('Key', { exact: true }).fill('"item 13"');
    await page.getByLabel('Key', { exact: true }).press('Enter');
    await page.locator('.view-summary', { hasText: 'No rows' }).waitFor({ timeout: 10000 });
    assert.equal(await error.count(), 0);
    noProblems();
  }],

  ['a reduced view: all, grouped exactly and by level', async () => {
    await page.locator('.views-nav').getByRole('link', { name: 'by_kind' }).click();
    await heading(page, 'by_kind');
    const all = await viewHttp('by_kind', { limit: 21 });
    assert.equal(all.rows[0].value, (DOCS * (DOCS - 1)) / 2);
    await expectRows(expected(all, { ids: false }));
    assert.match(await page.locator('.view-summary').textContent(), /\(reduced\)/);
    // Documents are for a map's rows; grouping for a reduce.
    assert.equal(await page.getByLabel('Include documents').isVisible(), false);

    await page.getByLabel('Group').selectOption('exact');
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await expectRows(expected(await viewHttp('by_kind', { group: true, limit: 20 }), { ids: false }));
    assert.equal((await routeParams()).group, 'true');

    await page.getByLabel('Group').selectOption('1');
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    const byKind = await viewHttp('by_kind', { group_level: 1 });
    assert.equal(byKind.rows.length, 3);
    await expectRows(expected(byKind, { ids: false }));
    assert.equal((await routeParams()).group_level, '1');

    await page.getByLabel('Reduce').uncheck();
    assert.equal(await page.getByLabel('Group').isVisible(), false);
    await page.getByLabel('Include documents').check();
    await page.getByLabel('Start key').fill('["veg"]');
    await page.getByLabel('End key').fill('["veg", {}]');
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await expectRows(expected(await viewHttp('by_kind', {
      reduce: false, include_docs: true, startkey: '["veg"]', endkey: '["veg",{}]', limit: 20,
    })));
    assert.deepEqual(await routeParams(), { reduce: 'false', include_docs: 'true', startkey: '["veg"]', endkey: '["veg", {}]' });
    noProblems();
  }],

  ['a new view written and saved', async () => {
    await visit(page, `#/db/${enc(db)}/views`);
    await heading(page, 'Views');
    await page.getByRole('link', { name: 'New view', exact: true }).click();
    await heading(page, 'New view');
    await page.getByLabel('Design document', { exact: true }).selectOption('shop');
    await page.getByLabel('View name').fill('by_name');
    const map = page.getByLabel('Map function');
    await map.fill('function (doc) {\nif (doc.name) emit(doc.name, doc.n);\n}');
    // Tab indents inside the function instead of leaving it.
    await map.focus();
    await page.keyboard.press('Control+Home');
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('Tab');
    assert.equal(await map.inputValue(), 'function (doc) {\n  if (doc.name) emit(doc.name, doc.n);\n}');
    assert.equal(await page.evaluate(() => document.activeElement.tagName), 'TEXTAREA');
    await page.getByLabel('Reduce', { exact: true }).selectOption('_count');
    await page.getByRole('button', { name: 'Create and run' }).click();
    await heading(page, 'by_name');
    await expectRows([{ key: 'null', value: String(DOCS), id: null, doc: null }]);

    const ddoc = await ddocOverHttp();
    assert.equal(ddoc.views.by_name.map, 'function (doc) {\n  if (doc.name) emit(doc.name, doc.n);\n}');
    assert.equal(ddoc.views.by_name.reduce, '_count');
    assert.deepEqual(ddoc.shows, DESIGN.shows, 'the other functions are kept');
    assert.equal(ddoc.validate_doc_update, DESIGN.validate_doc_update);
    const rows = await viewHttp('by_name', { reduce: false, limit: 2 });
    assert.deepEqual(rows.rows.map((r) => r.key), ['item 0', 'item 1']);
    noProblems();
  }],

  ['a map function that does not compile: the reason inline, nothing saved', async () => {
    const before = await ddocOverHttp();
    await page.getByRole('link', { name: 'Edit view' }).click();
    await heading(page, 'Edit view');
    const broken = 'function (doc) {\n  emit(doc.name, ;\n}';
    await page.getByLabel('Map function').fill(broken);
    await page.getByRole('button', { name: 'Save and run' }).click();
    const error = page.locator('.view-editor .field-error', { hasText: "Compilation of the map function in the 'by_name' view failed" });
    await error.waitFor({ timeout: 10000 });
    assert.match(await error.textContent(), /SyntaxError/);
    // Under the map function, which keeps the user's text and is marked.
    const describedBy = await page.getByLabel('Map function').getAttribute('aria-describedby');
    assert.ok(describedBy.split(' ').includes(await error.getAttribute('id')), describedBy);
    assert.equal(await page.getByLabel('Map function').inputValue(), broken);
    assert.equal(await page.getByLabel('Map function').getAttribute('aria-invalid'), 'true');
    await shot(page, 'view-editor');
    const after = await ddocOverHttp();
    assert.equal(after._rev, before._rev, 'the design document is unchanged');
    expectRefusals(/status of 400/);
  }],

  ['an edit conflict is named', async () => {
    const current = await ddocOverHttp();
    const res = await api('PUT', dbUrl(`/${DDOC}`), { ...current, note: 'changed elsewhere' });
    assert.equal(res.status, 201, res.text);
    await page.getByLabel('Map function').fill('function (doc) { emit(doc.name, 1); }');
    await page.getByRole('button', { name: 'Save and run' }).click();
    await page.locator('.view-editor .form-error', { hasText: 'Conflict: the design document was changed' }).waitFor({ timeout: 10000 });
    const after = await ddocOverHttp();
    assert.equal(after._rev, res.json.rev);
    assert.equal(after.views.by_name.map, current.views.by_name.map);
    expectRefusals(/status of 409/);
  }],

  ['a view renamed, then deleted', async () => {
    await page.getByRole('button', { name: 'Reload (discards your changes)' }).click();
    // The editor is drawn again from the server's copy, all at once, after
    // fetching it: until the conflict's message goes, the old form is
    // still there, and a name typed into it would be lost.
    await page.locator('.view-editor .form-error', { hasText: 'Conflict' })
      .waitFor({ state: 'detached', timeout: 10000 });
    await heading(page, 'Edit view');
    await page.getByLabel('View name').fill('by_label');
    await page.getByRole('button', { name: 'Save and run' }).click();
    await heading(page, 'by_label');
    let ddoc = await ddocOverHttp();
    assert.equal(ddoc.views.by_name, undefined);
    assert.equal(ddoc.views.by_label.reduce, '_count');
    assert.equal(ddoc.note, 'changed elsewhere', 'fields the editor does not show are kept');

    await page.getByRole('link', { name: 'Edit view' }).click();
    await heading(page, 'Edit view');
    await page.getByRole('button', { name: 'Delete view' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByRole('button', { name: 'Delete view' }).click();
    await heading(page, 'Views');
    ddoc = await ddocOverHttp();
    assert.deepEqual(Object.keys(ddoc.views).sort(), ['by_kind', 'by_n']);
    const views = await page.locator(`section[data-ddoc="${DDOC}"] tbody tr`).evaluateAll((trs) => trs.map((tr) => tr.dataset.view));
    assert.deepEqual(views, ['by_kind', 'by_n']);
    noProblems();
  }],

  ['a view in a new design document, deleted with it', async () => {
    await page.getByRole('link', { name: 'New view', exact: true }).click();
    await heading(page, 'New view');
    await page.getByLabel('Design document', { exact: true }).selectOption('');
    await page.getByLabel('New design document name (after _design/)').fill('fresh');
    await page.getByLabel('View name').fill('kinds');
    await page.getByLabel('Map function').fill('function (doc) { if (doc.kind) emit(doc.kind, 1); }');
    await page.getByLabel('Reduce', { exact: true }).selectOption('custom');
    await page.getByLabel('Custom reduce function').fill('function (keys, values, rereduce) { return sum(values); }');
    await page.getByRole('button', { name: 'Create and run' }).click();
    await heading(page, 'kinds');
    await page.getByLabel('Group').selectOption('exact');
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await expectRows([['fruit', 10], ['nut', 10], ['veg', 10]].map(([k, v]) => ({ key: `"${k}"`, value: String(v), id: null, doc: null })));
    const fresh = await api('GET', dbUrl('/_design/fresh'));
    assert.equal(fresh.status, 200, fresh.text);
    assert.equal(fresh.json.language, 'javascript');
    assert.match(fresh.json.views.kinds.reduce, /return sum\(values\)/);

    // Its only view deleted: the design document goes with it.
    await page.getByRole('link', { name: 'Edit view' }).click();
    await heading(page, 'Edit view');
    await page.getByRole('button', { name: 'Delete view' }).click();
    const dialog = page.getByRole('dialog');
    assert.match(await dialog.textContent(), /the design document is deleted/);
    await dialog.getByRole('button', { name: 'Delete view' }).click();
    await heading(page, 'Views');
    assert.equal((await api('GET', dbUrl('/_design/fresh'))).status, 404);
    assert.equal(await page.locator('section[data-ddoc="_design/fresh"]').count(), 0);
    noProblems();
  }],

  ['a member runs views without edit controls', async () => {
    const password = await createUser(member);
    const security = { members: { names: [member], roles: [] }, admins: { names: [], roles: ['designers'] } };
    assert.equal((await api('PUT', dbUrl('/_security'), security)).status, 200);
    const session = await openSession('member');
    const mine = session.page;
    await login(session, member, password);
    // The databases page after login lists databases, which only admins
    // may: wait for its answer, so it cannot land over the next page.
    await mine.getByLabel('Open a database you may use').waitFor();
    expectRefusals(/_all_dbs/);
    await visit(mine, `#/db/${enc(db)}/views`);
    await heading(mine, 'Views');
    const card = mine.locator(`section[data-ddoc="${DDOC}"]`);
    await card.waitFor({ timeout: 10000 });
    assert.deepEqual(await card.locator('tbody tr').evaluateAll((trs) => trs.map((tr) => tr.dataset.view)), ['by_kind', 'by_n']);
    assert.equal(await mine.getByRole('link', { name: 'New view' }).count(), 0);
    assert.equal(await mine.getByRole('link', { name: /^Edit / }).count(), 0);
    assert.equal(await mine.getByRole('link', { name: /^New view in/ }).count(), 0);

    await card.getByRole('link', { name: 'Run by_kind' }).click();
    await heading(mine, 'by_kind');
    assert.equal(await mine.getByRole('link', { name: 'Edit view' }).count(), 0);
    await mine.getByLabel('Group').selectOption('exact');
    await mine.getByRole('button', { name: 'Run', exact: true }).click();
    const want = expected(await viewHttp('by_kind', { group: true, limit: 20 }), { ids: false });
    page = mine;
    await expectRows(want);
    await shot(mine, 'views-member', { fullPage: true });
    // The editor's route tells a member why there is nothing to edit.
    await visit(mine, `#/db/${enc(db)}/views/edit/shop/by_n`);
    await mine.locator('.callout-error', { hasText: 'Only admins of this database' }).waitFor({ timeout: 10000 });
    assert.equal(await mine.getByRole('button', { name: 'Save and run' }).count(), 0);
    noProblems();
  }],

  ['a database admin by role gets the edit controls', async () => {
    const password = await createUser(designer, ['designers']);
    const session = await openSession('designer');
    const theirs = session.page;
    await login(session, designer, password);
    await theirs.getByLabel('Open a database you may use').waitFor();
    expectRefusals(/_all_dbs/);
    await visit(theirs, `#/db/${enc(db)}/views`);
    await heading(theirs, 'Views');
    await theirs.getByRole('link', { name: 'New view', exact: true }).waitFor({ timeout: 10000 });
    assert.ok(await theirs.getByRole('link', { name: 'Edit by_kind' }).isVisible());
    noProblems();
  }],

  ['clean up', async () => {
    await closeAll();
    assert.equal((await api('DELETE', dbUrl())).status, 200);
    for (const name of [member, designer]) {
      const doc = await api('GET', `/_users/org.couchdb.user:${enc(name)}`);
      await api('DELETE', `/_users/org.couchdb.user:${enc(name)}?rev=${doc.json._rev}`);
    }
  }],
];

runSteps(SCRIPT, steps, { timeoutMs: 150000 });
