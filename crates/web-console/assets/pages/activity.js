// #/activity: a live view of `_db_updates` (server admins): which databases
// change and how fast, and a running log of the last events. The feed is
// read as long polls from "now"; a poll that times out is asked again, one
// that fails is retried after a growing pause.

import { ApiError, describeError } from '../lib/api.js';
import { clear, fmtNumber, fmtTime, h, setText } from '../lib/dom.js';
import { link } from '../lib/paths.js';
import { handlePageError, main, onCleanup, startPage } from '../lib/shell.js';
import { refuseUnlessAdmin } from '../lib/rights.js';

/** How long the server holds one poll open when nothing happens. */
const POLL_TIMEOUT_MS = 25000;
/** Events kept in the log. */
const LOG_SIZE = 50;
/** What "recent" counts over. */
const WINDOW_MS = 60000;
/** Pauses before retrying a failed poll: 1 s, doubling up to 30 s. */
const FIRST_BACKOFF_MS = 1000;
const MAX_BACKOFF_MS = 30000;

/**
 * Kept across visits of the page (not across reloads): each database's
 * recent events and the log. A new visit follows the feed from "now".
 */
const memory = {
  dbs: new Map(), // name -> {times: [ms], total, type, at}
  log: [], // newest first: {db, type, at, seq}
  since: null, // when the page began watching
};

const TYPE_LABELS = { created: 'Created', updated: 'Updated', deleted: 'Deleted' };

function typeBadge(type) {
  const cls = type === 'deleted' ? 'badge-warn' : type === 'created' ? 'badge-ok' : 'badge-muted';
  return h('span', { class: `badge ${cls} event-${type}`, text: TYPE_LABELS[type] || type });
}

/** Counts one event of the feed. */
function record(event, at) {
  const name = event.db_name;
  if (!name) return;
  const entry = memory.dbs.get(name) || { times: [], total: 0, type: null, at: 0 };
  entry.times.push(at);
  entry.total += 1;
  entry.type = event.type;
  entry.at = at;
  memory.dbs.set(name, entry);
  memory.log.unshift({ db: name, type: event.type, at, seq: event.seq });
  if (memory.log.length > LOG_SIZE) memory.log.length = LOG_SIZE;
}

/** "12 s ago", "3 min ago", from a time in milliseconds. */
function ago(at) {
  const s = Math.max(0, Math.round((Date.now() - at) / 1000));
  if (s < 2) return 'just now';
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  return fmtTime(new Date(at));
}

export async function renderActivity() {
  const alive = startPage('Activity', 'activity');
  if (await refuseUnlessAdmin({
    alive,
    title: 'Activity',
    path: '/_db_updates?limit=1',
    what: 'This page follows every database\'s changes (_db_updates).',
  })) return;
  if (!alive()) return;
  if (!memory.since) memory.since = Date.now();

  const liveDot = h('span', { class: 'live-dot', 'aria-hidden': 'true' });
  const liveText = h('span', { class: 'live-text', text: 'Connecting…' });
  const feedError = h('div', { class: 'form-error', role: 'alert' });
  const summary = h('p', { class: 'muted activity-summary' });
  const dbBody = h('tbody');
  const logList = h('ol', { class: 'activity-log', 'aria-label': `The last ${LOG_SIZE} events, newest first` });
  const clearButton = h('button', { type: 'button', class: 'btn btn-small', text: 'Clear counts' });

  const root = clear(main());
  root.append(
    h('div', { class: 'page-head' },
      h('div', {}, h('h1', { text: 'Activity' }),
        h('p', { class: 'muted', text: 'Which databases change and how fast, live from _db_updates.' })),
      h('div', { class: 'page-actions' },
        h('p', { class: 'live', role: 'status' }, liveDot, liveText))),
    feedError,
    h('div', { class: 'activity-layout' },
      h('section', { class: 'card table-card', 'aria-labelledby': 'activity-dbs-heading' },
        h('div', { class: 'section-head activity-head' },
          h('h2', { id: 'activity-dbs-heading', text: 'Databases' }), clearButton),
        summary,
        h('div', { class: 'table-scroll' },
          h('table', { class: 'table activity-table' },
            h('caption', { class: 'sr-only', text: 'Databases by their latest change, with their updates in the last minute' }),
            h('thead', {}, h('tr', {},
              h('th', { scope: 'col', text: 'Database' }),
              h('th', { scope: 'col', class: 'num', text: 'Last minute' }),
              h('th', { scope: 'col', class: 'num', text: 'Seen' }),
              h('th', { scope: 'col', text: 'Last event' }),
              h('th', { scope: 'col', text: 'When' }))),
            dbBody))),
      h('section', { class: 'card', 'aria-labelledby': 'activity-log-heading' },
        h('h2', { id: 'activity-log-heading', text: 'Latest events' }),
        logList)));

  clearButton.addEventListener('click', () => {
    memory.dbs.clear();
    memory.log.length = 0;
    memory.since = Date.now();
    draw();
  });

  /** Redraws the table (sorted by latest event) and the log. */
  function draw() {
    const now = Date.now();
    const rows = [...memory.dbs.entries()].sort((a, b) => b[1].at - a[1].at);
    let recent = 0;
    clear(dbBody);
    for (const [name, entry] of rows) {
      while (entry.times.length && entry.times[0] < now - WINDOW_MS) entry.times.shift();
      recent += entry.times.length;
      dbBody.append(h('tr', { dataset: { db: name, type: entry.type } },
        h('th', { scope: 'row' }, entry.type === 'deleted'
          ? h('span', { class: 'mono break', text: name })
          : h('a', { class: 'mono break', href: link.db(name), text: name })),
        h('td', { class: 'num last-minute', text: fmtNumber(entry.times.length) }),
        h('td', { class: 'num', text: fmtNumber(entry.total) }),
        h('td', {}, typeBadge(entry.type)),
        h('td', {}, h('time', { datetime: new Date(entry.at).toISOString(), title: new Date(entry.at).toLocaleString('en-GB'), text: ago(entry.at) }))));
    }
    if (!rows.length) {
      dbBody.append(h('tr', {}, h('td', { colspan: 5, class: 'muted empty-row', text: 'No database has changed since this page began watching.' })));
    }
    const busy = rows.filter(([, e]) => e.times.length).length;
    setText(summary, `${fmtNumber(recent)} update${recent === 1 ? '' : 's'} in the last minute, in ${fmtNumber(busy)} database${busy === 1 ? '' : 's'}. Watching since ${fmtTime(new Date(memory.since))}.`);
    clear(logList);
    if (!memory.log.length) logList.append(h('li', { class: 'muted', text: 'Waiting for events…' }));
    for (const event of memory.log) {
      logList.append(h('li', { class: 'activity-event', dataset: { db: event.db, type: event.type } },
        h('time', { datetime: new Date(event.at).toISOString(), text: fmtTime(new Date(event.at)) }),
        typeBadge(event.type),
        h('span', { class: 'mono break', text: event.db })));
    }
  }

  // The feed, until the page is left.
  const controller = new AbortController();
  let stopped = false;
  let ticker = setInterval(() => draw(), 1000);
  let retry = null;
  onCleanup(() => {
    stopped = true;
    controller.abort();
    clearInterval(ticker);
    ticker = null;
    clearTimeout(retry);
  });

  function setLive(state, text) {
    liveDot.classList.toggle('paused', state !== 'live');
    setText(liveText, text);
  }

  /** One long poll: the events since `since`, and where to go on from. */
  async function poll(since) {
    const params = new URLSearchParams({ feed: 'longpoll', since, timeout: String(POLL_TIMEOUT_MS) });
    const res = await fetch(`/_db_updates?${params}`, {
      credentials: 'same-origin', cache: 'no-store', headers: { Accept: 'application/json' }, signal: controller.signal,
    });
    const text = await res.text();
    let body = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = null;
    }
    if (!res.ok) throw new ApiError(res.status, body, text.slice(0, 300));
    if (!body || !Array.isArray(body.results)) throw new Error('The feed answered something other than _db_updates results.');
    return body;
  }

  async function follow() {
    let since = 'now';
    let backoff = FIRST_BACKOFF_MS;
    while (!stopped && alive()) {
      try {
        setLive('live', 'Live');
        const body = await poll(since);
        if (stopped || !alive()) return;
        const at = Date.now();
        for (const event of body.results) record(event, at);
        if (body.last_seq !== undefined && body.last_seq !== null) since = body.last_seq;
        backoff = FIRST_BACKOFF_MS;
        clear(feedError);
        if (body.results.length) draw();
      } catch (err) {
        if (stopped || !alive() || (err && err.name === 'AbortError')) return;
        if (err instanceof ApiError && (err.status === 401 || err.status === 403)) {
          handlePageError(err);
          return;
        }
        const wait = backoff;
        backoff = Math.min(MAX_BACKOFF_MS, backoff * 2);
        const reason = err instanceof ApiError ? describeError(err) : `The server cannot be reached (${String(err.message).replace(/\.$/, '')}).`;
        clear(feedError).append(h('p', { text: `The feed stopped: ${reason} Reconnecting in ${Math.round(wait / 1000)} s.` }));
        setLive('reconnecting', 'Reconnecting…');
        await new Promise((resolve) => {
          retry = setTimeout(resolve, wait);
        });
      }
    }
  }

  draw();
  follow();
}
