'use strict';
// The console's Mango and Search pages end to end in a real browser. Mango:
// a query with a selector, fields, sort and limit whose rows match _find
// over HTTP and whose explanation names _all_docs; a query no index can sort
// refused with the server's reason inline, as is an invalid operator; an
// index created from the form (listed on the page and over HTTP) that the
// same query then uses, with its execution statistics; bookmark paging
// (Next, then Previous); the JSON view; the index deleted through the
// dialog. Search: a Nouveau index and a Clouseau-style one queried from the
// page, hits matching the server's, highlights in <mark>, facet counts that
// drill down to fewer hits, bookmark paging, a query the parser refuses.
// Then a member of the database (not its admin) runs both pages, without
// the index controls the server would refuse them.

const { assert, uniqueName, runSteps, waitFor } = require('./lib');
const {
  USER, PASSWORD, api, apiAs, enc, openSession, login, visit, heading, shot, noProblems, expectRefusals, closeAll, createUser,
} = require('./console_lib');

const SCRIPT = 'console_query.js';
const db = uniqueName('console-query');
const member = uniqueName('reader');
let memberPassword;
let session;
let page;

/** Thirty books: the database both pages query. */
const BOOKS = [
  ['Frankenstein', 'Mary Shelley', 1818, 'gothic', 'A young scientist builds a creature and flees from it across the ice of the north.'],
  ['Pride and Prejudice', 'Jane Austen', 1813, 'romance', 'Elizabeth Bennet and Mr Darcy misjudge each other over dinners and dances.'],
  ['Moby-Dick', 'Herman Melville', 1851, 'adventure', 'Captain Ahab hunts the white whale across every sea of the world.'],
  ['The Time Machine', 'H. G. Wells', 1895, 'science fiction', 'A traveller rides a machine to a far future of the dark Morlocks.'],
  ['The War of the Worlds', 'H. G. Wells', 1898, 'science fiction', 'Martians land in England and their machines burn the towns.'],
  ['Dracula', 'Bram Stoker', 1897, 'gothic', 'A count from a dark castle comes to London by sea.'],
  ['Twenty Thousand Leagues Under the Seas', 'Jules Verne', 1870, 'adventure', 'Captain Nemo takes his prisoners under the sea in the Nautilus.'],
  ['Around the World in Eighty Days', 'Jules Verne', 1872, 'adventure', 'Phileas Fogg bets that he can travel around the world by sea and rail.'],
  ['Strange Case of Dr Jekyll and Mr Hyde', 'Robert Louis Stevenson', 1886, 'gothic', 'A doctor drinks a potion and becomes his own dark double.'],
  ['Treasure Island', 'Robert Louis Stevenson', 1883, 'adventure', 'A boy sails to an island with pirates in search of buried treasure.'],
  ['Jane Eyre', 'Charlotte Brontë', 1847, 'romance', 'An orphan governess loves the master of a house with a dark secret.'],
  ['Wuthering Heights', 'Emily Brontë', 1847, 'romance', 'Heathcliff and Catherine on the wild moors, and the revenge that follows.'],
  ['The Picture of Dorian Gray', 'Oscar Wilde', 1890, 'gothic', 'A portrait ages while its young model stays beautiful and grows dark.'],
  ['Great Expectations', 'Charles Dickens', 1861, 'drama', 'Pip, an orphan, is raised to be a gentleman by an unknown benefactor.'],
  ['A Tale of Two Cities', 'Charles Dickens', 1859, 'drama', 'London and Paris in the years of the French Revolution.'],
  ['Little Women', 'Louisa May Alcott', 1868, 'drama', 'Four sisters grow up in New England during the Civil War.'],
  ['The Adventures of Tom Sawyer', 'Mark Twain', 1876, 'adventure', 'A boy on the Mississippi finds treasure in a cave.'],
  ['Adventures of Huckleberry Finn', 'Mark Twain', 1884, 'adventure', 'Huck and Jim drift down the Mississippi on a raft.'],
  ['The Hound of the Baskervilles', 'Arthur Conan Doyle', 1902, 'mystery', 'Sherlock Holmes and a dark hound on the moors of Devon.'],
  ['A Study in Scarlet', 'Arthur Conan Doyle', 1887, 'mystery', 'Holmes and Watson meet and solve a murder in London.'],
  ['The Moonstone', 'Wilkie Collins', 1868, 'mystery', 'A diamond taken from India vanishes from a country house.'],
  ['The Woman in White', 'Wilkie Collins', 1859, 'mystery', 'A woman in white on a dark road, and a fortune stolen.'],
  ['The Invisible Man', 'H. G. Wells', 1897, 'science fiction', 'A scientist makes himself invisible and cannot undo it.'],
  ['The Lost World', 'Arthur Conan Doyle', 1912, 'adventure', 'Explorers find dinosaurs on a plateau in the Amazon.'],
  ['A Princess of Mars', 'Edgar Rice Burroughs', 1912, 'science fiction', 'John Carter wakes on Mars among its warring peoples.'],
  ['The Call of the Wild', 'Jack London', 1903, 'adventure', 'A dog stolen from his home leads a sled team in the Yukon.'],
  ['The Secret Garden', 'Frances Hodgson Burnett', 1911, 'drama', 'An orphan girl brings a locked garden back to life.'],
  ['Emma', 'Jane Austen', 1815, 'romance', 'A young woman plays matchmaker in her village, and errs.'],
  ['The Turn of the Screw', 'Henry James', 1898, 'gothic', 'A governess sees ghosts at a dark country house.'],
  ['The Thirty-Nine Steps', 'John Buchan', 1915, 'mystery', 'Richard Hannay flees across Scotland from a ring of spies.'],
];
const slug = (title) => title.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '');
const DOCS = BOOKS.map(([title, author, year, genre, summary]) => ({ _id: slug(title), title, author, year, genre, summary }));

/** The index functions the search steps query. */
const NOUVEAU_FN = `function (doc) {
  if (!doc.title) return;
  index("text", "default", doc.summary);
  index("text", "title", doc.title, {store: true});
  index("string", "author", doc.author, {store: true});
  index("string", "genre", doc.genre, {store: true});
  index("double", "year", doc.year, {store: true});
}`;
const CLOUSEAU_FN = `function (doc) {
  if (!doc.title) return;
  index("default", doc.summary, {store: true});
  index("title", doc.title, {store: true});
  index("genre", doc.genre, {facet: true, store: true});
  index("year", doc.year, {facet: true});
}`;

// ----------------------------------------------------------- helpers

/** The ids of the result table's rows, in order. */
function tableIds() {
  return page.locator('.mango-results table tbody tr').evaluateAll((rows) => rows.map((r) => r.dataset.id));
}

/** The result table as [{column: text}] rows. */
function tableRows() {
  return page.locator('.mango-results table').evaluate((table) => {
    const heads = [...table.querySelectorAll('thead th')].map((th) => th.textContent);
    return [...table.querySelectorAll('tbody tr')].map((tr) => Object.fromEntries(
      [...tr.children].map((cell, i) => [heads[i], cell.textContent])));
  });
}

/** _find over HTTP as the admin. */
async function find(body) {
  const res = await api('POST', `/${enc(db)}/_find`, body);
  assert.equal(res.status, 200, res.text);
  return res.json;
}

/** Fills the query form's fields (the ones given). */
async function fillQuery({ selector, fields, sort, limit }) {
  const form = page.locator('form.mango-query');
  if (selector !== undefined) await form.getByLabel('Selector', { exact: true }).fill(selector);
  if (fields !== undefined) await form.getByLabel('Fields', { exact: true }).fill(fields);
  if (sort !== undefined) await form.getByLabel('Sort', { exact: true }).fill(sort);
  if (limit !== undefined) await form.getByLabel('Limit').fill(String(limit));
}

/** Runs the form's query and waits for its table (or an error) and its explanation. */
async function runQuery() {
  const answered = page.waitForResponse((r) => r.url().endsWith('/_explain'));
  await page.getByRole('button', { name: 'Run query' }).click();
  await answered;
  await page.getByRole('button', { name: 'Run query' }).waitFor();
  await page.locator('.mango-explain h2 ~ *').first().waitFor();
}

/** The name of the index the explanation shows as used. */
function explainedIndex() {
  return page.locator('.mango-chosen').getAttribute('data-index');
}

/** The hits' ids on the search page. */
function hitIds() {
  return page.locator('.search-hit').evaluateAll((items) => items.map((li) => li.dataset.id));
}

/** The total the hits heading shows. */
async function hitTotal() {
  const text = await page.locator('#search-hits-heading .count').textContent();
  return Number(text.replace(/[^0-9]/g, ''));
}

/** Searches and waits for the answer of the index's API. */
async function search(kind) {
  const answered = page.waitForResponse((r) => r.url().includes(`/_${kind}/`) && r.request().method() === 'POST');
  await page.getByRole('button', { name: 'Search', exact: true }).click();
  await answered;
  await page.getByRole('button', { name: 'Search', exact: true }).waitFor();
}

/** The server's answer to a search over HTTP (as the admin, or as `user` [name, password]). */
async function searchOverHttp(kind, ddoc, index, body, user) {
  const path = `/${enc(db)}/_design/${ddoc}/_${kind}/${index}`;
  const answer = user ? await apiAs(user[0], user[1], 'POST', path, body) : await api('POST', path, body);
  assert.equal(answer.status, 200, answer.text);
  return answer.json;
}

const BY_YEAR = {
  selector: '{\n  "year": {"$gte": 1850},\n  "genre": {"$in": ["adventure", "mystery", "science fiction"]}\n}',
  fields: '_id, title, author, year',
  sort: '[{"year": "desc"}]',
  limit: 6,
};
const BY_YEAR_BODY = { selector: { year: { $gte: 1850 }, genre: { $in: ['adventure', 'mystery', 'science fiction'] } }, fields: ['_id', 'title', 'author', 'year'], sort: [{ year: 'desc' }], limit: 6 };

// -------------------------------------------------------------- steps

const steps = [
  ['a database of thirty books, a member, two search indexes', async () => {
    assert.equal((await api('PUT', `/${enc(db)}`)).status, 201);
    const res = await api('POST', `/${enc(db)}/_bulk_docs`, { docs: DOCS });
    assert.equal(res.status, 201, res.text);
    memberPassword = await createUser(member);
    const sec = await api('PUT', `/${enc(db)}/_security`, { admins: { names: [], roles: [] }, members: { names: [member], roles: [] } });
    assert.equal(sec.status, 200, sec.text);
    for (const [id, doc] of [
      ['_design/books', { nouveau: { books: { default_analyzer: 'english', index: NOUVEAU_FN } } }],
      ['_design/summaries', { indexes: { summaries: { analyzer: 'english', index: CLOUSEAU_FN } } }],
    ]) {
      const put = await api('PUT', `/${enc(db)}/${id}`, doc);
      assert.equal(put.status, 201, put.text);
    }
  }],

  ['a Mango query: rows as _find answers them, explained by _all_docs', async () => {
    session = await openSession('admin');
    page = session.page;
    await login(session, USER, PASSWORD);
    await visit(page, `#/db/${enc(db)}/mango`);
    await heading(page, 'Mango');
    assert.equal(await page.locator('.tabs a[aria-current="page"]').textContent(), 'Mango');
    await fillQuery({
      selector: '{\n  "_id": {"$gt": "m"},\n  "year": {"$gte": 1880}\n}',
      fields: '_id, title, year',
      sort: '[{"_id": "asc"}]',
      limit: 5,
    });
    // Ctrl+Enter in the selector runs the query, as the hint says.
    const answered = page.waitForResponse((r) => r.url().endsWith('/_explain'));
    await page.getByLabel('Selector', { exact: true }).press('Control+Enter');
    await answered;
    await page.locator('.mango-chosen').waitFor();
    const expected = await find({ selector: { _id: { $gt: 'm' }, year: { $gte: 1880 } }, fields: ['_id', 'title', 'year'], sort: [{ _id: 'asc' }], limit: 5 });
    assert.equal(expected.docs.length, 5);
    const rows = await tableRows();
    assert.deepEqual(rows, expected.docs.map((d) => ({ _id: d._id, title: d.title, year: String(d.year) })));
    assert.equal(await explainedIndex(), '_all_docs');
    assert.match(await page.locator('.mango-warning').textContent(), /No matching index found/);
    noProblems();
  }],

  ['an invalid selector is caught as typed; the server’s refusals are shown inline', async () => {
    await page.getByLabel('Selector', { exact: true }).fill('{"year": {"$gte": 1850},}');
    await page.locator('.mango-query .json-msg-error', { hasText: 'Invalid JSON' }).waitFor();
    assert.equal(await page.getByLabel('Selector', { exact: true }).getAttribute('aria-invalid'), 'true');
    // A sort no index can give: CouchDB's reason, inline.
    await fillQuery(BY_YEAR);
    await page.locator('.mango-query .json-msg-ok').first().waitFor();
    await runQuery();
    await page.locator('.mango-results [role="alert"]', { hasText: 'No index exists for this sort' }).waitFor();
    await page.locator('.mango-explain', { hasText: 'No index can answer this query' }).waitFor();
    // An operator Mango does not know.
    await page.getByLabel('Selector', { exact: true }).fill('{"year": {"$newer": 1850}}');
    await page.getByRole('button', { name: 'Run query' }).click();
    await page.locator('.mango-results [role="alert"]', { hasText: 'Invalid operator: $newer' }).waitFor();
    // An index that does not exist: the server falls back, and its warning is shown.
    await fillQuery({ selector: '{"year": {"$gte": 1850}}', sort: '' });
    await page.locator('form.mango-query').getByLabel('Use index').fill('no-such-index');
    await runQuery();
    await page.locator('.mango-warning', { hasText: 'no-such-index was not used' }).waitFor();
    await page.locator('form.mango-query').getByLabel('Use index').fill('');
    expectRefusals(/400 \(Bad Request\)|status of 400/);
  }],

  ['an index created from the form is listed, here and over HTTP', async () => {
    const form = page.locator('form.mango-create');
    await form.getByLabel('Fields').fill('year');
    await form.getByLabel('Name (optional)').fill('by-year');
    await form.getByLabel('Design document (optional)').fill('by-year');
    assert.deepEqual(await form.getByLabel('Type').locator('option').evaluateAll((o) => o.map((x) => x.value)), ['json', 'nouveau']);
    await form.getByRole('button', { name: 'Create index' }).click();
    await page.locator('.mango-index-table tr[data-index="by-year"]').waitFor();
    assert.match(await page.locator('.mango-index-table tr[data-index="by-year"]').textContent(), /_design\/by-year.*json.*year/);
    const listed = await api('GET', `/${enc(db)}/_index`);
    const ours = listed.json.indexes.find((i) => i.name === 'by-year');
    assert.ok(ours, listed.text);
    assert.equal(ours.ddoc, '_design/by-year');
    assert.deepEqual(ours.def.fields, [{ year: 'asc' }]);

    // A full-text (nouveau) index: a field type the server refuses, then a good one.
    await form.getByLabel('Type').selectOption('nouveau');
    await form.getByLabel('Fields').fill('summary:texty');
    await form.getByLabel('Name (optional)').fill('full-text');
    await form.getByRole('button', { name: 'Create index' }).click();
    await form.locator('[role="alert"]', { hasText: 'Text Index field definitions must be of the form' }).waitFor();
    await form.getByLabel('Fields').fill('summary:text, year:number');
    await form.getByRole('button', { name: 'Create index' }).click();
    await page.locator('.mango-index-table tr[data-index="full-text"]').waitFor();
    const again = await api('GET', `/${enc(db)}/_index`);
    const fullText = again.json.indexes.find((i) => i.name === 'full-text');
    assert.equal(fullText.type, 'nouveau', again.text);
    assert.deepEqual(fullText.def.fields, [{ summary: 'text' }, { year: 'number' }]);
    expectRefusals(/400 \(Bad Request\)|status of 400/);
  }],

  ['the query sorted by year now uses the new index, with its statistics', async () => {
    await fillQuery(BY_YEAR);
    await runQuery();
    await page.locator('.mango-results table').waitFor();
    assert.equal(await explainedIndex(), 'by-year');
    assert.match(await page.locator('.mango-chosen').textContent(), /_design\/by-year/);
    // _all_docs was passed over, and the explanation says why.
    assert.match(await page.locator('.mango-candidates li[data-index="_all_docs"]').textContent(), /built-in index/);
    const expected = await find(BY_YEAR_BODY);
    assert.deepEqual(await tableIds(), expected.docs.map((d) => d._id));
    assert.match(await page.locator('dl.mango-stats').textContent(), /Results returned\s*6/);
    assert.equal(await page.locator('.mango-warning').count(), 0, 'no warning once an index answers');
    // The query, its results and their explanation (the README's picture), then the whole page.
    const bottom = await page.locator('.mango-grid').evaluate((el) => el.getBoundingClientRect().bottom + window.scrollY);
    await shot(page, 'mango', { fullPage: true, clip: { x: 0, y: 0, width: 1280, height: Math.ceil(bottom) } });
    await shot(page, 'mango-page', { fullPage: true });
    noProblems();
  }],

  ['bookmarks page forward and back; the JSON view shows the answer', async () => {
    const first = await tableIds();
    await page.getByRole('button', { name: 'Next →' }).click();
    await waitFor('the second page', async () => (await tableIds())[0] !== first[0]);
    const second = await tableIds();
    const firstAnswer = await find(BY_YEAR_BODY);
    const expected = await find({ ...BY_YEAR_BODY, bookmark: firstAnswer.bookmark });
    assert.deepEqual(second, expected.docs.map((d) => d._id));
    assert.equal(second.filter((id) => first.includes(id)).length, 0, 'the second page holds other documents');
    assert.match(await page.locator('.mango-results .pager-info').textContent(), /Page 2/);
    await page.getByRole('button', { name: '← Previous' }).click();
    await waitFor('the first page again', async () => (await tableIds())[0] === first[0]);
    assert.deepEqual(await tableIds(), first);
    await page.getByRole('button', { name: 'JSON', exact: true }).click();
    const json = JSON.parse(await page.locator('.mango-json').textContent());
    assert.deepEqual(json.docs.map((d) => d._id), first);
    assert.ok(json.bookmark && json.execution_stats, 'the whole answer is shown');
    await page.getByRole('button', { name: 'Table', exact: true }).click();
    await page.locator('.mango-results table').waitFor();
    noProblems();
  }],

  ['the index deleted through the dialog is gone over HTTP', async () => {
    await page.getByRole('button', { name: 'Delete index by-year' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    assert.ok(await page.locator('.mango-index-table tr[data-index="by-year"]').isVisible(), 'cancel keeps the index');
    await page.getByRole('button', { name: 'Delete index by-year' }).click();
    await shot(page, 'mango-delete-index');
    await dialog.getByRole('button', { name: 'Delete index' }).click();
    await page.locator('.mango-index-table tr[data-index="by-year"]').waitFor({ state: 'detached' });
    await page.getByRole('button', { name: 'Delete index full-text' }).click();
    await dialog.getByRole('button', { name: 'Delete index' }).click();
    await page.locator('.mango-index-table tr[data-index="full-text"]').waitFor({ state: 'detached' });
    const listed = await api('GET', `/${enc(db)}/_index`);
    assert.deepEqual(listed.json.indexes.map((i) => i.name), ['_all_docs'], listed.text);
    noProblems();
  }],

  ['Nouveau: hits as the server answers them, facets that narrow the query', async () => {
    await visit(page, `#/db/${enc(db)}/search`);
    await heading(page, 'Search');
    const select = page.getByLabel('Index', { exact: true });
    assert.deepEqual(await select.locator('option').evaluateAll((o) => o.map((x) => x.value)),
      ['nouveau:books/books', 'search:summaries/summaries']);
    await select.selectOption('nouveau:books/books');
    await page.getByLabel('Query', { exact: true }).fill('*:*');
    await page.getByLabel('Limit').fill('10');
    await page.getByLabel('Count facets').fill('genre');
    await search('nouveau');
    const answer = await searchOverHttp('nouveau', 'books', 'books', { q: '*:*', limit: 10, counts: ['genre'] });
    assert.equal(await hitTotal(), 30);
    assert.deepEqual(await hitIds(), answer.hits.map((h) => h.id));
    const facet = page.locator('.search-facet-list[data-field="genre"] button[data-value="science fiction"]');
    const sf = DOCS.filter((d) => d.genre === 'science fiction').map((d) => d._id).sort();
    assert.equal(await facet.textContent(), `science fiction${sf.length}`);
    // Paging by bookmark: Next shows the next ten, Previous the first ten.
    const first = await hitIds();
    await page.getByRole('navigation', { name: 'Pages of hits' }).getByRole('button', { name: 'Next →' }).click();
    await waitFor('the second page of hits', async () => (await hitIds())[0] !== first[0]);
    assert.equal((await hitIds()).filter((id) => first.includes(id)).length, 0);
    await page.getByRole('button', { name: '← Previous' }).click();
    await waitFor('the first page of hits', async () => (await hitIds())[0] === first[0]);
    // A facet narrows the query to its value (Nouveau has no drilldown).
    const narrowed = page.waitForResponse((r) => r.url().includes('/_nouveau/'));
    await facet.click();
    await narrowed;
    await waitFor('the science fiction hits', async () => (await hitTotal()) === sf.length);
    assert.equal(await page.getByLabel('Query', { exact: true }).inputValue(), '(*:*) AND genre:"science fiction"');
    const ids = await hitIds();
    assert.deepEqual(ids.sort(), sf);
    noProblems();
  }],

  ['Clouseau: highlights in <mark>, counts, drill-down to fewer hits', async () => {
    await page.getByLabel('Index', { exact: true }).selectOption('search:summaries/summaries');
    await page.getByLabel('Query', { exact: true }).fill('dark OR sea');
    await page.getByLabel('Limit').fill('8');
    await page.getByLabel('Count facets').fill('genre');
    await page.getByLabel('Highlight fields').fill('default');
    await search('search');
    const answer = await searchOverHttp('search', 'summaries', 'summaries', { q: 'dark OR sea', limit: 8, counts: ['genre'] });
    const total = answer.total_rows;
    assert.ok(total > 8, `enough hits to page (${total})`);
    assert.equal(await hitTotal(), total);
    assert.deepEqual(await hitIds(), answer.rows.map((r) => r.id));
    const marks = await page.locator('.search-highlights mark').allTextContents();
    assert.ok(marks.length > 0, 'highlights are marked');
    for (const m of marks) assert.match(m.toLowerCase(), /^(dark|sea)$/);
    // The tags asked for are not left in the text.
    assert.doesNotMatch(await page.locator('.search-highlights').first().textContent(), /[\uE000\uE001]|<em>/);
    const gothic = answer.counts.genre.gothic;
    assert.ok(gothic > 0 && gothic < total);
    await shot(page, 'search', { fullPage: true });
    const narrowed = page.waitForResponse((r) => r.url().includes('/_search/'));
    await page.locator('.search-facet-list[data-field="genre"] button[data-value="gothic"]').focus();
    await page.keyboard.press('Enter');
    await narrowed;
    const drilled = await searchOverHttp('search', 'summaries', 'summaries', { q: 'dark OR sea', limit: 8, counts: ['genre'], drilldown: [['genre', 'gothic']] });
    assert.deepEqual(drilled.total_rows, gothic);
    await waitFor('the drilled-down hits', async () => (await hitTotal()) === gothic);
    assert.deepEqual((await hitIds()).sort(), drilled.rows.map((r) => r.id).sort());
    await page.locator('.search-drill', { hasText: 'genre: gothic' }).waitFor();
    await shot(page, 'search-drilldown', { fullPage: true });
    // Removing the drill-down searches everything again.
    await page.getByRole('button', { name: 'Remove the drill-down genre: gothic' }).click();
    await waitFor('every hit again', async () => (await hitTotal()) === total);
    noProblems();
  }],

  ['a query the parser refuses shows its reason inline', async () => {
    await page.getByLabel('Query', { exact: true }).fill('summary:(');
    await search('search');
    await page.locator('.search-hits [role="alert"]', { hasText: 'Cannot parse' }).waitFor();
    expectRefusals(/400 \(Bad Request\)|status of 400/);
  }],

  ['a member queries both pages, without index controls', async () => {
    const mine = await openSession('member');
    const memberPage = mine.page;
    await login(mine, member, memberPassword);
    page = memberPage;
    await visit(page, `#/db/${enc(db)}/mango`);
    await heading(page, 'Mango');
    // CouchDB refuses members index writes (a design document): no form, no delete.
    await page.locator('.mango-readonly').waitFor();
    assert.equal(await page.locator('form.mango-create').count(), 0);
    assert.equal(await page.getByRole('button', { name: /^Delete index/ }).count(), 0);
    const refused = await apiAs(member, memberPassword, 'POST', `/${enc(db)}/_index`, { index: { fields: ['genre'] } });
    assert.ok([401, 403].includes(refused.status), refused.text);
    await fillQuery({ selector: '{"genre": "mystery"}', fields: '_id, title', sort: '', limit: 25 });
    await runQuery();
    await page.locator('.mango-results table').waitFor();
    assert.deepEqual((await tableIds()).sort(), DOCS.filter((d) => d.genre === 'mystery').map((d) => d._id).sort());
    assert.equal(await explainedIndex(), '_all_docs');
    await shot(page, 'mango-member', { fullPage: true });

    await visit(page, `#/db/${enc(db)}/search`);
    await heading(page, 'Search');
    await page.getByLabel('Index', { exact: true }).selectOption('search:summaries/summaries');
    await page.getByLabel('Highlight fields').fill('default');
    await page.getByLabel('Query', { exact: true }).fill('moors');
    const answered = page.waitForResponse((r) => r.url().includes('/_search/'));
    await page.getByLabel('Query', { exact: true }).press('Enter');
    await answered;
    await page.locator('.search-hits .count', { hasText: '2 in all' }).waitFor();
    const answer = await searchOverHttp('search', 'summaries', 'summaries', { q: 'moors', limit: 25 }, [member, memberPassword]);
    assert.equal(answer.total_rows, 2);
    assert.deepEqual((await hitIds()).sort(), answer.rows.map((r) => r.id).sort());
    assert.deepEqual(await page.locator('.search-highlights mark').allTextContents(), ['moors', 'moors']);
    // Logged in, the console opened the list of databases, which only admins may list.
    expectRefusals(/status of 401 .*\/_all_dbs/);
  }],

  ['clean up', async () => {
    await closeAll();
    await api('DELETE', `/${enc(db)}`);
    const user = await api('GET', `/_users/org.couchdb.user:${enc(member)}`);
    if (user.status === 200) await api('DELETE', `/_users/org.couchdb.user:${enc(member)}?rev=${user.json._rev}`);
    noProblems();
  }],
];

runSteps(SCRIPT, steps, { timeoutMs: 150000 });
