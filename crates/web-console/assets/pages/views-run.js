// #/db/NAME/views/run/DDOC/VIEW?key=...: a view run with CouchDB's query
// options. The route's parameters are the view's own query parameters, so a
// reload or a shared link shows the same run, and the page links the same
// query on the API. Runs and pages are fetched in place (the hash follows
// through history.pushState), so focus stays where the user is.

import { ApiError, api, describeError } from '../lib/api.js';
import { clear, fmtNumber, h, uid } from '../lib/dom.js';
import { link, query } from '../lib/paths.js';
import { handlePageError, main, startPage } from '../lib/shell.js';
import { databaseHeader } from '../lib/widgets.js';
import {
  ddocName, isJavaScript, jsonText, loadDesignDocs, viewLink, viewPath, viewsNav,
} from './views-common.js';
import { isDatabaseAdmin } from '../lib/rights.js';

/** Rows per page when the route names no `limit`, and the most allowed. */
const DEFAULT_LIMIT = 20;
const MAX_LIMIT = 1000;
/** The deepest `group_level` the form offers (keys are rarely deeper). */
const MAX_GROUP_LEVEL = 6;
/** The options whose text must be JSON, with their labels. */
const JSON_OPTIONS = [['key', 'Key'], ['startkey', 'Start key'], ['endkey', 'End key']];

/**
 * The form's state from the route's parameters. `stale` (deprecated in
 * CouchDB) is read as the `update` it stands for: ok = false,
 * update_after = lazy.
 */
function stateFromParams(params) {
  const int = (name, fallback, min, max) => {
    const n = Number.parseInt(params.get(name) || '', 10);
    return Number.isInteger(n) && n >= min && n <= max ? n : fallback;
  };
  let update = params.get('update') || '';
  if (!['true', 'false', 'lazy'].includes(update)) {
    update = { ok: 'false', update_after: 'lazy' }[params.get('stale')] || 'true';
  }
  let group = '';
  if (params.has('group_level')) group = String(int('group_level', 1, 0, 99));
  else if (params.get('group') === 'true') group = 'exact';
  return {
    key: params.get('key') || '',
    startkey: params.get('startkey') || '',
    endkey: params.get('endkey') || '',
    inclusiveEnd: params.get('inclusive_end') !== 'false',
    descending: params.get('descending') === 'true',
    reduce: params.get('reduce') !== 'false',
    group,
    includeDocs: params.get('include_docs') === 'true',
    limit: int('limit', DEFAULT_LIMIT, 1, MAX_LIMIT),
    skip: int('skip', 0, 0, Number.MAX_SAFE_INTEGER),
    update,
  };
}

/**
 * The view's query parameters for a state: only what differs from
 * CouchDB's defaults, and grouping only when reducing (include_docs only
 * when not), the combinations CouchDB refuses left out.
 */
function queryParams(state, hasReduce) {
  const p = {};
  for (const [name] of JSON_OPTIONS) if (state[name] !== '') p[name] = state[name];
  if (!state.inclusiveEnd) p.inclusive_end = 'false';
  if (state.descending) p.descending = 'true';
  const reducing = hasReduce && state.reduce;
  if (hasReduce && !state.reduce) p.reduce = 'false';
  if (reducing && state.group === 'exact') p.group = 'true';
  else if (reducing && /^\d+$/.test(state.group)) p.group_level = state.group;
  if (!reducing && state.includeDocs) p.include_docs = 'true';
  if (state.update !== 'true') p.update = state.update;
  if (state.skip) p.skip = String(state.skip);
  if (state.limit !== DEFAULT_LIMIT) p.limit = String(state.limit);
  return p;
}

/** The JSON options that do not parse, as [name, message] pairs. */
function jsonProblems(state) {
  const problems = [];
  for (const [name, label] of JSON_OPTIONS) {
    if (state[name] === '') continue;
    try {
      JSON.parse(state[name]);
    } catch (err) {
      problems.push([name, `${label} is not JSON (${err.message}). Strings need double quotes: "text".`]);
    }
  }
  return problems;
}

export async function renderViewRun(db, ddoc, view, params) {
  const alive = startPage(`${view} · ${db}`, 'dbs');
  const [docs, admin] = await Promise.all([loadDesignDocs(db), isDatabaseAdmin(db)]);
  if (!alive()) return;
  const doc = docs.find((d) => ddocName(d) === ddoc);
  const def = doc && doc.views && doc.views[view];

  const root = clear(main());
  root.append(...databaseHeader(db, 'views'));
  root.append(h('div', { class: 'page-head' },
    h('div', {}, h('h1', { class: 'mono break', text: view }),
      h('p', { class: 'muted' }, 'View of ', h('span', { class: 'mono', text: `_design/${ddoc}` }))),
    def && admin && isJavaScript(doc) ? h('div', { class: 'page-actions' },
      h('a', { class: 'btn', href: viewLink.edit(db, ddoc, view), text: 'Edit view' })) : null));
  const content = h('div', { class: 'views-main' });
  root.append(h('div', { class: 'views-layout' }, viewsNav(db, docs, { ddoc, view }), content));
  if (!def || !def.map) {
    content.append(h('div', { class: 'callout callout-error', role: 'alert' },
      h('p', { text: doc ? `_design/${ddoc} has no view named ${view}.` : `There is no design document _design/${ddoc}.` })));
    return;
  }
  const hasReduce = Boolean(def.reduce);
  const state = stateFromParams(params);
  const form = optionsForm(state, hasReduce);
  content.append(h('section', { class: 'card', 'aria-labelledby': form.headingId }, form.el));
  content.append(functionsSource(def));
  const results = resultsSection();
  content.append(results.el);

  let runs = 0;
  /** Runs the view for `s`, putting its options in the route when `push`. */
  async function run(s, { push = false, focusResults = false } = {}) {
    runs += 1;
    const mine = runs;
    const p = queryParams(s, hasReduce);
    if (push) {
      const hash = viewLink.run(db, ddoc, view, p);
      if (location.hash !== hash) history.pushState(null, '', hash);
    }
    const problems = jsonProblems(s);
    form.showProblems(problems);
    if (problems.length) {
      results.show(h('p', { class: 'muted', text: 'Correct the options to run the view.' }));
      return;
    }
    results.busy(true);
    let answer;
    try {
      answer = await api('GET', viewPath(db, ddoc, view), { params: { ...p, limit: String(s.limit + 1) } });
    } catch (err) {
      if (!alive() || mine !== runs) return;
      results.busy(false);
      if (err instanceof ApiError && err.status === 401) return handlePageError(err);
      results.show(h('div', { class: 'callout callout-error', role: 'alert' }, h('p', { text: describeError(err) })));
      return;
    }
    if (!alive() || mine !== runs) return;
    results.busy(false);
    results.show(...resultRows({ db, ddoc, view, hasReduce }, s, p, answer, (next) => {
      form.set(next);
      run(next, { push: true, focusResults: true });
    }));
    if (focusResults) results.focus();
  }

  form.onRun((s) => run(s, { push: true }));
  run(state);
}

/** The options form; `onRun(fn)` is called with the state on submit. */
function optionsForm(state, hasReduce) {
  const headingId = uid('view-options');
  const ids = {};
  for (const name of ['key', 'startkey', 'endkey', 'inclusiveEnd', 'descending', 'reduce', 'group', 'includeDocs', 'limit', 'skip', 'update']) ids[name] = uid(`view-${name}`);
  const errors = {};
  const jsonField = (name, label) => {
    errors[name] = h('p', { id: `${ids[name]}-error`, class: 'form-error field-error', role: 'alert' });
    return h('div', { class: 'field' },
      h('label', { for: ids[name], text: label }),
      h('input', {
        id: ids[name], name, type: 'text', class: 'mono', value: state[name], autocomplete: 'off', spellcheck: 'false',
        'aria-describedby': `${ids.key}-hint ${ids[name]}-error`,
      }),
      errors[name]);
  };
  const check = (name, label, checked) => h('div', { class: 'check' },
    h('input', { id: ids[name], name, type: 'checkbox', checked }),
    h('label', { for: ids[name], text: label }));
  const groupOptions = [['', 'No grouping (one row)'], ['exact', 'Exact keys (group=true)']];
  for (let level = 1; level <= MAX_GROUP_LEVEL; level += 1) groupOptions.push([String(level), `Level ${level} (group_level=${level})`]);
  if (state.group && !groupOptions.some(([v]) => v === state.group)) groupOptions.push([state.group, `Level ${state.group} (group_level=${state.group})`]);
  const groupField = h('div', { class: 'field' },
    h('label', { for: ids.group, text: 'Group' }),
    h('select', { id: ids.group, name: 'group' },
      groupOptions.map(([value, text]) => h('option', { value, selected: value === state.group, text }))));
  const includeDocsField = check('includeDocs', 'Include documents', state.includeDocs);
  const form = h('form', { class: 'view-options', novalidate: true },
    h('h2', { id: headingId, text: 'Query options' }),
    h('p', { id: `${ids.key}-hint`, class: 'hint', text: 'Keys are JSON: "text", 42, ["a", 1], null. With descending, the start key is the greater one.' }),
    h('div', { class: 'view-options-grid' },
      jsonField('key', 'Key'), jsonField('startkey', 'Start key'), jsonField('endkey', 'End key')),
    h('div', { class: 'view-options-grid' },
      h('div', { class: 'field' },
        h('label', { for: ids.limit, text: 'Limit (rows per page)' }),
        h('input', { id: ids.limit, name: 'limit', type: 'number', min: 1, max: MAX_LIMIT, step: 1, value: String(state.limit) })),
      h('div', { class: 'field' },
        h('label', { for: ids.skip, text: 'Skip' }),
        h('input', { id: ids.skip, name: 'skip', type: 'number', min: 0, step: 1, value: String(state.skip) })),
      h('div', { class: 'field' },
        h('label', { for: ids.update, text: 'Update the index' }),
        h('select', { id: ids.update, name: 'update' },
          [['true', 'First (update=true)'], ['false', 'No, answer from it as it is (update=false)'], ['lazy', 'After answering (update=lazy)']]
            .map(([value, text]) => h('option', { value, selected: value === state.update, text }))))),
    h('div', { class: 'view-options-checks' },
      check('descending', 'Descending', state.descending),
      check('inclusiveEnd', 'Inclusive end', state.inclusiveEnd),
      hasReduce ? check('reduce', 'Reduce', state.reduce) : null,
      includeDocsField),
    hasReduce ? groupField : null,
    h('div', { class: 'editor-actions' },
      h('button', { type: 'submit', class: 'btn btn-primary', text: 'Run' }),
      h('button', { type: 'reset', class: 'btn btn-ghost', text: 'Clear options' })));
  const el = form.elements;

  /** Grouping only while reducing, documents only while not. */
  function toggle() {
    const reducing = hasReduce && el.reduce.checked;
    groupField.hidden = !reducing;
    includeDocsField.hidden = reducing;
  }
  if (hasReduce) el.reduce.addEventListener('change', toggle);
  toggle();

  function read() {
    const int = (input, fallback, min, max) => {
      const n = Number.parseInt(input.value, 10);
      return Number.isInteger(n) ? Math.min(max, Math.max(min, n)) : fallback;
    };
    return {
      key: el.key.value.trim(),
      startkey: el.startkey.value.trim(),
      endkey: el.endkey.value.trim(),
      inclusiveEnd: el.inclusiveEnd.checked,
      descending: el.descending.checked,
      reduce: hasReduce ? el.reduce.checked : true,
      group: hasReduce ? el.group.value : '',
      includeDocs: el.includeDocs.checked,
      limit: int(el.limit, DEFAULT_LIMIT, 1, MAX_LIMIT),
      skip: int(el.skip, 0, 0, Number.MAX_SAFE_INTEGER),
      update: el.update.value,
    };
  }

  /** Puts a state in the form (paging changes skip). */
  function set(s) {
    for (const [name] of JSON_OPTIONS) el[name].value = s[name];
    el.inclusiveEnd.checked = s.inclusiveEnd;
    el.descending.checked = s.descending;
    if (hasReduce) {
      el.reduce.checked = s.reduce;
      el.group.value = s.group;
    }
    el.includeDocs.checked = s.includeDocs;
    el.limit.value = String(s.limit);
    el.skip.value = String(s.skip);
    el.update.value = s.update;
    toggle();
  }

  function showProblems(problems) {
    for (const [name] of JSON_OPTIONS) {
      clear(errors[name]);
      el[name].removeAttribute('aria-invalid');
    }
    for (const [name, message] of problems) {
      errors[name].append(h('span', { text: message }));
      el[name].setAttribute('aria-invalid', 'true');
    }
  }

  let runHandler = () => {};
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const s = read();
    const problems = jsonProblems(s);
    if (problems.length) {
      showProblems(problems);
      el[problems[0][0]].focus();
      return;
    }
    runHandler(s);
  });
  // Clearing goes back to CouchDB's defaults, not to the loaded values.
  form.addEventListener('reset', (event) => {
    event.preventDefault();
    set(stateFromParams(new URLSearchParams()));
    showProblems([]);
  });
  return { el: form, headingId, set, showProblems, onRun: (fn) => { runHandler = fn; } };
}

/** The view's map and reduce source, folded (members may read them too). */
function functionsSource(def) {
  return h('details', { class: 'card view-source' },
    h('summary', { text: 'Map and reduce functions' }),
    h('h3', { text: 'Map' }),
    h('pre', { class: 'code', text: String(def.map) }),
    h('h3', { text: 'Reduce' }),
    def.reduce ? h('pre', { class: 'code', text: String(def.reduce) }) : h('p', { class: 'muted', text: 'None.' }));
}

/** The results area: a heading, a live summary and the rows. */
function resultsSection() {
  const headingId = uid('view-results');
  const heading = h('h2', { id: headingId, tabindex: '-1', text: 'Results' });
  const body = h('div', { class: 'view-results-body' }, h('p', { class: 'muted', text: 'Running…' }));
  const el = h('section', { class: 'card view-results', 'aria-labelledby': headingId, 'aria-busy': 'true' }, heading, body);
  return {
    el,
    busy: (on) => el.setAttribute('aria-busy', on ? 'true' : 'false'),
    show: (...children) => {
      clear(body);
      body.append(...children);
    },
    focus: () => heading.focus(),
  };
}

/**
 * The rows of an answer (one more than a page was asked for, to know whether
 * a next page exists), their summary, the pager and the query's API link.
 */
function resultRows({ db, ddoc, view, hasReduce }, s, p, answer, go) {
  const rows = answer.rows.slice(0, s.limit);
  const hasNext = answer.rows.length > s.limit;
  const reduced = answer.total_rows === undefined;
  const withIds = rows.some((row) => row.id !== undefined);
  const withDocs = rows.some((row) => row.doc !== undefined);
  const first = s.skip + 1;
  const summary = h('p', { class: 'view-summary', role: 'status' },
    rows.length
      ? `Rows ${fmtNumber(first)}–${fmtNumber(s.skip + rows.length)}`
      : 'No rows',
    reduced ? ' (reduced)' : ` · total_rows ${fmtNumber(answer.total_rows)} · offset ${fmtNumber(answer.offset)}`);
  const apiHref = `${viewPath(db, ddoc, view)}${query(p)}`;
  const apiLine = h('p', { class: 'small view-api' }, 'On the API: ', h('a', { class: 'mono break', href: apiHref, text: `GET ${apiHref}` }));
  if (!rows.length) return [summary, apiLine];

  const tbody = h('tbody');
  for (const row of rows) {
    tbody.append(h('tr', {},
      h('td', { class: 'mono cell-key', text: jsonText(row.key) }),
      h('td', { class: 'mono cell-value', text: jsonText(row.value) }),
      withIds ? h('td', { class: 'mono cell-id' }, row.id === undefined ? '' : h('a', { href: link.doc(db, row.id), class: 'break', text: row.id })) : null,
      withDocs ? h('td', { class: 'mono cell-doc', text: row.doc === null ? 'null (deleted or missing)' : jsonText(row.doc) }) : null));
  }
  const table = h('div', { class: 'table-scroll' }, h('table', { class: 'table view-table' },
    h('caption', { class: 'sr-only', text: `Rows of ${view}` }),
    h('thead', {}, h('tr', {},
      h('th', { scope: 'col', text: 'Key' }),
      h('th', { scope: 'col', text: 'Value' }),
      withIds ? h('th', { scope: 'col', text: 'Document ID' }) : null,
      withDocs ? h('th', { scope: 'col', text: 'Document' }) : null)),
    tbody));

  const pageLink = (skip, label, rel) => {
    const next = { ...s, skip };
    const a = h('a', { class: 'btn', href: viewLink.run(db, ddoc, view, queryParams(next, hasReduce)), rel, text: label });
    a.addEventListener('click', (event) => {
      event.preventDefault();
      go(next);
    });
    return a;
  };
  const off = (label) => h('span', { class: 'btn', 'aria-disabled': 'true', text: label });
  const pager = h('nav', { class: 'pager', 'aria-label': 'Result pages' },
    s.skip > 0 ? pageLink(Math.max(0, s.skip - s.limit), '← Previous', 'prev') : off('← Previous'),
    h('span', { class: 'pager-info', text: `${fmtNumber(s.limit)} rows per page` }),
    hasNext ? pageLink(s.skip + s.limit, 'Next →', 'next') : off('Next →'));
  return [summary, table, pager, apiLine];
}
