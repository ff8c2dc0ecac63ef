// #/replication: start replications and watch every job live, with a
// throughput chart.

import { ApiError, api, describeError } from '../lib/api.js';
import { clear, fmtAgo, fmtNumber, fmtRate, fmtTime, h, setText, stripCredentials, uid } from '../lib/dom.js';
import { dbPath } from '../lib/paths.js';
import { announce, handlePageError, main, onCleanup, startPage } from '../lib/shell.js';
import { confirmDialog } from '../lib/widgets.js';
import { DB_NAME } from './databases.js';

// ------------------------------------------------------------ replication

export const POLL_MS = 1000;
export const WINDOW_MS = 3 * 60 * 1000;
export const SERIES_COLORS = ['#0891b2', '#db2777', '#ca8a04', '#16a34a', '#ea580c', '#7c3aed'];
export const STATES = {
  running: { label: 'Running', cls: 'running' },
  pending: { label: 'Pending', cls: 'pending' },
  crashing: { label: 'Crashing', cls: 'crashing' },
  completed: { label: 'Completed', cls: 'completed' },
  failed: { label: 'Failed', cls: 'failed' },
  error: { label: 'Error', cls: 'failed' },
  initializing: { label: 'Starting', cls: 'pending' },
  stopped: { label: 'Stopped', cls: 'stopped' },
};

// Kept across visits of the page (not across reloads): samples for the
// chart, and jobs this console stopped (the server then lists them as pending).
export const replicationMemory = {
  samples: new Map(), // key -> [{t, w}]
  rates: new Map(), // key -> [{t, r}]
  totals: [], // [{t, r}]
  seen: new Set(),
  firstPollDone: false,
  stopped: new Set(),
  labels: new Map(),
  colors: new Map(),
  endpoints: new Map(), // doc key -> {source, target} read from the doc
  counters: new Map(), // key -> last counters seen
  activity: new Map(), // key -> when the counters last changed
};

export async function renderReplication() {
  const alive = startPage('Replication', 'replication');
  const root = clear(main());
  root.append(h('div', { class: 'page-head' },
    h('div', {}, h('h1', { text: 'Replication' }),
      h('p', { class: 'muted', text: 'Start replications and watch every job of the server live.' }))));

  root.append(replicationForm());

  // The live part.
  const liveText = h('span', { class: 'live-text', text: 'Connecting…' });
  const liveDot = h('span', { class: 'live-dot', 'aria-hidden': 'true' });
  let paused = false;
  const pauseButton = h('button', { type: 'button', class: 'btn btn-small', 'aria-pressed': 'false', text: 'Pause updates' });
  pauseButton.addEventListener('click', () => {
    paused = !paused;
    pauseButton.setAttribute('aria-pressed', String(paused));
    setText(pauseButton, paused ? 'Resume updates' : 'Pause updates');
    liveDot.classList.toggle('paused', paused);
    if (!paused) poll();
  });
  const pollError = h('div', { class: 'form-error', role: 'alert' });

  const chart = throughputChart();
  root.append(h('section', { class: 'card', 'aria-labelledby': 'throughput-heading' },
    h('div', { class: 'section-head' },
      h('h2', { id: 'throughput-heading', text: 'Throughput' }),
      h('div', { class: 'live' }, liveDot, liveText, pauseButton)),
    pollError,
    chart.el));

  const jobsCount = h('span', { class: 'count', text: '' });
  const summary = h('p', { class: 'muted jobs-summary', text: '' });
  const jobsList = h('div', { class: 'jobs', id: 'jobs' });
  const empty = h('div', { class: 'card empty', hidden: true }, h('p', { text: 'No replication jobs. Start one with the form above.' }));
  root.append(h('section', { 'aria-labelledby': 'jobs-heading', class: 'jobs-section' },
    h('div', { class: 'section-head' }, h('h2', { id: 'jobs-heading', tabindex: '-1' }, 'Jobs ', jobsCount), summary),
    empty, jobsList));

  const cards = new Map();
  let timer = null;
  onCleanup(() => clearTimeout(timer));

  async function poll() {
    clearTimeout(timer);
    if (!alive()) return;
    try {
      const [jobs, docs] = await Promise.all([
        api('GET', '/_scheduler/jobs'),
        api('GET', '/_scheduler/docs'),
      ]);
      if (!alive()) return;
      clear(pollError);
      const list = mergeJobs(jobs.jobs || [], docs.docs || []);
      record(list);
      fillMissingEndpoints(list);
      updateCards(list);
      chart.draw(list);
      const now = new Date();
      setText(liveText, paused ? `Paused · last update ${fmtTime(now)}` : `Live · updated ${fmtTime(now)}`);
    } catch (err) {
      if (!alive()) return;
      if (err instanceof ApiError && err.status === 401) {
        handlePageError(err);
        return;
      }
      clear(pollError);
      pollError.append(h('p', { text: `Live update failed: ${describeError(err)} Retrying…` }));
      setText(liveText, 'Reconnecting…');
    }
    if (!paused && alive()) timer = setTimeout(poll, POLL_MS);
  }

  function updateCards(list) {
    const present = new Set(list.map((j) => j.key));
    for (const [key, card] of cards) {
      if (!present.has(key)) {
        if (card.el.contains(document.activeElement)) document.getElementById('jobs-heading').focus();
        card.el.remove();
        cards.delete(key);
      }
    }
    // New cards go in sorted position; existing ones never move (focus stays).
    list.forEach((job, index) => {
      let card = cards.get(job.key);
      if (!card) {
        card = jobCard(job, poll);
        cards.set(job.key, card);
        const next = list.slice(index + 1).map((j) => cards.get(j.key)).find(Boolean);
        jobsList.insertBefore(card.el, next ? next.el : null);
      }
      card.update(job);
    });
    empty.hidden = list.length > 0;
    setText(jobsCount, `(${list.length})`);
    const counts = {};
    for (const job of list) counts[job.state] = (counts[job.state] || 0) + 1;
    setText(summary, Object.entries(counts).map(([s, n]) => `${n} ${(STATES[s] || { label: s }).label.toLowerCase()}`).join(' · '));
  }

  await poll();
}

export function replicationForm() {
  const error = h('div', { class: 'form-error', role: 'alert' });
  const endpointFields = (role, example) => {
    const urlId = uid(`${role}-url`);
    const userId = uid(`${role}-user`);
    const passId = uid(`${role}-pass`);
    const title = role === 'source' ? 'Source' : 'Target';
    return h('fieldset', { class: 'endpoint' },
      h('legend', { text: title }),
      h('div', { class: 'field' },
        h('label', { for: urlId, text: 'Database name or URL' }),
        h('input', { id: urlId, name: `${role}`, type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: example, 'aria-describedby': `${urlId}-hint` }),
        h('p', { id: `${urlId}-hint`, class: 'hint', text: 'A database on this server, or http(s)://host:port/db' })),
      h('div', { class: 'field-row' },
        h('div', { class: 'field' },
          h('label', { for: userId, text: 'Username (optional)' }),
          h('input', { id: userId, name: `${role}User`, type: 'text', autocomplete: 'off', spellcheck: 'false' })),
        h('div', { class: 'field' },
          h('label', { for: passId, text: 'Password (optional)' }),
          h('input', { id: passId, name: `${role}Pass`, type: 'password', autocomplete: 'new-password' }))));
  };
  const continuousId = uid('continuous');
  const createId = uid('create-target');
  const nameId = uid('job-name');
  const submit = h('button', { type: 'submit', class: 'btn btn-primary', text: 'Start replication' });
  const form = h('form', { class: 'rep-form', 'aria-labelledby': 'new-rep-heading' },
    h('div', { class: 'endpoints' }, endpointFields('source', 'e.g. inventory'), h('div', { class: 'arrow', 'aria-hidden': 'true', text: '→' }), endpointFields('target', 'e.g. https://backup.example.com/inventory')),
    h('div', { class: 'rep-options' },
      h('div', { class: 'check' }, h('input', { id: continuousId, name: 'continuous', type: 'checkbox' }), h('label', { for: continuousId, text: 'Continuous (keep following changes)' })),
      h('div', { class: 'check' }, h('input', { id: createId, name: 'createTarget', type: 'checkbox', checked: true }), h('label', { for: createId, text: 'Create the target if missing' })),
      h('div', { class: 'field field-inline' },
        h('label', { for: nameId, text: 'Job name (optional)' }),
        h('input', { id: nameId, name: 'jobName', type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'generated' })),
      submit),
    error);

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clear(error);
    const f = form.elements;
    let source;
    let target;
    try {
      source = endpoint(f.source.value, f.sourceUser.value, f.sourcePass.value, 'source');
      target = endpoint(f.target.value, f.targetUser.value, f.targetPass.value, 'target');
    } catch (err) {
      error.append(h('p', { text: err.message }));
      return;
    }
    const doc = { source, target };
    if (f.continuous.checked) doc.continuous = true;
    if (f.createTarget.checked) doc.create_target = true;
    const jobName = f.jobName.value.trim();
    if (jobName.startsWith('_')) {
      error.append(h('p', { text: 'A job name cannot start with “_”.' }));
      f.jobName.focus();
      return;
    }
    submit.disabled = true;
    try {
      const res = jobName
        ? await api('PUT', `/_replicator/${encodeURIComponent(jobName)}`, { json: doc })
        : await api('POST', '/_replicator', { json: doc });
      // Passwords leave the form once sent; they are never shown again.
      f.sourcePass.value = '';
      f.targetPass.value = '';
      f.jobName.value = '';
      announce(`Replication ${res.id} started (${describeEndpoint(source)} → ${describeEndpoint(target)}).`);
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) return handlePageError(err);
      error.append(h('p', { text: err instanceof ApiError && err.status === 409 ? `A job named “${jobName}” exists already: choose another name or delete it first.` : describeError(err) }));
    } finally {
      submit.disabled = false;
    }
  });
  return h('section', { class: 'card', 'aria-labelledby': 'new-rep-heading' },
    h('h2', { id: 'new-rep-heading', text: 'New replication' }), form);
}

/** A replication endpoint for the `_replicator` doc (credentials in `auth`). */
export function endpoint(value, user, password, role) {
  const text = value.trim();
  if (!text) throw new Error(`Enter the ${role}: a database name or URL.`);
  const isUrl = /^https?:\/\//i.test(text);
  if (!isUrl) {
    if (!DB_NAME.test(text) && !text.startsWith('_')) {
      throw new Error(`The ${role} “${text}” is neither a URL nor a valid database name.`);
    }
    if (!user) return text;
    return { url: `${location.origin}${dbPath(text)}`, auth: { basic: { username: user, password } } };
  }
  let url;
  try {
    url = new URL(text);
  } catch {
    throw new Error(`The ${role} URL “${stripCredentials(text)}” is not valid.`);
  }
  if (!user) return url.toString();
  url.username = '';
  url.password = '';
  return { url: url.toString(), auth: { basic: { username: user, password } } };
}

export function describeEndpoint(ep) {
  return stripCredentials(typeof ep === 'string' ? ep : ep.url);
}

/** One list of jobs from `_scheduler/docs` (state) and `_scheduler/jobs` (stats, history). */
export function mergeJobs(jobs, docs) {
  const byKey = new Map();
  for (const d of docs) {
    const key = `doc:${d.database}/${d.doc_id}`;
    byKey.set(key, {
      key,
      kind: 'doc',
      database: d.database,
      docId: d.doc_id,
      repId: d.id,
      state: d.state || 'pending',
      source: d.source,
      target: d.target,
      info: d.info || {},
      errorCount: d.error_count || 0,
      lastUpdated: d.last_updated,
      startTime: d.start_time,
      history: [],
      job: null,
    });
  }
  for (const j of jobs) {
    const docKey = j.database && j.doc_id ? `doc:${j.database}/${j.doc_id}` : null;
    const entry = docKey && byKey.get(docKey);
    if (entry) {
      entry.job = j;
      entry.history = j.history || [];
      entry.info = { ...(entry.info || {}), ...(j.info || {}) };
      entry.repId = entry.repId || j.id;
      entry.source = entry.source || j.source;
      entry.target = entry.target || j.target;
      continue;
    }
    const history = j.history || [];
    const top = history[0] && history[0].type;
    byKey.set(`job:${j.id}`, {
      key: `job:${j.id}`,
      kind: 'transient',
      database: null,
      docId: null,
      repId: j.id,
      state: top === 'crashed' ? 'crashing' : j.pid ? 'running' : 'pending',
      source: j.source,
      target: j.target,
      info: j.info || {},
      errorCount: history.filter((e) => e.type === 'crashed').length,
      lastUpdated: history[0] && history[0].timestamp,
      startTime: j.start_time,
      history,
      job: j,
    });
  }
  const list = [...byKey.values()];
  for (const job of list) {
    job.continuous = Boolean(job.repId && job.repId.includes('+continuous'));
    if (job.kind === 'doc' && !job.job && job.state === 'pending' && replicationMemory.stopped.has(job.key)) {
      job.state = 'stopped';
    }
    if (job.kind === 'doc' && job.job && replicationMemory.stopped.has(job.key)) {
      replicationMemory.stopped.delete(job.key);
    }
    job.error = jobError(job);
  }
  list.sort((a, b) => String(b.startTime || '').localeCompare(String(a.startTime || '')) || a.key.localeCompare(b.key));
  return list;
}

export function jobError(job) {
  if (job.info && job.info.error) {
    return stripCredentials(typeof job.info.error === 'string' ? job.info.error : JSON.stringify(job.info.error));
  }
  const crash = (job.history || []).find((e) => e.type === 'crashed');
  if (crash && (job.state === 'crashing' || job.state === 'failed')) return stripCredentials(crash.reason || 'crashed');
  return '';
}

/** Completed `_replicator` jobs may come without source and target: read them from the doc. */
export function fillMissingEndpoints(list) {
  for (const job of list) {
    const known = replicationMemory.endpoints.get(job.key);
    if (job.source && job.target) {
      replicationMemory.endpoints.set(job.key, { source: job.source, target: job.target });
      continue;
    }
    if (known && known.source !== undefined) {
      job.source = job.source || known.source;
      job.target = job.target || known.target;
      continue;
    }
    if (job.kind === 'doc' && !known) {
      replicationMemory.endpoints.set(job.key, {});
      api('GET', `/${encodeURIComponent(job.database)}/${encodeURIComponent(job.docId)}`).then((doc) => {
        // Only the URLs are kept, without passwords.
        replicationMemory.endpoints.set(job.key, {
          source: describeEndpoint(doc.source || ''),
          target: describeEndpoint(doc.target || ''),
        });
      }, () => {
        replicationMemory.endpoints.delete(job.key);
      });
    }
  }
}

/** Differences docs_written between polls into per-job and total rates. */
export function record(list) {
  const mem = replicationMemory;
  const t = Date.now();
  let total = 0;
  for (const job of list) {
    const w = Number(job.info && job.info.docs_written);
    if (!Number.isFinite(w)) continue;
    const samples = mem.samples.get(job.key) || [];
    let prev = samples[samples.length - 1];
    if (!prev && mem.firstPollDone && !mem.seen.has(job.key)) {
      // A job that appeared since the last poll had written nothing before.
      prev = { t: t - POLL_MS, w: 0 };
    }
    mem.seen.add(job.key);
    let rate = 0;
    if (prev && w >= prev.w && t > prev.t) {
      rate = ((w - prev.w) * 1000) / (t - prev.t);
    }
    samples.push({ t, w });
    const counters = JSON.stringify([job.info.docs_read, job.info.docs_written, job.info.changes_pending, job.info.doc_write_failures]);
    if (mem.counters.has(job.key) && mem.counters.get(job.key) !== counters) mem.activity.set(job.key, t);
    mem.counters.set(job.key, counters);
    while (samples.length > 2) samples.shift();
    mem.samples.set(job.key, samples);
    const rates = mem.rates.get(job.key) || [];
    rates.push({ t, r: rate });
    while (rates.length && rates[0].t < t - WINDOW_MS - 5000) rates.shift();
    mem.rates.set(job.key, rates);
    job.rate = rate;
    total += rate;
  }
  for (const job of list) {
    if (!mem.labels.has(job.key)) mem.labels.set(job.key, job.docId || `${String(job.repId || job.key).slice(0, 8)}…`);
  }
  mem.totals.push({ t, r: total });
  while (mem.totals.length && mem.totals[0].t < t - WINDOW_MS - 5000) mem.totals.shift();
  mem.firstPollDone = true;
}

/** When the job last changed: its state (server) or its counters (seen here). */
export function lastActivity(job) {
  const seen = replicationMemory.activity.get(job.key);
  const server = job.lastUpdated ? Date.parse(job.lastUpdated) : 0;
  const t = Math.max(seen || 0, Number.isNaN(server) ? 0 : server);
  return t ? new Date(t).toISOString() : job.lastUpdated;
}

export function colorFor(key) {
  const mem = replicationMemory;
  if (!mem.colors.has(key)) mem.colors.set(key, SERIES_COLORS[mem.colors.size % SERIES_COLORS.length]);
  return mem.colors.get(key);
}

/** The live chart: total docs written per second and one line per active job. */
export function throughputChart() {
  const nowValue = h('dd', { text: '0' });
  const peakValue = h('dd', { text: '0' });
  const writtenValue = h('dd', { text: '0' });
  const activeValue = h('dd', { text: '0' });
  const svgHolder = h('div', { class: 'chart-holder' });
  const legend = h('ul', { class: 'legend chart-legend', 'aria-label': 'Chart lines' });
  const el = h('div', { class: 'chart' },
    h('dl', { class: 'stats stats-compact' },
      h('div', { class: 'stat' }, h('dt', { text: 'Now (docs/s)' }), nowValue),
      h('div', { class: 'stat' }, h('dt', { text: 'Peak (docs/s)' }), peakValue),
      h('div', { class: 'stat' }, h('dt', { text: 'Written in view' }), writtenValue),
      h('div', { class: 'stat' }, h('dt', { text: 'Running jobs' }), activeValue)),
    svgHolder, legend);

  function draw(list) {
    const mem = replicationMemory;
    const now = Date.now();
    const width = Math.max(320, Math.round(svgHolder.clientWidth || 800));
    const height = 220;
    const pad = { l: 56, r: 16, t: 14, b: 28 };
    const plotW = width - pad.l - pad.r;
    const plotH = height - pad.t - pad.b;
    // The window grows with the data, from 1 to 3 minutes.
    const since = mem.totals.length ? now - mem.totals[0].t : 0;
    const windowMs = Math.min(WINDOW_MS, Math.max(60000, Math.ceil(since / 30000) * 30000));
    const totals = mem.totals.filter((p) => p.t >= now - windowMs);
    let peak = 0;
    let written = 0;
    for (let i = 0; i < totals.length; i += 1) {
      peak = Math.max(peak, totals[i].r);
      if (i > 0) written += (totals[i].r * (totals[i].t - totals[i - 1].t)) / 1000;
    }
    const top = niceMax(peak);
    const xOf = (t) => pad.l + plotW - ((now - t) / windowMs) * plotW;
    const yOf = (r) => pad.t + plotH - (r / top) * plotH;
    const current = totals.length ? totals[totals.length - 1].r : 0;

    const svg = h('svg', {
      class: 'chart-svg', viewBox: `0 0 ${width} ${height}`, width, height, role: 'img',
      'aria-label': `Documents written per second over the last ${windowMs / 60000} minutes: now ${fmtRate(current)}, peak ${fmtRate(peak)}.`,
      dataset: { peak: String(peak), current: String(current), points: String(totals.length) },
    });
    const grid = h('g', { class: 'grid' });
    const ticks = 4;
    for (let i = 0; i <= ticks; i += 1) {
      const v = (top / ticks) * i;
      const y = yOf(v);
      grid.append(h('line', { x1: pad.l, x2: width - pad.r, y1: y, y2: y }),
        h('text', { x: pad.l - 8, y: y + 4, class: 'axis-label', 'text-anchor': 'end' }, fmtRate(v)));
    }
    const step = windowMs <= 90000 ? 15000 : 30000;
    for (let back = 0; back <= windowMs; back += step) {
      const x = xOf(now - back);
      const label = back === 0 ? 'now' : back % 60000 === 0 ? `−${back / 60000} min` : `−${back / 1000} s`;
      grid.append(h('line', { x1: x, x2: x, y1: pad.t, y2: pad.t + plotH, class: 'vline' }),
        h('text', { x, y: height - 8, class: 'axis-label', 'text-anchor': back === 0 ? 'end' : back === windowMs ? 'start' : 'middle' }, label));
    }
    svg.append(grid);
    // Per-job lines (jobs that wrote something in the window).
    const legendItems = [];
    const active = [];
    for (const [key, rates] of mem.rates) {
      const pts = rates.filter((p) => p.t >= now - windowMs);
      if (!pts.some((p) => p.r > 0)) continue;
      active.push([key, pts]);
    }
    const showPerJob = active.length > 1;
    if (showPerJob) {
      for (const [key, pts] of active.slice(0, 6)) {
        svg.append(h('polyline', { class: 'series', stroke: colorFor(key), points: pts.map((p) => `${xOf(p.t).toFixed(1)},${yOf(p.r).toFixed(1)}`).join(' ') }));
        legendItems.push(h('li', {}, h('span', { class: 'swatch line-swatch', dataset: { color: colorFor(key) } }), mem.labels.get(key) || key));
      }
    }
    if (totals.length) {
      const line = totals.map((p) => `${xOf(p.t).toFixed(1)},${yOf(p.r).toFixed(1)}`).join(' ');
      const first = totals[0];
      const last = totals[totals.length - 1];
      svg.append(
        h('path', { class: 'total-area', d: `M${xOf(first.t).toFixed(1)},${yOf(0)} L${line.replace(/ /g, ' L')} L${xOf(last.t).toFixed(1)},${yOf(0)} Z` }),
        h('polyline', { class: 'total-line', points: line }),
        h('circle', { class: 'total-dot', cx: xOf(last.t), cy: yOf(last.r), r: 4 }));
    }
    svg.append(h('line', { class: 'axis', x1: pad.l, x2: width - pad.r, y1: pad.t + plotH, y2: pad.t + plotH }));
    clear(svgHolder).append(svg);
    // Line swatches take their colour from script (CSP: no inline styles).
    clear(legend).append(h('li', {}, h('span', { class: 'swatch swatch-total' }), 'All jobs'), ...legendItems);
    for (const sw of legend.querySelectorAll('[data-color]')) sw.style.backgroundColor = sw.dataset.color;
    setText(nowValue, fmtRate(current));
    setText(peakValue, fmtRate(peak));
    setText(writtenValue, fmtNumber(Math.round(written)));
    setText(activeValue, fmtNumber(list.filter((j) => j.state === 'running').length));
  }

  return { el, draw };
}

export function niceMax(v) {
  if (v <= 0) return 10;
  const exp = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) {
    if (v <= m * exp) return m * exp;
  }
  return 10 * exp;
}

/** A job's card; `update(job)` refreshes it in place. */
export function jobCard(first, refresh) {
  const titleId = uid('job-title');
  const badge = h('span', { class: 'state' });
  const title = h('h3', { id: titleId, class: 'job-title break' });
  const kind = h('span', { class: 'tag' });
  const updated = h('span', { class: 'muted small' });
  const source = h('span', { class: 'mono break' });
  const target = h('span', { class: 'mono break' });
  const read = h('dd');
  const writtenEl = h('dd');
  const pending = h('dd');
  const failures = h('dd');
  const rate = h('dd');
  const errorBox = h('div', { class: 'job-error', hidden: true });
  const historyList = h('ol', { class: 'history' });
  const historySummary = h('summary');
  const history = h('details', { class: 'job-history' }, historySummary, historyList);
  const progress = h('div', { class: 'progress', 'aria-hidden': 'true' }, h('span', { class: 'progress-bar' }));
  const stop = h('button', { type: 'button', class: 'btn btn-small', text: 'Stop' });
  const restart = h('button', { type: 'button', class: 'btn btn-small', text: 'Restart' });
  const remove = h('button', { type: 'button', class: 'btn btn-small btn-danger-ghost', text: 'Delete' });
  const actionError = h('div', { class: 'form-error', role: 'alert' });
  const el = h('article', { class: 'job card', 'aria-labelledby': titleId },
    h('header', { class: 'job-head' }, badge, title, kind, updated),
    h('p', { class: 'route' }, h('span', { class: 'route-label', text: 'From' }), source, h('span', { class: 'route-label', text: 'to' }), target),
    h('dl', { class: 'job-stats' },
      h('div', { title: 'Documents read from the source' }, h('dt', { text: 'Read' }), read),
      h('div', { title: 'Documents written to the target' }, h('dt', { text: 'Written' }), writtenEl),
      h('div', { title: 'Changes of the source not replicated yet' }, h('dt', { text: 'Pending' }), pending),
      h('div', { title: 'Documents the target refused' }, h('dt', { text: 'Failures' }), failures),
      h('div', { title: 'Documents written per second, now' }, h('dt', { text: 'Docs/s' }), rate)),
    progress,
    errorBox,
    history,
    h('div', { class: 'job-actions' }, stop, restart, remove),
    actionError);
  let job = first;

  async function act(label, fn) {
    clear(actionError);
    for (const b of [stop, restart, remove]) b.disabled = true;
    try {
      await fn();
      refresh();
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) return handlePageError(err);
      actionError.append(h('p', { text: `${label} failed: ${describeError(err)}` }));
    } finally {
      for (const b of [stop, restart, remove]) b.disabled = false;
    }
  }

  stop.addEventListener('click', () => act('Stop', async () => {
    await api('POST', '/_replicate', { json: { replication_id: job.repId, cancel: true } });
    if (job.kind === 'doc') replicationMemory.stopped.add(job.key);
    announce(`Replication ${job.docId || job.repId} stopped.`);
  }));
  restart.addEventListener('click', () => act('Restart', async () => {
    const path = `/${encodeURIComponent(job.database)}/${encodeURIComponent(job.docId)}`;
    const doc = await api('GET', path);
    const fresh = {};
    for (const [k, v] of Object.entries(doc)) {
      if (k === '_rev' || k === 'owner' || k.startsWith('_replication_')) continue;
      fresh[k] = v;
    }
    // Deleting and re-creating the doc makes the replicator start afresh
    // (from its last checkpoint), whatever state the job was in.
    await api('DELETE', path, { params: { rev: doc._rev } });
    await api('PUT', path, { json: fresh });
    replicationMemory.stopped.delete(job.key);
    announce(`Replication ${job.docId} restarted.`);
  }));
  remove.addEventListener('click', async () => {
    const name = job.docId || job.repId;
    const ok = await confirmDialog({
      title: `Delete replication ${name}?`,
      body: [job.kind === 'doc'
        ? 'Its _replicator document is deleted, which stops the job. Replicated documents stay in the target.'
        : 'The job is cancelled. Replicated documents stay in the target.'],
      confirmLabel: 'Delete replication',
    });
    if (!ok) return;
    act('Delete', async () => {
      if (job.kind === 'doc') {
        const path = `/${encodeURIComponent(job.database)}/${encodeURIComponent(job.docId)}`;
        const doc = await api('GET', path);
        await api('DELETE', path, { params: { rev: doc._rev } });
      } else {
        await api('POST', '/_replicate', { json: { replication_id: job.repId, cancel: true } });
      }
      announce(`Replication ${name} deleted.`);
    });
  });

  function update(next) {
    job = next;
    const state = STATES[job.state] || { label: job.state, cls: 'pending' };
    badge.className = `state state-${state.cls}`;
    setText(badge, state.label);
    el.dataset.state = job.state;
    el.dataset.key = job.key;
    if (job.docId) el.dataset.docId = job.docId;
    setText(title, job.docId || `Transient job ${String(job.repId || '').split('+')[0].slice(0, 12)}`);
    setText(kind, `${job.continuous ? 'Continuous' : 'One-shot'}${job.kind === 'transient' ? ' · _replicate' : ''}`);
    const lastIso = lastActivity(job);
    setText(updated, lastIso ? `Updated ${fmtAgo(lastIso)}` : '');
    updated.title = lastIso ? `Last change: ${new Date(lastIso).toLocaleString('en-GB')}` : '';
    setText(source, stripCredentials(job.source) || '—');
    setText(target, stripCredentials(job.target) || '—');
    const info = job.info || {};
    setText(read, fmtNumber(info.docs_read));
    setText(writtenEl, fmtNumber(info.docs_written));
    setText(pending, info.changes_pending === null || info.changes_pending === undefined ? '—' : fmtNumber(info.changes_pending));
    setText(failures, fmtNumber(info.doc_write_failures));
    failures.classList.toggle('bad', Number(info.doc_write_failures) > 0);
    setText(rate, fmtRate(job.rate || 0));
    const w = Number(info.docs_written) || 0;
    const p = Number(info.changes_pending) || 0;
    const fraction = job.state === 'completed' ? 1 : w + p > 0 ? w / (w + p) : 0;
    progress.hidden = !(job.state === 'running' || job.state === 'completed');
    progress.firstChild.style.width = `${Math.round(fraction * 100)}%`;
    errorBox.hidden = !job.error;
    if (job.error) {
      const text = `${job.state === 'failed' ? 'Failed' : 'Error'}${job.errorCount > 1 ? ` (${job.errorCount} crashes)` : ''}: ${job.error}`;
      if (errorBox.textContent !== text) {
        clear(errorBox).append(h('strong', { text: job.state === 'failed' ? 'Failed' : 'Error' }),
          h('span', { text: `${job.errorCount > 1 ? ` (${job.errorCount} crashes)` : ''}: ${job.error}` }));
      }
    }
    const events = job.history || [];
    history.hidden = events.length === 0;
    const crashes = events.filter((e) => e.type === 'crashed').length;
    setText(historySummary, `History: ${events.length} event${events.length === 1 ? '' : 's'}${crashes ? `, ${crashes} crash${crashes > 1 ? 'es' : ''}` : ''}`);
    const signature = JSON.stringify(events);
    if (historyList.dataset.signature !== signature) {
      historyList.dataset.signature = signature;
      clear(historyList).append(...events.map((e) => h('li', { class: `event event-${e.type}` },
        h('time', { datetime: e.timestamp, text: e.timestamp ? new Date(e.timestamp).toLocaleString('en-GB') : '' }),
        h('span', { class: 'event-type', text: e.type }),
        e.reason ? h('span', { class: 'event-reason', text: stripCredentials(e.reason) }) : null)));
    }
    const name = job.docId || job.repId;
    stop.setAttribute('aria-label', `Stop replication ${name}`);
    restart.setAttribute('aria-label', `Restart replication ${name}`);
    remove.setAttribute('aria-label', `Delete replication ${name}`);
    stop.hidden = !(job.repId && job.job && ['running', 'pending', 'crashing'].includes(job.state));
    restart.hidden = job.kind !== 'doc';
    remove.hidden = false;
  }
  update(first);
  return { el, update };
}
