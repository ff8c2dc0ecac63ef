'use strict';
// Shared helpers for the interop scripts: the server URL, a small step
// runner with a watchdog, assertions that say what differed, and PouchDB
// built from its modules with an in-memory local adapter (no native builds).

const assert = require('node:assert/strict');
const crypto = require('node:crypto');

/** Base URL of the server under test, without a trailing slash. */
function serverUrl() {
  const url = process.env.RECLINER_URL;
  if (!url) {
    fail('RECLINER_URL is not set: give the base URL of a running recliner, e.g. http://127.0.0.1:5984');
  }
  return url.replace(/\/+$/, '');
}

function fail(message) {
  process.stderr.write(`FAIL: ${message}\n`);
  process.exit(1);
}

/** A database name of this run, unique on the server. */
function uniqueName(prefix) {
  return `${prefix}-${crypto.randomBytes(6).toString('hex')}`;
}

/**
 * Runs `steps` ([name, async fn] pairs) in order, printing one line per step.
 * Stops at the first failure with a non-zero exit and the step's error; a
 * watchdog ends the script if the whole run takes longer than `timeoutMs`.
 */
async function runSteps(script, steps, { timeoutMs = 50000 } = {}) {
  const started = Date.now();
  const watchdog = setTimeout(() => {
    fail(`${script}: did not finish within ${timeoutMs} ms (a step hung)`);
  }, timeoutMs);
  watchdog.unref();
  let passed = 0;
  for (const [name, fn] of steps) {
    const t0 = Date.now();
    try {
      await fn();
    } catch (err) {
      process.stderr.write(`not ok - ${name} (${Date.now() - t0} ms)\n`);
      process.stderr.write(`FAIL: ${script}: step "${name}": ${describe(err)}\n`);
      process.stdout.write(`${passed} passed, 1 failed\n`);
      process.exit(1);
    }
    passed += 1;
    process.stdout.write(`ok - ${name} (${Date.now() - t0} ms)\n`);
  }
  clearTimeout(watchdog);
  process.stdout.write(`${script}: ${passed} passed, 0 failed in ${Date.now() - started} ms\n`);
  // Live feeds or keep-alive sockets must not keep the process running.
  process.exit(0);
}

/** An error as text, with what PouchDB or nano attach to it. */
function describe(err) {
  if (!(err instanceof Error)) {
    return inspect(err);
  }
  const extra = {};
  for (const key of ['status', 'statusCode', 'name', 'reason', 'error', 'docId', 'id', 'request', 'headers', 'description']) {
    if (err[key] !== undefined && key !== 'name') {
      extra[key] = err[key];
    }
  }
  const more = Object.keys(extra).length ? `\n  details: ${inspect(extra)}` : '';
  return `${err.stack || err.message}${more}`;
}

function inspect(value) {
  return require('node:util').inspect(value, { depth: 8, maxStringLength: 400, breakLength: 120 });
}

/** Waits until `check()` resolves truthy, polling, or fails after `timeoutMs`. */
async function waitFor(what, check, { timeoutMs = 10000, intervalMs = 100 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const value = await check();
      if (value) {
        return value;
      }
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      const why = last ? `; last error: ${describe(last)}` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${why}`);
    }
    await sleep(intervalMs);
  }
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** CouchDB's attachment digest: `md5-` and the base64 MD5 of the bytes. */
function md5Digest(bytes) {
  return `md5-${crypto.createHash('md5').update(bytes).digest('base64')}`;
}

/**
 * Whether CouchDB (and Recliner) store attachments of this type
 * gzip-compressed, with the digest of the compressed bytes (CouchDB's
 * default `[attachments] compressible_types`). PouchDB digests the content
 * itself, so the digests of these types differ between the two kinds of peer.
 */
function isCompressible(contentType) {
  const type = String(contentType || '').split(';')[0].trim().toLowerCase();
  return type.startsWith('text/')
    || ['application/javascript', 'application/json', 'application/xml'].includes(type);
}

/**
 * The digest of an attachment as the server stores it: the MD5 of the bytes
 * it sends to a client that takes gzip (read without inflating them), which
 * for a compressible type are the stored gzip bytes.
 */
function storedDigest(url) {
  const parsed = new URL(url);
  const auth = parsed.username
    ? `${decodeURIComponent(parsed.username)}:${decodeURIComponent(parsed.password)}`
    : undefined;
  return new Promise((resolve, reject) => {
    const req = require('node:http').get(
      {
        host: parsed.hostname,
        port: parsed.port,
        path: parsed.pathname + parsed.search,
        auth,
        headers: { 'accept-encoding': 'gzip' },
      },
      (res) => {
        const chunks = [];
        res.on('data', (chunk) => chunks.push(chunk));
        res.on('end', () => resolve({
          encoding: res.headers['content-encoding'],
          digest: md5Digest(Buffer.concat(chunks)),
        }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
  });
}

/** PouchDB with the memory (local), HTTP (remote), replication and map/reduce plugins. */
function pouchdb() {
  return require('pouchdb-core')
    .plugin(require('pouchdb-adapter-memory'))
    .plugin(require('pouchdb-adapter-http'))
    .plugin(require('pouchdb-replication'))
    .plugin(require('pouchdb-mapreduce'))
    .plugin(require('pouchdb-find'));
}

/**
 * `fetch` for URLs that may carry `user:password@`: fetch refuses those, so
 * the credentials move into a basic `Authorization` header, as PouchDB and
 * nano send them.
 */
async function fetchAs(url, init = {}) {
  const parsed = new URL(url);
  const headers = { ...(init.headers || {}) };
  if (parsed.username) {
    const user = decodeURIComponent(parsed.username);
    const password = decodeURIComponent(parsed.password);
    headers.authorization = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
    parsed.username = '';
    parsed.password = '';
  }
  return fetch(parsed.toString(), { ...init, headers });
}

/** A plain HTTP request to the server, answering {status, headers, json|text}. */
async function http(method, url, { body, headers = {} } = {}) {
  const init = { method, headers: { accept: 'application/json', ...headers } };
  if (body !== undefined) {
    init.headers['content-type'] = init.headers['content-type'] || 'application/json';
    init.body = typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
  }
  const res = await fetchAs(url, init);
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

module.exports = {
  assert,
  serverUrl,
  fail,
  uniqueName,
  runSteps,
  describe,
  inspect,
  waitFor,
  sleep,
  md5Digest,
  isCompressible,
  storedDigest,
  pouchdb,
  http,
  fetchAs,
};
