'use strict';
// The console's Permissions and Users pages end to end in a real browser,
// as a server admin, a member and a plain user, each in a session of their
// own. The admin creates two users on the Users page (they can then log in
// over HTTP), makes one a member of a database on its Permissions page (the
// member, logged in through the console in a second session, reads its
// documents; removed, they are refused on reloading), changes revs_limit,
// and changes the other user's roles and password. That user, logged in,
// sees only their own page: refused while `_users` is open to admins only
// (CouchDB 3's default), then, once it is open to its users, their roles
// read-only, another user's page refused, and their own password changed
// (the console logs them in again). The admin deletes them at last.
// Every outcome is checked over HTTP too.

const crypto = require('node:crypto');
const { assert, runSteps, waitFor } = require('./lib');
const {
  USER, PASSWORD, api, apiAs, enc, openSession, login, visit, heading, shot, status, noProblems, expectRefusals, closeAll,
} = require('./console_lib');

const SCRIPT = 'console_admin.js';
const suffix = crypto.randomBytes(2).toString('hex');
const db = `inventory-${crypto.randomBytes(4).toString('hex')}`;
const userA = `ada-${suffix}`;
const userB = `ben-${suffix}`;
const PASSWORDS = { a: 'ada-first-pw', b: 'ben-first-pw', b2: 'ben-second-pw', b3: 'ben-chosen-pw' };
const userPath = (name) => `/_users/${enc(`org.couchdb.user:${name}`)}`;

let admin;
let member;
let plain;

/**
 * The page of a session, its window brought to the front: Firefox sends
 * key presses that activate buttons only to the window in front.
 */
async function front(session) {
  await session.page.bringToFront();
  return session;
}

/** POST /_session as `name`: the status CouchDB answers. */
async function sessionStatus(name, password) {
  const res = await api('POST', '/_session', { name, password });
  return res.status;
}

/** The entries of one list of the permissions form, by its add input's label. */
async function chips(page, addLabel) {
  const editor = page.locator('.list-editor', { has: page.getByLabel(addLabel, { exact: true }) });
  return editor.locator('.chip-text').allTextContents();
}

/** Types an entry into a list of the permissions form and presses Enter. */
async function addByEnter(page, addLabel, value) {
  const input = page.getByLabel(addLabel, { exact: true });
  await input.fill(value);
  await input.press('Enter');
}

const steps = [
  ['a database with documents', async () => {
    assert.equal((await api('PUT', `/${enc(db)}`)).status, 201);
    const docs = Array.from({ length: 5 }, (_, i) => ({ _id: `doc-${i}`, n: i }));
    assert.equal((await api('POST', `/${enc(db)}/_bulk_docs`, { docs })).status, 201);
  }],

  ['the admin creates two users on the Users page', async () => {
    admin = await openSession('admin');
    const { page } = admin;
    await login(admin, USER, PASSWORD);
    await page.getByRole('link', { name: 'Users', exact: true }).click();
    await heading(page, 'Users');
    const form = page.locator('form.new-user-form');
    // Two passwords that differ are caught before anything is sent.
    await form.getByLabel('Name', { exact: true }).fill(userA);
    await form.getByLabel('Password', { exact: true }).fill(PASSWORDS.a);
    await form.getByLabel('Repeat the password').fill('something else');
    await form.getByRole('button', { name: 'Create user' }).click();
    await form.locator('[role="alert"]', { hasText: 'The two passwords differ' }).waitFor();
    assert.equal((await api('GET', userPath(userA))).status, 404, 'nothing is created while the passwords differ');
    await form.getByLabel('Repeat the password').fill(PASSWORDS.a);
    await form.getByLabel('Repeat the password').press('Enter');
    await status(page, `User ${userA} created.`);
    await page.locator(`tr[data-user="${userA}"]`).waitFor();

    await form.getByLabel('Name', { exact: true }).fill(userB);
    await form.getByLabel('Roles', { exact: true }).fill('staff, support');
    await form.getByLabel('Password', { exact: true }).fill(PASSWORDS.b);
    await form.getByLabel('Repeat the password').fill(PASSWORDS.b);
    await form.getByRole('button', { name: 'Create user' }).click();
    await status(page, `User ${userB} created.`);
    const rowB = page.locator(`tr[data-user="${userB}"]`);
    await rowB.waitFor();
    assert.match(await rowB.textContent(), /staff.*support.*user.*Set/);

    for (const [name, roles, password] of [[userA, [], PASSWORDS.a], [userB, ['staff', 'support'], PASSWORDS.b]]) {
      const doc = await api('GET', userPath(name));
      assert.equal(doc.status, 200, doc.text);
      assert.deepEqual(doc.json.roles, roles);
      assert.equal(doc.json.type, 'user');
      assert.equal(await sessionStatus(name, password), 200, `${name} can log in`);
    }
    // No hash, salt or scheme on the page.
    const text = await page.locator('main').textContent();
    assert.doesNotMatch(text, /derived_key|pbkdf2|salt/);
    await shot(page, 'users');
    noProblems();
  }],

  ['the admin makes the first user a member on the Permissions page', async () => {
    const { page } = await front(admin);
    await visit(page, `#/db/${enc(db)}/permissions`);
    await heading(page, 'Permissions');
    assert.equal(await page.locator('.tabs a[aria-current="page"]').textContent(), 'Permissions');
    // A new database: admins only, as CouchDB 3 makes it.
    assert.match(await page.locator('.access-summary').textContent(), /Admins only\./);
    assert.deepEqual(await chips(page, 'Add a member role'), ['_admin']);
    // Removing by keyboard: the entry's button and Enter. With no members
    // left, the page says the database would be public.
    await page.getByRole('button', { name: 'Remove member role _admin' }).press('Enter');
    assert.match(await page.locator('.access-summary').textContent(), /Public database\..*even without logging in/);
    assert.equal(await page.evaluate(() => document.activeElement.placeholder), 'Add a member role', 'focus goes to the input');

    await addByEnter(page, 'Add a member name', userA);
    await addByEnter(page, 'Add a member name', 'typo');
    // A name listed twice is refused inline.
    await addByEnter(page, 'Add a member name', userA);
    await page.locator('.list-editor [role="alert"]', { hasText: `${userA} is already listed.` }).waitFor();
    await page.getByRole('button', { name: 'Remove member name typo' }).focus();
    await page.keyboard.press('Enter');
    await addByEnter(page, 'Add a member role', 'analysts');
    await addByEnter(page, 'Add a member role', 'support');
    await addByEnter(page, 'Add a member name', 'dana');
    await page.getByLabel('Add an admin role', { exact: true }).fill('editors');
    await page.getByRole('button', { name: 'Add admin role' }).click();
    await page.getByRole('button', { name: 'Remove admin role _admin' }).click();
    await addByEnter(page, 'Add an admin name', 'carol');
    assert.deepEqual(await chips(page, 'Add a member name'), [userA, 'dana']);
    assert.match(await page.locator('.access-summary').textContent(), /Members only\./);
    assert.match(await page.locator('.dirty-note').textContent(), /Unsaved changes/);

    await page.getByRole('button', { name: 'Save permissions' }).click();
    await status(page, `Permissions of ${db} saved.`);
    const sec = await api('GET', `/${enc(db)}/_security`);
    assert.deepEqual(sec.json, {
      admins: { names: ['carol'], roles: ['editors'] },
      members: { names: [userA, 'dana'], roles: ['analysts', 'support'] },
    });
    // The page shows what was saved, with nothing pending.
    await page.locator('.dirty-note:empty').waitFor({ state: 'attached' });
    assert.deepEqual(await chips(page, 'Add an admin role'), ['editors']);
    await shot(page, 'permissions', { fullPage: true });
    noProblems();
  }],

  ['revs_limit is changed through the form', async () => {
    const { page } = await front(admin);
    const input = page.getByLabel('Revisions to keep per document');
    assert.equal(await input.inputValue(), '1000');
    await input.fill('0');
    await input.press('Enter');
    await page.locator('[role="alert"]', { hasText: 'revs_limit must be a whole number of at least 1.' }).waitFor();
    await input.fill('250');
    await page.getByRole('button', { name: 'Save revs_limit' }).click();
    await status(page, `${db} now keeps 250 revisions per document.`);
    const limit = await api('GET', `/${enc(db)}/_revs_limit`);
    assert.equal(limit.json, 250);
    await page.locator('.stat', { hasText: 'revs_limit' }).locator('dd', { hasText: '250' }).waitFor();
    noProblems();
  }],

  ['the member logs in in a second session, reads the documents and sees the permissions read-only', async () => {
    member = await openSession('member');
    const { page } = await front(member);
    await login(member, userA, PASSWORDS.a);
    // The list of databases, where a login lands, is for server admins:
    // a member is offered to open one by name, and no admin-only pages.
    await heading(page, 'Databases');
    await page.getByLabel('Open a database you may use').waitFor();
    expectRefusals(/member: .*status of 401 .*\/_all_dbs/);
    for (const name of ['Server', 'Activity']) {
      assert.equal(await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name }).count(), 0, `no ${name} link for a member`);
    }
    await visit(page, `#/db/${enc(db)}`);
    await heading(page, db);
    await page.locator('tr[data-id="doc-4"]').waitFor();
    await visit(page, `#/db/${enc(db)}/permissions`);
    await heading(page, 'Permissions');
    await page.locator('.callout', { hasText: 'You may read these permissions but not change them' }).waitFor();
    assert.deepEqual(await page.locator('.chip-text').allTextContents(), ['carol', 'editors', userA, 'dana', 'analysts', 'support']);
    assert.equal(await page.getByRole('button', { name: 'Save permissions' }).count(), 0);
    assert.equal(await page.getByRole('button', { name: /^Remove / }).count(), 0);
    assert.equal(await page.locator('.chip-add').count(), 0);
    assert.equal(await page.getByRole('button', { name: 'Save revs_limit' }).count(), 0);
    await shot(page, 'permissions-read-only');
    noProblems();
  }],

  ['removed from the members, the member is refused on reloading', async () => {
    const { page } = await front(admin);
    await page.getByRole('button', { name: `Remove member name ${userA}` }).click();
    // Focus goes to the next entry's button.
    assert.equal(await page.evaluate(() => document.activeElement.getAttribute('aria-label')), 'Remove member name dana');
    await page.getByRole('button', { name: 'Save permissions' }).click();
    await status(page, `Permissions of ${db} saved.`);
    const sec = await api('GET', `/${enc(db)}/_security`);
    assert.deepEqual(sec.json.members, { names: ['dana'], roles: ['analysts', 'support'] });
    const refused = await apiAs(userA, PASSWORDS.a, 'GET', `/${enc(db)}/_all_docs`);
    assert.equal(refused.status, 403, refused.text);

    await visit(member.page, `#/db/${enc(db)}`, { reload: true });
    await heading(member.page, 'Not allowed');
    assert.match(await member.page.locator('[role="alert"]').textContent(), /You are not allowed to access this db/);
    assert.equal(await member.page.locator('tr[data-id="doc-4"]').count(), 0);
    // Its permissions are refused too, with CouchDB's reason below the tabs.
    await visit(member.page, `#/db/${enc(db)}/permissions`);
    await member.page.locator('.callout-error', { hasText: 'You are not allowed to access this db' }).waitFor();
    await shot(member.page, 'permissions-refused');
    expectRefusals(/member: .*(403|Forbidden)/);
  }],

  ['the admin changes the second user’s roles and password', async () => {
    const { page } = await front(admin);
    await visit(page, `#/users/${enc(userB)}`);
    await heading(page, userB);
    assert.deepEqual(await chips(page, 'Add a role'), ['staff', 'support']);
    await page.getByRole('button', { name: 'Remove role support' }).press('Enter');
    await waitFor('the role to be removed', async () => (await chips(page, 'Add a role')).join() === 'staff');
    await addByEnter(page, 'Add a role', 'editors');
    await page.getByRole('button', { name: 'Save roles' }).click();
    await status(page, `Roles of ${userB} saved.`);
    assert.deepEqual((await api('GET', userPath(userB))).json.roles, ['staff', 'editors']);
    // The password kept its hash through the change of roles.
    assert.equal(await sessionStatus(userB, PASSWORDS.b), 200);

    await page.getByLabel('New password', { exact: true }).fill(PASSWORDS.b2);
    await page.getByLabel('Repeat the password').fill(PASSWORDS.b2);
    await page.getByRole('button', { name: 'Change password' }).click();
    await status(page, `Password of ${userB} changed.`);
    assert.equal(await sessionStatus(userB, PASSWORDS.b2), 200, 'the new password opens a session');
    assert.equal(await sessionStatus(userB, PASSWORDS.b), 401, 'the old one no longer does');
    // The page says a password is set, and shows nothing of its hash.
    const doc = (await api('GET', userPath(userB))).json;
    const text = await page.locator('main').textContent();
    assert.match(text, /A password is set/);
    for (const secret of [doc.derived_key, doc.salt, doc.password_scheme]) {
      assert.ok(secret && !text.includes(secret), 'no hash, salt or scheme on the page');
    }
    await page.getByLabel('Add a role', { exact: true }).focus();
    await shot(page, 'user', { fullPage: true });
    noProblems();
  }],

  ['a plain user is refused their own document while _users is for admins only', async () => {
    // CouchDB 3's default: _users gets `default_security = admin_only`.
    const sec = await api('GET', '/_users/_security');
    assert.deepEqual(sec.json.members, { roles: ['_admin'] }, sec.text);
    await member.context.close();
    member = null;
    plain = await openSession('user');
    const { page } = await front(plain);
    await login(plain, userB, PASSWORDS.b2);
    await page.getByLabel('Open a database you may use').waitFor();
    expectRefusals(/user: .*status of 401 .*\/_all_dbs/);
    await page.getByRole('link', { name: 'Users', exact: true }).click();
    await heading(page, 'Not allowed');
    const alert = await page.locator('[role="alert"]').textContent();
    assert.match(alert, /You are not allowed to access this db/);
    assert.match(alert, /open to server admins only/);
    assert.equal(await page.evaluate(() => window.location.hash), `#/users/${enc(userB)}`);
    expectRefusals(/user: .*(403|Forbidden)/);
  }],

  ['once _users is open to its users, they see and change only their own document', async () => {
    // What an admin does to let users manage their accounts, as in CouchDB.
    const editable = await api('PUT', '/_node/_local/_config/couchdb/users_db_security_editable', '"true"');
    assert.equal(editable.status, 200, editable.text);
    const open = await api('PUT', '/_users/_security', { admins: { names: [], roles: [] }, members: { names: [], roles: [] } });
    assert.equal(open.status, 200, open.text);

    const { page } = await front(plain);
    await visit(page, '#/users', { reload: true });
    await heading(page, userB);
    assert.equal(await page.evaluate(() => window.location.hash), `#/users/${enc(userB)}`);
    assert.equal(await page.locator('table').count(), 0, 'no list of users');
    assert.equal(await page.getByRole('heading', { name: 'New user' }).count(), 0);
    assert.equal(await page.getByRole('button', { name: 'Delete user' }).count(), 0);
    // Roles read-only.
    assert.deepEqual(await page.locator('.role-tag').allTextContents(), ['staff', 'editors']);
    assert.equal(await page.getByRole('button', { name: 'Save roles' }).count(), 0);
    assert.equal(await page.getByLabel('Add a role').count(), 0);
    assert.match(await page.locator('main').textContent(), /Only server admins may change roles/);
    await shot(page, 'user-own', { fullPage: true });

    // Another user's page: refused, and nothing of theirs shown.
    await visit(page, `#/users/${enc(userA)}`);
    await heading(page, 'Not allowed');
    const alert = await page.locator('[role="alert"]').textContent();
    assert.match(alert, /Only server admins may see other users/);
    assert.doesNotMatch(await page.locator('main').textContent(), /Password|Roles/);
    expectRefusals(/user: .*(404|Not Found)/);
  }],

  ['the user changes their own password and stays logged in', async () => {
    const { page } = await front(plain);
    await page.getByRole('link', { name: 'Your own account' }).click();
    await heading(page, userB);
    await page.getByLabel('New password', { exact: true }).fill(PASSWORDS.b3);
    await page.getByLabel('Repeat the password').fill(PASSWORDS.b3);
    await page.getByLabel('Repeat the password').press('Enter');
    await status(page, 'Your password is changed and you are logged in with it.');
    await heading(page, userB);
    assert.equal(await sessionStatus(userB, PASSWORDS.b3), 200);
    assert.equal(await sessionStatus(userB, PASSWORDS.b2), 401);
    // The browser's session is the new one: the server knows it.
    const ctx = await page.evaluate(async () => (await (await fetch('/_session')).json()).userCtx);
    assert.equal(ctx.name, userB);
    assert.match(await page.locator('#user-name').textContent(), new RegExp(userB));
    noProblems();
  }],

  ['the admin deletes the second user, after the dialog', async () => {
    const { page } = await front(admin);
    await visit(page, '#/users');
    await heading(page, 'Users');
    await page.getByRole('link', { name: userB, exact: true }).click();
    await heading(page, userB);
    // Escape cancels the dialog; nothing is deleted.
    await page.getByRole('button', { name: 'Delete user' }).click();
    await page.getByRole('dialog').waitFor();
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    assert.equal((await api('GET', userPath(userB))).status, 200);
    await page.getByRole('button', { name: 'Delete user' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete user' }).click();
    await status(page, `User ${userB} deleted.`);
    await heading(page, 'Users');
    assert.equal((await api('GET', userPath(userB))).status, 404);
    assert.equal(await sessionStatus(userB, PASSWORDS.b3), 401);
    await page.locator(`tr[data-user="${userA}"]`).waitFor();
    assert.equal(await page.locator(`tr[data-user="${userB}"]`).count(), 0);
    noProblems();
  }],

  ['clean up', async () => {
    await closeAll();
    await api('DELETE', `/${enc(db)}`);
    const doc = await api('GET', userPath(userA));
    if (doc.status === 200) await api('DELETE', `${userPath(userA)}?rev=${doc.json._rev}`);
    // _users back to CouchDB 3's default, and its security object locked again.
    await api('PUT', '/_users/_security', { members: { roles: ['_admin'] }, admins: { roles: ['_admin'] } });
    await api('PUT', '/_node/_local/_config/couchdb/users_db_security_editable', '"false"');
    await waitFor('the cleanup to be seen', async () => (await api('GET', `/${enc(db)}`)).status === 404);
    noProblems();
  }],
];

runSteps(SCRIPT, steps, { timeoutMs: 150000 });
