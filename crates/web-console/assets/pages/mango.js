// #/db/NAME/mango: Mango queries (POST /db/_find) with the server's
// explanation (_explain) beside the results, bookmark paging, and the
// database's indexes (GET /db/_index), created and deleted by the users the
// server lets write design documents.

import { api, describeError } from '../lib/api.js';
import { append, clear, fmtNumber, h, setText, uid } from '../lib/dom.js';
import {
  bookmarkPaging, cellText, errorArea, jsonField, mustBe, sessionEnded, splitList, viewToggle,
} from '../lib/forms.js';
import { dbPath, link } from '../lib/paths.js';
import { announce, main, startPage } from '../lib/shell.js';
import { isDatabaseAdmin } from '../lib/rights.js';
import { confirmDialog, databaseHeader, stat } from '../lib/widgets.js';

const DEFAULT_SELECTOR = '{\n  "_id": {"$gt": null}\n}';
const DEFAULT_LIMIT = 25;

/** The Mango page: the query form, then the results with the explanation beside them, then the indexes. */
export async function renderMango(db) {
  const alive = startPage(`Mango · ${db}`, 'dbs');
  const [indexes, canWrite] = await Promise.all([
    api('GET', `${dbPath(db)}/_index`),
    isDatabaseAdmin(db),
  ]);
  if (!alive()) return;

  const root = clear(main());
  root.append(...databaseHeader(db, 'mango'), h('div', { class: 'page-head' },
    h('div', {}, h('h1', { text: 'Mango' }),
      h('p', { class: 'muted', text: 'Query documents with a selector (POST /_find); the server explains which index answers it.' }))));

  const query = queryForm(db);
  const results = h('section', { class: 'card mango-results', 'aria-labelledby': 'mango-results-heading' },
    h('h2', { id: 'mango-results-heading', text: 'Results' }),
    h('p', { class: 'muted', text: 'Run a query to see its documents.' }));
  const explanation = h('section', { class: 'card mango-explain', 'aria-labelledby': 'mango-explain-heading' },
    h('h2', { id: 'mango-explain-heading', text: 'Explanation' }),
    h('p', { class: 'muted', text: 'Which index the server picks, and why.' }));
  const indexSection = h('section', { class: 'card', 'aria-labelledby': 'mango-indexes-heading' });
  root.append(query.el, h('div', { class: 'mango-grid' }, results, explanation), indexSection);

  let view = 'table';
  let last = null;
  /** The query the pages belong to: paging reuses it, whatever the form holds since. */
  let current = null;
  const paging = bookmarkPaging('Result pages', (bookmark, direction) => run({ bookmark, direction }));

  /** Runs the form's query (a page of it with `bookmark`); a new query also asks for its explanation. */
  async function run({ bookmark, direction } = {}) {
    let body;
    if (direction) {
      body = { ...current };
      if (bookmark) body.bookmark = bookmark;
    } else {
      body = query.read();
      if (!body) return;
      current = body;
      paging.reset();
    }
    query.busy(true);
    // The explanation is asked beside the query; when the query fails it
    // often says why (no index can give the sort).
    const explaining = direction ? null
      : api('POST', `${dbPath(db)}/_explain`, { json: body }).catch((failed) => ({ failed }));
    try {
      const answer = await api('POST', `${dbPath(db)}/_find`, { json: body });
      if (!alive()) return;
      last = { answer, body };
      drawResults();
      if (direction) results.querySelector('h2').focus();
    } catch (err) {
      if (!alive()) return;
      if (direction) {
        paging.undo(direction, bookmark);
        announce(describeError(err), 'error');
      } else {
        last = null;
        await drawError(err);
      }
    } finally {
      query.busy(false);
    }
    if (explaining) {
      const explained = await explaining;
      if (alive()) showExplanation(explanation, explained);
    }
  }

  /** A refused query: CouchDB's reason where the results would be. */
  async function drawError(err) {
    if (await sessionEnded(err)) return;
    clear(results).append(h('h2', { id: 'mango-results-heading', tabindex: '-1', text: 'Results' }),
      h('div', { class: 'callout callout-error', role: 'alert' },
        h('p', { text: `The query failed. ${describeError(err)}` })));
  }

  /** The last answer: warnings, statistics, the rows as a table or JSON, the pager. */
  function drawResults() {
    const { answer, body } = last;
    const docs = answer.docs || [];
    paging.render(docs.length && body.limit && docs.length >= body.limit ? answer.bookmark : null, docs.length);
    append(clear(results), [
      h('div', { class: 'section-head' },
        h('h2', { id: 'mango-results-heading', tabindex: '-1' }, 'Results ', h('span', { class: 'count', text: `(${fmtNumber(docs.length)})` })),
        viewToggle('Show the results as', [['table', 'Table'], ['json', 'JSON']], view, (v) => {
          view = v;
          drawResults();
          results.querySelector(`.view-toggle [data-view="${v}"]`).focus();
        })),
      answer.warning ? h('div', { class: 'callout callout-warn mango-warning', role: 'status' },
        answer.warning.split('\n').map((line) => h('p', { text: line }))) : null,
      answer.execution_stats ? executionStats(answer.execution_stats) : null,
      view === 'json'
        ? h('pre', { class: 'code mango-json', tabindex: '0', 'aria-label': 'The answer of _find as JSON', text: JSON.stringify(answer, null, 2) })
        : resultTable(db, docs),
      paging.nav]);
  }

  query.onRun(() => run());
  query.setIndexes(indexes.indexes);
  drawIndexes(db, indexSection, indexes.indexes, canWrite, query, async () => {
    const fresh = await api('GET', `${dbPath(db)}/_index`);
    if (!alive()) return null;
    query.setIndexes(fresh.indexes);
    return fresh.indexes;
  });
}

/** The query editor: selector, fields, sort, limit, use_index, execution_stats. */
function queryForm(db) {
  let saved = {};
  try {
    saved = JSON.parse(sessionStorage.getItem(`mango:${db}`)) || {};
  } catch {
    // A query kept from an older console is simply not restored.
  }
  const selector = jsonField({
    label: 'Selector', value: saved.selector || DEFAULT_SELECTOR, rows: 8, check: mustBe.object,
    hint: 'A JSON object. Ctrl+Enter runs the query.',
  });
  const fieldsId = uid('mango-fields');
  const limitId = uid('mango-limit');
  const useId = uid('mango-use');
  const listId = uid('mango-index-names');
  const statsId = uid('mango-stats');
  const sort = jsonField({ label: 'Sort', value: saved.sort || '', rows: 2, optional: true, check: mustBe.array, hint: 'A JSON array, e.g. [{"year": "desc"}]; needs an index on those fields.' });
  const fields = h('input', { id: fieldsId, type: 'text', value: saved.fields || '', placeholder: '_id, title, year', spellcheck: 'false', autocomplete: 'off' });
  const limit = h('input', { id: limitId, type: 'number', min: '1', max: '10000', value: saved.limit || String(DEFAULT_LIMIT), class: 'input-number' });
  const useIndex = h('input', { id: useId, type: 'text', list: listId, value: saved.useIndex || '', placeholder: 'Let the server choose', spellcheck: 'false', autocomplete: 'off' });
  const names = h('datalist', { id: listId });
  const stats = h('input', { id: statsId, type: 'checkbox', checked: saved.stats !== false });
  const button = h('button', { type: 'submit', class: 'btn btn-primary', text: 'Run query' });
  const error = h('div', { class: 'form-error', role: 'alert' });
  const form = h('form', { class: 'card mango-query', 'aria-label': 'Mango query', novalidate: true },
    h('div', { class: 'mango-query-grid' },
      h('div', {}, selector.el),
      h('div', {},
        h('div', { class: 'field' }, h('label', { for: fieldsId, text: 'Fields' }),
          h('p', { class: 'hint', text: 'Comma-separated; empty for whole documents.' }), fields),
        sort.el,
        h('div', { class: 'field-row' },
          h('div', { class: 'field' }, h('label', { for: limitId, text: 'Limit' }), limit),
          h('div', { class: 'field' }, h('label', { for: useId, text: 'Use index' }), useIndex, names)),
        h('div', { class: 'check' }, stats, h('label', { for: statsId, text: 'Execution statistics' })))),
    error,
    h('div', { class: 'editor-actions' }, button));

  let onRun = () => {};
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    onRun();
  });
  form.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      onRun();
    }
  });

  /** The body of _find, or null (with the form's error shown) when an option is not valid. */
  function read() {
    clear(error);
    const sel = selector.read();
    const srt = sort.read();
    const problems = [];
    if (sel.error) problems.push([selector.textarea, `Selector: ${sel.error}`]);
    if (srt.error) problems.push([sort.textarea, `Sort: ${srt.error}`]);
    const n = Number(limit.value);
    if (!Number.isInteger(n) || n < 1) problems.push([limit, 'Limit: a whole number of at least 1.']);
    if (problems.length) {
      for (const [, text] of problems) error.append(h('p', { text }));
      problems[0][0].focus();
      return null;
    }
    const body = { selector: sel.value, limit: n };
    const list = splitList(fields.value);
    if (list.length) body.fields = list;
    if (srt.value && srt.value.length) body.sort = srt.value;
    const use = useIndex.value.trim().replace(/^_design\//, '');
    if (use) body.use_index = use.includes('/') ? use.split('/', 2) : use;
    if (stats.checked) body.execution_stats = true;
    try {
      // The query is kept for this tab: coming back to the page restores it.
      sessionStorage.setItem(`mango:${db}`, JSON.stringify({
        selector: selector.textarea.value, sort: sort.textarea.value, fields: fields.value, limit: limit.value, useIndex: useIndex.value, stats: stats.checked,
      }));
    } catch {
      // Storage refused (private browsing): the query is simply not kept.
    }
    return body;
  }

  return {
    el: form,
    read,
    onRun: (fn) => {
      onRun = fn;
    },
    busy: (on) => {
      button.disabled = on;
      setText(button, on ? 'Running…' : 'Run query');
    },
    /** The index names offered in "Use index" (design document/name). */
    setIndexes: (list) => {
      clear(names).append(...list.filter((i) => i.ddoc).map((i) => h('option', { value: `${i.ddoc.replace(/^_design\//, '')}/${i.name}` })));
    },
    useIndex: (value) => {
      useIndex.value = value;
      useIndex.focus();
    },
  };
}

/** `execution_stats` as a row of figures. */
function executionStats(s) {
  return h('dl', { class: 'stats stats-compact mango-stats', 'aria-label': 'Execution statistics' },
    stat('Keys examined', fmtNumber(s.total_keys_examined)),
    stat('Documents examined', fmtNumber(s.total_docs_examined)),
    stat('Quorum documents', fmtNumber(s.total_quorum_docs_examined)),
    stat('Results returned', fmtNumber(s.results_returned)),
    stat('Time', s.execution_time_ms === undefined ? '—' : `${Number(s.execution_time_ms).toFixed(1)} ms`));
}

/** The documents as a table: one column per field returned, `_id` first, `_id` linking to its document. */
function resultTable(db, docs) {
  if (!docs.length) return h('p', { class: 'empty', text: 'No document matches.' });
  const columns = ['_id'];
  for (const doc of docs) {
    for (const key of Object.keys(doc)) if (!columns.includes(key)) columns.push(key);
  }
  if (!docs.some((d) => '_id' in d)) columns.shift();
  const numeric = new Set(columns.filter((c) => docs.every((d) => d[c] === undefined || typeof d[c] === 'number')));
  return h('div', { class: 'table-scroll mango-table' },
    h('table', { class: 'table' },
      h('caption', { class: 'sr-only', text: 'Documents found' }),
      h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col', class: numeric.has(c) ? 'num' : null, text: c })))),
      h('tbody', {}, docs.map((doc) => h('tr', { dataset: { id: doc._id === undefined ? '' : String(doc._id) } },
        columns.map((c) => {
          if (c === '_id') return h('th', { scope: 'row' }, h('a', { class: 'mono break', href: link.doc(db, String(doc._id)), text: String(doc._id) }));
          const value = doc[c];
          return h('td', {
            class: [numeric.has(c) ? 'num' : '', c === '_rev' || (value && typeof value === 'object') ? 'mono' : ''].join(' ').trim() || null,
            title: value && typeof value === 'object' ? JSON.stringify(value) : null,
            text: cellText(value),
          });
        }))))));
}

/** Why an index was passed over, in words (CouchDB's reason names). */
const REASONS = {
  unfavored_type: 'the built-in index of all documents, used only when no other fits',
  field_mismatch: 'it does not index the fields the selector needs',
  sort_order_mismatch: 'it cannot give the requested sort',
  needs_text_search: 'the query needs a full-text index',
  is_partial: 'a partial index, used only when named in use_index',
  less_overlap: 'it covers fewer of the selector’s fields',
  too_many_fields: 'it indexes more fields than the chosen one',
  alphabetically_comes_after: 'an equal candidate whose name comes later',
  excluded_by_user: 'use_index names another index',
  scope_mismatch: 'its partitioning does not match the query',
  empty_selector: 'the selector is empty',
};

/** An index's fields as text: "year ↓, title". */
function indexFields(def) {
  const fields = (def && def.fields) || [];
  return fields.map((f) => {
    if (typeof f === 'string') return f;
    const [[name, dir]] = Object.entries(f);
    if (dir === 'asc') return name;
    if (dir === 'desc') return `${name} ↓`;
    return `${name} (${dir})`;
  }).join(', ') || '—';
}

/** The _explain answer: the chosen index, the other candidates with their reasons, the range read, hints. */
function showExplanation(section, explained) {
  clear(section).append(h('h2', { id: 'mango-explain-heading', text: 'Explanation' }));
  if (explained.failed) {
    section.append(h('p', { class: 'muted', text: `No explanation: ${describeError(explained.failed)}` }));
    return;
  }
  const index = explained.index;
  if (!index) {
    section.append(h('div', { class: 'callout callout-warn' }, h('p', { text: 'No index can answer this query.' })));
  } else {
    section.append(h('div', { class: 'mango-chosen', dataset: { index: index.name } },
      h('p', { class: 'mango-chosen-label', text: 'Index used' }),
      h('p', { class: 'mango-chosen-name' }, h('span', { class: 'mono', text: index.name }),
        h('span', { class: `badge ${index.type === 'special' ? 'badge-muted' : 'badge-ok'}`, text: index.type })),
      h('dl', { class: 'mango-facts' },
        h('dt', { text: 'Design document' }), h('dd', { class: 'mono break', text: index.ddoc || '— (built in)' }),
        h('dt', { text: 'Fields' }), h('dd', { class: 'mono', text: indexFields(index.def) }),
        index.def && index.def.partial_filter_selector && Object.keys(index.def.partial_filter_selector).length
          ? [h('dt', { text: 'Partial filter' }), h('dd', { class: 'mono break', text: JSON.stringify(index.def.partial_filter_selector) })]
          : null,
        explained.covering !== undefined ? [h('dt', { text: 'Covering' }), h('dd', { text: explained.covering ? 'yes: answered from the index alone' : 'no: documents are read' })] : null,
        explained.mrargs ? [h('dt', { text: 'Range read' }), h('dd', { class: 'mono break', text: `${JSON.stringify(explained.mrargs.start_key)} → ${JSON.stringify(explained.mrargs.end_key)} (${explained.mrargs.direction === 'rev' ? 'descending' : 'ascending'})` })] : null)));
  }
  const candidates = explained.index_candidates || [];
  if (candidates.length) {
    section.append(h('h3', { text: 'Other candidates' }), h('ul', { class: 'mango-candidates' },
      candidates.map((c) => {
        const reasons = ((c.analysis && c.analysis.reasons) || []).map((r) => r.name);
        return h('li', { dataset: { index: c.index.name } },
          h('span', { class: 'mono', text: c.index.name }),
          h('span', { class: `badge ${c.analysis && c.analysis.usable ? 'badge-muted' : 'badge-warn'}`, text: c.analysis && c.analysis.usable ? 'usable' : 'not usable' }),
          h('span', { class: 'muted small', text: reasons.map((r) => REASONS[r] || r).join('; ') }));
      })));
  }
  const hints = (explained.selector_hints || []).filter((x) => (x.indexable_fields || []).length || (x.unindexable_fields || []).length);
  if (hints.length) {
    section.append(h('h3', { text: 'Fields an index could cover' }), h('ul', { class: 'mango-hints small' },
      hints.map((x) => h('li', {}, h('strong', { text: `${x.type}: ` }),
        (x.indexable_fields || []).join(', ') || 'none',
        (x.unindexable_fields || []).length ? ` (not indexable: ${x.unindexable_fields.join(', ')})` : ''))));
  }
  section.append(h('details', { class: 'mango-raw' }, h('summary', { text: 'The _explain answer' }),
    h('pre', { class: 'code small', text: JSON.stringify(explained, null, 2) })));
}

// -------------------------------------------------------------- indexes

/** The index list and, for those who may write design documents, the form that creates one. */
function drawIndexes(db, section, initial, canWrite, query, reload) {
  const error = errorArea();
  const table = h('div');

  function drawList(list) {
    clear(table).append(h('div', { class: 'table-scroll' }, h('table', { class: 'table mango-index-table' },
      h('caption', { class: 'sr-only', text: `Indexes of ${db}` }),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col', text: 'Name' }),
        h('th', { scope: 'col', text: 'Design document' }),
        h('th', { scope: 'col', text: 'Type' }),
        h('th', { scope: 'col', text: 'Fields' }),
        h('th', { scope: 'col', class: 'actions' }, h('span', { class: 'sr-only', text: 'Actions' })))),
      h('tbody', {}, list.map((index) => {
        const ddocName = index.ddoc ? index.ddoc.replace(/^_design\//, '') : null;
        const partial = index.def && index.def.partial_filter_selector && Object.keys(index.def.partial_filter_selector).length;
        return h('tr', { dataset: { index: index.name } },
          h('th', { scope: 'row', class: 'mono break', text: index.name }),
          h('td', { class: 'mono break' }, index.ddoc ? h('a', { href: link.doc(db, index.ddoc), text: index.ddoc }) : h('span', { class: 'muted', text: 'built in' })),
          h('td', {}, h('span', { class: 'badge badge-muted', text: index.type })),
          h('td', { class: 'mono' }, indexFields(index.def), partial ? h('span', { class: 'tag', title: JSON.stringify(index.def.partial_filter_selector), text: 'partial' }) : null),
          h('td', { class: 'actions' }, ddocName ? [
            h('button', { type: 'button', class: 'btn btn-small', text: 'Use', 'aria-label': `Use ${index.name} in the query`, onclick: () => query.useIndex(`${ddocName}/${index.name}`) }),
            canWrite ? h('button', { type: 'button', class: 'btn btn-small btn-danger-ghost', text: 'Delete', 'aria-label': `Delete index ${index.name}`, onclick: () => remove(index, ddocName) }) : null,
          ] : null));
      })))));
  }

  /** DELETE /db/_index/{ddoc}/{type}/{name}, after a confirmation. */
  async function remove(index, ddocName) {
    const ok = await confirmDialog({
      title: `Delete the index ${index.name}?`,
      body: [`The index is removed from _design/${ddocName}; queries that used it fall back to another index or fail.`],
      confirmLabel: 'Delete index',
    });
    if (!ok) return;
    error.clear();
    try {
      await api('DELETE', `${dbPath(db)}/_index/${encodeURIComponent(ddocName)}/${encodeURIComponent(index.type)}/${encodeURIComponent(index.name)}`);
      announce(`Index ${index.name} deleted.`);
      const list = await reload();
      if (list) drawList(list);
      section.querySelector('h2').focus();
    } catch (err) {
      error.show(err);
    }
  }

  drawList(initial);
  section.append(
    h('h2', { id: 'mango-indexes-heading', tabindex: '-1', text: 'Indexes' }),
    table,
    error.el,
    canWrite ? createIndexForm(db, async (name) => {
      const list = await reload();
      if (list) drawList(list);
      const row = table.querySelector(`tr[data-index="${CSS.escape(name)}"] th`);
      if (row) row.scrollIntoView({ block: 'nearest' });
    }) : h('p', { class: 'hint mango-readonly', text: 'Only server and database admins may create or delete indexes.' }));
}

/** POST /db/_index: fields, name, design document, type (json or nouveau), partial filter selector. */
function createIndexForm(db, created) {
  const ids = { fields: uid('ix-fields'), name: uid('ix-name'), ddoc: uid('ix-ddoc'), type: uid('ix-type') };
  const fieldsHint = h('p', { class: 'hint', id: uid('ix-fields-hint') });
  const type = h('select', { id: ids.type, name: 'type' },
    h('option', { value: 'json', text: 'json (a sorted index)' }),
    h('option', { value: 'nouveau', text: 'nouveau (full text, for $text)' }));
  const fields = h('input', { id: ids.fields, name: 'fields', type: 'text', required: true, spellcheck: 'false', autocomplete: 'off', 'aria-describedby': fieldsHint.id });
  const partial = jsonField({ label: 'Partial filter selector (optional)', rows: 3, optional: true, check: mustBe.object, hint: 'Only documents matching it are indexed.' });
  const error = errorArea();
  const button = h('button', { type: 'submit', class: 'btn btn-primary', text: 'Create index' });
  const syncHint = () => setText(fieldsHint, type.value === 'json'
    ? 'Comma-separated; add “desc” after a field for a descending index: year desc, title.'
    : 'Comma-separated name:type pairs (text, string, number or boolean): title:text, year:number.');
  type.addEventListener('change', syncHint);
  syncHint();
  const form = h('form', { class: 'mango-create', 'aria-labelledby': 'mango-create-heading', novalidate: true },
    h('h3', { id: 'mango-create-heading', text: 'Create an index' }),
    h('div', { class: 'mango-create-grid' },
      h('div', { class: 'field' }, h('label', { for: ids.fields, text: 'Fields' }), fieldsHint, fields),
      h('div', { class: 'field' }, h('label', { for: ids.type, text: 'Type' }), type),
      h('div', { class: 'field' }, h('label', { for: ids.name, text: 'Name (optional)' }),
        h('input', { id: ids.name, name: 'name', type: 'text', spellcheck: 'false', autocomplete: 'off' })),
      h('div', { class: 'field' }, h('label', { for: ids.ddoc, text: 'Design document (optional)' }),
        h('input', { id: ids.ddoc, name: 'ddoc', type: 'text', spellcheck: 'false', autocomplete: 'off', placeholder: 'a new one per index' }))),
    partial.el,
    error.el,
    h('div', { class: 'editor-actions' }, button));

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.clear();
    const parts = splitList(fields.value);
    const filter = partial.read();
    if (!parts.length) {
      error.show(new Error('Name at least one field.'));
      fields.focus();
      return;
    }
    if (filter.error) {
      partial.textarea.focus();
      return;
    }
    const index = { fields: parts.map((p) => fieldSpec(type.value, p)) };
    if (filter.value) index.partial_filter_selector = filter.value;
    const body = { index, type: type.value };
    const name = form.elements.name.value.trim();
    const ddoc = form.elements.ddoc.value.trim().replace(/^_design\//, '');
    if (name) body.name = name;
    if (ddoc) body.ddoc = ddoc;
    button.disabled = true;
    try {
      const answer = await api('POST', `${dbPath(db)}/_index`, { json: body });
      announce(answer.result === 'exists' ? `Index ${answer.name} exists already.` : `Index ${answer.name} created in ${answer.id}.`);
      fields.value = '';
      form.elements.name.value = '';
      form.elements.ddoc.value = '';
      partial.set('');
      await created(answer.name);
    } catch (err) {
      error.show(err);
    } finally {
      button.disabled = false;
    }
  });
  return form;
}

/** One typed field of the create form as _index wants it: "year desc" → {"year": "desc"}, "title:text" → {name, type}. */
function fieldSpec(type, text) {
  if (type === 'nouveau') {
    const at = text.lastIndexOf(':');
    return at > 0 ? { name: text.slice(0, at).trim(), type: text.slice(at + 1).trim() } : { name: text, type: 'string' };
  }
  const m = /^(.*\S)\s+(asc|desc)$/i.exec(text);
  return m ? { [m[1]]: m[2].toLowerCase() } : text;
}
