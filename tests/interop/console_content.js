'use strict';
// Content a member stored, opened by a server admin logged into the console,
// in a real browser: an HTML attachment, an SVG attachment and a show
// function's HTML answer each hold a script that would make its writer a
// server admin with the admin's session cookie. None of them runs: the
// server sandboxes every answer but the console's own files, and nothing
// changes on the server.

const { assert, uniqueName, runSteps, sleep, http } = require('./lib');
const {
  ADMIN_URL, ORIGIN, api, apiAs, enc, openSession, login, closeAll, createUser, expectRefusals,
  USER, PASSWORD,
} = require('./console_lib');

const SCRIPT = 'console_content.js';
const db = uniqueName('console-content');
const member = uniqueName('member');
const evil = uniqueName('evil');
let memberPassword;
let session;

/** A script that tries to make `evil` a server admin, and marks the page. */
function payload(tag) {
  return `fetch('/_node/_local/_config/admins/${evil}', {method: 'PUT', credentials: 'include', `
    + `body: JSON.stringify('owned-password')}).then(function () { document.title = 'ran-${tag}'; });`
    + ` document.title = 'ran-${tag}';`;
}

/** Uploads `body` as attachment `name` of `doc`, as the member. */
async function upload(doc, name, type, body) {
  const u = new URL(ADMIN_URL);
  u.username = encodeURIComponent(member);
  u.password = encodeURIComponent(memberPassword);
  const res = await http('PUT', `${u.toString().replace(/\/+$/, '')}/${enc(db)}/${enc(doc)}/${enc(name)}`, {
    body,
    headers: { 'content-type': type },
  });
  assert.equal(res.status, 201, res.text);
}

/** The server's admins, by name. */
async function admins() {
  const res = await api('GET', '/_node/_local/_config/admins');
  assert.equal(res.status, 200, res.text);
  return Object.keys(res.json);
}

const steps = [
  ['a member stores content with scripts', async () => {
    memberPassword = await createUser(member);
    assert.equal((await api('PUT', `/${enc(db)}`)).status, 201);
    const security = { admins: { names: [member] }, members: { names: [member] } };
    assert.equal((await api('PUT', `/${enc(db)}/_security`, security)).status, 200);
    await upload('page', 'x.html', 'text/html', `<html><body><script>${payload('html')}</script></body></html>`);
    await upload('pic', 'x.svg', 'image/svg+xml',
      `<svg xmlns="http://www.w3.org/2000/svg"><script>${payload('svg')}</script></svg>`);
    const ddoc = {
      shows: {
        page: `function (doc, req) { return {body: ${JSON.stringify(`<script>${payload('show')}</script>`)}, `
          + "headers: {'Content-Type': 'text/html', 'Content-Security-Policy': \"script-src 'unsafe-inline'\"}}; }",
      },
    };
    const res = await apiAs(member, memberPassword, 'PUT', `/${enc(db)}/_design/x`, ddoc);
    assert.equal(res.status, 201, res.text);
  }],

  ['a server admin logged into the console opens each of them', async () => {
    session = await openSession('admin');
    await login(session, USER, PASSWORD);
    const { page } = session;
    for (const [tag, path] of [
      ['html', `/${enc(db)}/page/x.html`],
      ['svg', `/${enc(db)}/pic/x.svg`],
      ['show', `/${enc(db)}/_design/x/_show/page`],
    ]) {
      const res = await page.goto(`${ORIGIN}${path}`);
      assert.equal(res.status(), 200, path);
      const policy = (await res.allHeaders())['content-security-policy'] || '';
      assert.match(policy, /sandbox/, `${path}: ${policy}`);
      await sleep(1500);
      const title = await page.title();
      assert.notEqual(title, `ran-${tag}`, `the script of ${path} ran`);
    }
    // The browser reports the scripts it refused to run: expected here.
    expectRefusals(/sandbox|Content Security Policy|Content-Security-Policy|script|CSP/i);
  }],

  ['nothing changed on the server', async () => {
    const names = await admins();
    assert.ok(!names.includes(evil), `${evil} became a server admin: ${names}`);
    await closeAll();
    assert.equal((await api('DELETE', `/${enc(db)}`)).status, 200);
  }],
];

runSteps(SCRIPT, steps, { timeoutMs: 90000 });
