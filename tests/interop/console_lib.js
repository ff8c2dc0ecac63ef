'use strict';
// What the console's browser scripts share: the server and its admin from
// RECLINER_URL, the browser (Chromium or Firefox, driven by playwright-core:
// Chromium over its DevTools protocol, Firefox over WebDriver BiDi), one
// session per user in its own browser context, screenshots, and a record of
// every console error or uncaught page error, which fails the run.
//
// Environment: RECLINER_URL (with an admin's credentials), CONSOLE_SCREENSHOTS
// (folder for PNG screenshots, created), BROWSER (`chromium`, the default, or
// `firefox`), BROWSER_PATH (default /usr/bin/chromium or /usr/bin/firefox-esr).

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { assert, serverUrl, http, fail } = require('./lib');

const url = new URL(serverUrl());
const USER = decodeURIComponent(url.username);
const PASSWORD = decodeURIComponent(url.password);
if (!USER || !PASSWORD) {
  fail('RECLINER_URL must carry an admin\'s credentials (http://user:password@host:port)');
}
const ADMIN_URL = url.toString().replace(/\/+$/, '');
url.username = '';
url.password = '';
const ORIGIN = url.origin;
const CONSOLE = `${ORIGIN}/_utils`;
const SHOTS = process.env.CONSOLE_SCREENSHOTS || path.join(os.tmpdir(), 'recliner-console-screenshots');
const BROWSER = process.env.BROWSER || 'chromium';
const DEFAULT_PATHS = { chromium: '/usr/bin/chromium', firefox: '/usr/bin/firefox-esr' };
if (!(BROWSER in DEFAULT_PATHS)) fail(`BROWSER must be chromium or firefox, not ${BROWSER}`);
const BROWSER_PATH = process.env.BROWSER_PATH || DEFAULT_PATHS[BROWSER];

// Before each screenshot in Firefox, playwright inserts a `<style>body {}</style>`
// of its own to settle animations; the console's content security policy
// refuses it (as it should) and Firefox reports that as a page error naming
// the style's hash. That one report is the driver's, not the console's.
const DRIVER_STYLE_HASH = 'sha256-YjaKGiklmzC6wjXA513HAMmzus8VE61XCOT+SmwNZWA=';

/** Errors the pages logged or threw, with the session they happened in. */
const problems = [];
/** Every browser and persistent context opened, closed at exit. */
const opened = [];

/** The server's answer over HTTP, as the admin. */
async function api(method, p, body) {
  return http(method, `${ADMIN_URL}${p}`, { body });
}

/** The server's answer over HTTP, as `name` with `password`. */
async function apiAs(name, password, method, p, body) {
  const u = new URL(ADMIN_URL);
  u.username = encodeURIComponent(name);
  u.password = encodeURIComponent(password);
  return http(method, `${u.toString().replace(/\/+$/, '')}${p}`, { body });
}

function enc(name) {
  return encodeURIComponent(name);
}

let firefox = null;

/**
 * A new browser session (its own cookies) with one page, watched for
 * errors. `label` names it in the problems reported.
 */
async function openSession(label = 'admin') {
  assert.ok(fs.existsSync(BROWSER_PATH), `${BROWSER_PATH} is missing`);
  fs.mkdirSync(SHOTS, { recursive: true });
  const playwright = require('playwright-core');
  let context;
  if (BROWSER === 'firefox') {
    // Stock Firefox speaks WebDriver BiDi: playwright's `moz-` channels.
    if (!firefox) {
      firefox = await playwright.firefox.launch({ channel: 'moz-firefox', executablePath: BROWSER_PATH, headless: true });
      opened.push(firefox);
    }
    context = await firefox.newContext({ viewport: { width: 1280, height: 800 } });
  } else {
    const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'recliner-console-chromium-'));
    process.on('exit', () => fs.rmSync(profile, { recursive: true, force: true }));
    context = await playwright.chromium.launchPersistentContext(profile, {
      executablePath: BROWSER_PATH,
      headless: true,
      viewport: { width: 1280, height: 800 },
      args: [
        '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync',
      ],
    });
    opened.push(context);
  }
  const page = context.pages()[0] || await context.newPage();
  page.on('console', (msg) => {
    if (msg.type() === 'error') problems.push(`${label}: console error: ${msg.text()} (${JSON.stringify(msg.location())})`);
  });
  page.on('pageerror', (err) => {
    if (BROWSER === 'firefox' && err.message.includes(DRIVER_STYLE_HASH)) return;
    problems.push(`${label}: page error: ${err.stack || err.message}`);
  });
  page.on('dialog', (dialog) => {
    problems.push(`${label}: unexpected browser dialog: ${dialog.message()}`);
    dialog.dismiss().catch(() => {});
  });
  return { context, page, label };
}

/** Logs `session` in through the console's form as `name`. */
async function login(session, name, password) {
  const { page } = session;
  const res = await page.goto(`${CONSOLE}/`);
  assert.ok(res.ok(), `GET ${CONSOLE}/: ${res.status()}`);
  await heading(page, 'Log in to Recliner');
  await page.getByLabel('User name').fill(name);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Log in', exact: true }).click();
  await page.locator('#user-name', { hasText: name }).waitFor({ timeout: 10000 });
}

/**
 * Opens a route of the console (`#/...`) as a link would: a change of the
 * page's hash. (playwright's goto to a same-document URL never settles over
 * WebDriver BiDi.) With `reload`, the page is then loaded again.
 */
async function visit(page, route, { reload = false } = {}) {
  await page.evaluate((hash) => { window.location.hash = hash; }, route);
  if (reload) await page.reload();
}

/** Waits for the page's main heading. */
async function heading(page, text) {
  await page.getByRole('heading', { level: 1, name: text, exact: true }).waitFor({ timeout: 10000 });
}

/** A PNG of the page, without the passing status message over it. */
async function shot(page, name, options = {}) {
  await page.locator('#status').evaluate((el) => { el.hidden = true; });
  // caret: 'initial', since hiding the caret injects an inline style, which
  // the console's content security policy refuses (Firefox reports it).
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), caret: 'initial', ...options });
  await page.locator('#status').evaluate((el) => { el.hidden = false; });
}

/** The text of the console's status line once it shows `pattern`. */
async function status(page, pattern) {
  const el = page.locator('#status', { hasText: pattern });
  await el.waitFor({ timeout: 10000 });
  return el.textContent();
}

/** Fails the step if a page logged an error or threw since the start. */
function noProblems() {
  assert.deepEqual(problems, [], 'the page logged errors');
}

/**
 * Forgets the browsers' log lines for requests the step expected to fail
 * (a refused action logs its 4xx in the console), then checks the rest.
 */
function expectRefusals(pattern) {
  for (let i = problems.length - 1; i >= 0; i -= 1) {
    if (pattern.test(problems[i])) problems.splice(i, 1);
  }
  noProblems();
}

/** Closes every browser opened. */
async function closeAll() {
  while (opened.length) {
    const b = opened.pop();
    await b.close().catch(() => {});
  }
  firefox = null;
}

process.on('exit', () => {
  for (const b of opened) {
    try {
      b.close();
    } catch {
      // Closing is best effort at exit.
    }
  }
});

/** Creates a user in `_users` (as the admin) and answers its password. */
async function createUser(name, roles = [], password = `pw-${name}`) {
  const res = await api('PUT', `/_users/org.couchdb.user:${enc(name)}`, {
    _id: `org.couchdb.user:${name}`, name, password, roles, type: 'user',
  });
  assert.equal(res.status, 201, res.text);
  return password;
}

module.exports = {
  USER,
  PASSWORD,
  ADMIN_URL,
  ORIGIN,
  CONSOLE,
  BROWSER,
  problems,
  api,
  apiAs,
  enc,
  openSession,
  login,
  visit,
  heading,
  shot,
  status,
  noProblems,
  expectRefusals,
  closeAll,
  createUser,
};
