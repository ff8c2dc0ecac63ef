// #/server's live part: the node's facts, its main figures as small charts
// and the active tasks, asked again every two seconds while the page shows.

import { ApiError, api, describeError } from '../lib/api.js';
import { clear, fmtAgo, fmtBytes, fmtNumber, fmtRate, h, setText, stripCredentials } from '../lib/dom.js';
import { handlePageError, onCleanup } from '../lib/shell.js';
import { stat } from '../lib/widgets.js';
import { niceMax } from './replication.js';

export const POLL_MS = 2000;
/** How far back the charts look. */
const WINDOW_MS = 2 * 60 * 1000;
/** A longer gap between two samples (the page was left) gives no rate. */
const MAX_GAP_MS = 10000;

/** The charts: what each shows and how its figure is written. */
const CHARTS = [
  { key: 'requests', title: 'Requests per second', format: fmtRate, hint: 'HTTP requests the server answered (couchdb.httpd.requests)' },
  { key: 'writes', title: 'Database writes per second', format: fmtRate, hint: 'Documents written to databases (couchdb.database_writes)' },
  { key: 'openDbs', title: 'Open databases', format: fmtNumber, hint: 'Databases open at once (couchdb.open_databases)' },
  { key: 'replication', title: 'Replicated docs per second', format: fmtRate, hint: 'Documents written by the running replications (docs_written of _active_tasks)' },
];

/**
 * Kept across visits of the page (not across reloads): the samples of each
 * chart and the counters last read, whose differences make the rates.
 */
const memory = {
  last: null,
  series: { requests: [], writes: [], openDbs: [], replication: [] },
};

/** A figure of `_stats` by its path (`couchdb.httpd.requests`), or null. */
function figure(stats, path) {
  let node = stats;
  for (const key of path) node = node && typeof node === 'object' ? node[key] : undefined;
  const value = node && typeof node === 'object' ? node.value : node;
  return typeof value === 'number' ? value : null;
}

/** Adds one sample, dropping those older than the window. */
function push(key, t, v) {
  if (v === null || v === undefined || Number.isNaN(v)) return;
  const series = memory.series[key];
  series.push({ t, v });
  while (series.length && series[0].t < t - WINDOW_MS - POLL_MS) series.shift();
}

/** A counter's rate per second since the last sample; null after a reset. */
function rate(now, before, seconds) {
  if (now === null || before === null || now < before) return null;
  return (now - before) / seconds;
}

/** Records one poll's figures: rates from the counters' differences. */
function record(stats, tasks) {
  const t = Date.now();
  const requests = figure(stats, ['couchdb', 'httpd', 'requests']);
  const writes = figure(stats, ['couchdb', 'database_writes']);
  const written = new Map(tasks
    .filter((task) => task.type === 'replication')
    .map((task) => [task.replication_id || task.pid, Number(task.docs_written) || 0]));
  const last = memory.last;
  if (last && t - last.t <= MAX_GAP_MS && t > last.t) {
    const seconds = (t - last.t) / 1000;
    push('requests', t, rate(requests, last.requests, seconds));
    push('writes', t, rate(writes, last.writes, seconds));
    let docs = 0;
    for (const [key, now] of written) {
      const before = last.written.get(key);
      if (before !== undefined && now >= before) docs += now - before;
    }
    push('replication', t, docs / seconds);
  }
  push('openDbs', t, figure(stats, ['couchdb', 'open_databases']));
  memory.last = { t, requests, writes, written };
}

/** A small chart of one series over the window, as an SVG image. */
export function sparkline(points, label) {
  const width = 300;
  const height = 64;
  const pad = 3;
  const now = Date.now();
  const top = niceMax(Math.max(0, ...points.map((p) => p.v)));
  const x = (t) => pad + (width - 2 * pad) * (1 - (now - t) / WINDOW_MS);
  const y = (v) => height - pad - (height - 2 * pad) * (v / top);
  const svg = h('svg', {
    class: 'spark', viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: 'none', role: 'img', 'aria-label': label,
  });
  svg.append(h('line', { class: 'spark-base', x1: 0, x2: width, y1: y(0), y2: y(0) }));
  const shown = points.filter((p) => p.t >= now - WINDOW_MS);
  if (shown.length > 1) {
    const line = shown.map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(' ');
    const first = shown[0];
    const last = shown[shown.length - 1];
    svg.append(
      h('path', { class: 'spark-area', d: `M${x(first.t).toFixed(1)},${y(0)} L${line.replace(/ /g, ' L')} L${x(last.t).toFixed(1)},${y(0)} Z` }),
      h('polyline', { class: 'spark-line', points: line }));
  }
  return svg;
}

/** One chart's card; `draw()` redraws it from the memory. */
function chartCard(chart) {
  const value = h('p', { class: 'spark-value', text: '—' });
  const peak = h('p', { class: 'spark-peak muted small' });
  const holder = h('div', { class: 'spark-holder' });
  const el = h('figure', { class: 'spark-card', dataset: { chart: chart.key }, title: chart.hint },
    h('figcaption', { class: 'spark-title', text: chart.title }), value, holder, peak);
  function draw() {
    const points = memory.series[chart.key].filter((p) => p.t >= Date.now() - WINDOW_MS);
    const current = points.length ? points[points.length - 1].v : null;
    const max = points.reduce((m, p) => Math.max(m, p.v), 0);
    el.dataset.current = current === null ? '' : String(current);
    el.dataset.peak = String(max);
    setText(value, current === null ? '—' : chart.format(current));
    setText(peak, points.length ? `Peak ${chart.format(max)} in the last ${WINDOW_MS / 60000} minutes` : 'Measuring…');
    const label = `${chart.title}: ${current === null ? 'not measured yet' : `now ${chart.format(current)}`}, peak ${chart.format(max)} over the last ${WINDOW_MS / 60000} minutes.`;
    clear(holder).append(sparkline(points, label));
  }
  return { el, draw };
}

/** Seconds as "3 d 4 h", "2 h 5 min", "4 min 10 s". */
export function fmtDuration(seconds) {
  const s = Math.max(0, Math.floor(Number(seconds) || 0));
  const d = Math.floor(s / 86400);
  const hh = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (d) return `${d} d ${hh} h`;
  if (hh) return `${hh} h ${m} min`;
  if (m) return `${m} min ${s % 60} s`;
  return `${s} s`;
}

/** A task's time (`started_on`, `updated_on`: Unix seconds) as ISO text. */
function isoOf(unix) {
  return typeof unix === 'number' && unix > 0 ? new Date(unix * 1000).toISOString() : null;
}

function timeCell(unix) {
  const iso = isoOf(unix);
  return h('td', {}, iso
    ? h('time', { datetime: iso, title: new Date(iso).toLocaleString('en-GB'), text: fmtAgo(iso) })
    : '—');
}

const TASK_TYPES = {
  replication: 'Replication',
  search_indexer: 'Search index',
  indexer: 'View index',
  database_compaction: 'Compaction',
  view_compaction: 'View compaction',
};

/** One row of the tasks table. */
function taskRow(task) {
  let what;
  let progress;
  let fraction = null;
  if (task.type === 'replication') {
    what = h('td', {},
      h('span', { class: 'mono break', text: stripCredentials(task.source) || '—' }),
      h('span', { class: 'route-label', text: ' → ' }),
      h('span', { class: 'mono break', text: stripCredentials(task.target) || '—' }),
      task.doc_id ? h('div', { class: 'muted small', text: `${task.doc_id} in ${task.database}` }) : null);
    const written = Number(task.docs_written) || 0;
    const pending = Number(task.changes_pending) || 0;
    fraction = written + pending > 0 ? written / (written + pending) : null;
    progress = `${fmtNumber(written)} written · ${task.changes_pending === null || task.changes_pending === undefined ? '—' : fmtNumber(pending)} pending`;
  } else {
    const index = [task.design_document, task.index].filter(Boolean).join(' / ');
    what = h('td', {},
      h('span', { class: 'mono break', text: task.database || '—' }),
      index ? h('div', { class: 'muted small mono', text: index }) : null);
    fraction = typeof task.progress === 'number' ? task.progress / 100 : null;
    progress = task.total_changes !== undefined
      ? `${fmtNumber(task.changes_done)} of ${fmtNumber(task.total_changes)} changes`
      : fraction === null ? '—' : `${Math.round(fraction * 100)}%`;
  }
  const bar = h('span', { class: 'progress-bar' });
  if (fraction !== null) bar.style.width = `${Math.round(Math.min(1, fraction) * 100)}%`;
  return h('tr', { dataset: { type: task.type || '' } },
    h('th', { scope: 'row' }, TASK_TYPES[task.type] || task.type || 'Task',
      task.continuous ? h('span', { class: 'tag', text: 'Continuous' }) : null),
    what,
    h('td', { class: 'task-progress' }, h('span', { text: progress }),
      fraction === null ? null : h('div', { class: 'progress', 'aria-hidden': 'true' }, bar)),
    timeCell(task.started_on),
    timeCell(task.updated_on));
}

/**
 * The live sections of the Server page, polling while `alive()`: the
 * node's facts, the charts and the active tasks. Answers their elements.
 */
export function liveSections(alive) {
  const facts = h('dl', { class: 'stats node-facts' });
  const charts = CHARTS.map(chartCard);
  const tasksBody = h('tbody');
  const tasksCount = h('span', { class: 'count' });
  const liveText = h('span', { class: 'live-text', text: 'Connecting…' });
  const pollError = h('div', { class: 'form-error', role: 'alert' });
  const node = { versions: null, members: null, up: null, system: null };

  const nodeSection = h('section', { class: 'card', 'aria-labelledby': 'node-heading' },
    h('div', { class: 'section-head' },
      h('h2', { id: 'node-heading', text: 'Node' }),
      h('p', { class: 'live' }, h('span', { class: 'live-dot', 'aria-hidden': 'true' }), liveText)),
    facts,
    h('div', { class: 'spark-grid' }, charts.map((c) => c.el)),
    pollError);
  const tasksSection = h('section', { class: 'card table-card tasks-card', 'aria-labelledby': 'tasks-heading' },
    h('div', { class: 'section-head' },
      h('h2', { id: 'tasks-heading' }, 'Active tasks ', tasksCount)),
    h('div', { class: 'table-scroll' },
      h('table', { class: 'table tasks-table' },
        h('caption', { class: 'sr-only', text: 'Tasks running on the server, refreshed every two seconds' }),
        h('thead', {}, h('tr', {},
          h('th', { scope: 'col', text: 'Type' }),
          h('th', { scope: 'col', text: 'Database, or source → target' }),
          h('th', { scope: 'col', text: 'Progress' }),
          h('th', { scope: 'col', text: 'Started' }),
          h('th', { scope: 'col', text: 'Updated' }))),
        tasksBody)));

  function drawFacts() {
    const { versions, members, up, system } = node;
    const v = versions || {};
    clear(facts).append(
      stat('Status', up ? up.status || '—' : '—'),
      stat('Node', members ? (members.all_nodes || []).join(', ') : '—'),
      stat('Recliner', v.recliner ? v.recliner.version : '—'),
      stat('CouchDB API', v.couchdb_api ? v.couchdb_api.version : '—'),
      stat('JavaScript', v.javascript_engine ? v.javascript_engine.name : '—'),
      stat('Uptime', system ? fmtDuration(system.uptime) : '—'),
      stat('Memory', system && system.memory ? fmtBytes(system.memory.processes) : '—'),
      stat('Threads', system ? fmtNumber(system.process_count) : '—'),
      stat('Open databases', system ? fmtNumber(system.open_databases) : '—'));
  }

  function drawTasks(tasks) {
    setText(tasksCount, `(${fmtNumber(tasks.length)})`);
    clear(tasksBody);
    if (!tasks.length) {
      tasksBody.append(h('tr', {}, h('td', { colspan: 5, class: 'muted empty-row', text: 'No task is running.' })));
      return;
    }
    tasksBody.append(...tasks.map(taskRow));
  }

  let timer = null;
  let stopped = false;
  onCleanup(() => {
    stopped = true;
    clearTimeout(timer);
  });

  async function poll() {
    timer = null;
    try {
      const [stats, tasks, system, up] = await Promise.all([
        api('GET', '/_node/_local/_stats'),
        api('GET', '/_active_tasks'),
        api('GET', '/_node/_local/_system'),
        api('GET', '/_up').catch((err) => ({ status: err.status === 404 ? 'unknown' : `not ready (${describeError(err)})` })),
      ]);
      if (stopped || !alive()) return;
      Object.assign(node, { system, up });
      record(stats, tasks);
      drawFacts();
      drawTasks(tasks);
      for (const c of charts) c.draw();
      clear(pollError);
      setText(liveText, `Live · updated ${new Date().toLocaleTimeString('en-GB', { hour12: false })}`);
    } catch (err) {
      if (stopped || !alive()) return;
      if (err instanceof ApiError && err.status === 401) {
        handlePageError(err);
        return;
      }
      clear(pollError).append(h('p', { text: `Updates failed: ${describeError(err)} Retrying.` }));
      setText(liveText, 'Reconnecting…');
    }
    if (!stopped && alive()) timer = setTimeout(poll, POLL_MS);
  }

  /** Starts polling, after reading what does not change while the server runs. */
  async function start() {
    const [versions, members] = await Promise.all([
      api('GET', '/_node/_local/_versions').catch(() => null),
      api('GET', '/_membership').catch(() => null),
    ]);
    if (stopped || !alive()) return;
    Object.assign(node, { versions, members });
    drawFacts();
    for (const c of charts) c.draw();
    await poll();
  }

  drawFacts();
  drawTasks([]);
  return { nodeSection, tasksSection, start };
}
