// #/db/NAME/search: the full-text indexes of a database's design documents
// (Nouveau's `nouveau` and Clouseau's `indexes` members), queried with
// POST .../_nouveau/INDEX or .../_search/INDEX: hits with their fields and
// highlights, facet counts to drill down by, ranges, bookmark paging.

import { api, describeError } from '../lib/api.js';
import { clear, fmtNumber, h, setText, uid } from '../lib/dom.js';
import { dbPath, docPath, link } from '../lib/paths.js';
import { announce, main, startPage } from '../lib/shell.js';
import { databaseHeader } from '../lib/widgets.js';
import { bookmarkPaging, cellText, errorArea, jsonField, mustBe, sessionEnded, splitList } from '../lib/forms.js';

// Highlights are asked with tags no text holds (Unicode private-use
// characters), then split on them: a document's own "<em>" stays text.
const MARK_START = '\uE000';
const MARK_END = '\uE001';
const DEFAULT_LIMIT = 25;

/** The search indexes named by the design documents of `db` (both APIs), in the order of the design documents. */
async function searchIndexes(db) {
  const answer = await api('GET', `${dbPath(db)}/_all_docs`, {
    params: { startkey: '"_design/"', endkey: '"_design0"', include_docs: 'true' },
  });
  const found = [];
  for (const row of answer.rows) {
    const doc = row.doc || {};
    for (const [member, kind] of [['nouveau', 'nouveau'], ['indexes', 'search']]) {
      const defs = doc[member];
      if (!defs || typeof defs !== 'object') continue;
      for (const [name, def] of Object.entries(defs)) {
        found.push({ db, kind, ddoc: row.id, name, def, mango: doc.language === 'query', key: `${kind}:${row.id.slice(8)}/${name}` });
      }
    }
  }
  return found;
}

/** The page: pick an index, query it, read the hits and facets. */
export async function renderSearch(db, rest, params) {
  const alive = startPage(`Search · ${db}`, 'dbs');
  const indexes = await searchIndexes(db);
  if (!alive()) return;
  const root = clear(main());
  root.append(...databaseHeader(db, 'search'), h('div', { class: 'page-head' },
    h('div', {}, h('h1', { text: 'Search' }),
      h('p', { class: 'muted', text: 'Full-text queries on the search indexes of the design documents (Nouveau and Clouseau APIs).' }))));
  if (!indexes.length) {
    root.append(h('div', { class: 'card empty' },
      h('p', { text: 'No design document of this database defines a search index.' }),
      h('p', { class: 'hint', text: 'Add a "nouveau" member (Nouveau’s API) or an "indexes" member (Clouseau’s _search API) to a design document, or create a nouveau index on the Mango page.' })));
    return;
  }

  const form = searchForm(indexes, params.get('index'));
  const hitsSection = h('section', { class: 'card search-hits', 'aria-labelledby': 'search-hits-heading' },
    h('h2', { id: 'search-hits-heading', text: 'Hits' }),
    h('p', { class: 'muted', text: 'Search to see the matching documents.' }));
  const facetSection = h('aside', { class: 'card search-facets', 'aria-labelledby': 'search-facets-heading' },
    h('h2', { id: 'search-facets-heading', text: 'Facets' }),
    h('p', { class: 'muted', text: 'Name string fields under “Count facets” to see their values here.' }));
  root.append(form.el, h('div', { class: 'search-grid' }, hitsSection, facetSection));

  const paging = bookmarkPaging('Pages of hits', (bookmark, direction) => run({ bookmark, direction }));
  /** The search the pages belong to: paging reuses it, whatever the form holds since. */
  let current = null;

  /** Queries the chosen index (a page of it with `bookmark`). */
  async function run({ bookmark, direction } = {}) {
    let request;
    if (direction) {
      request = { ...current, body: { ...current.body } };
      if (bookmark) request.body.bookmark = bookmark;
    } else {
      request = form.read();
      if (!request) return;
      current = request;
      paging.reset();
    }
    form.busy(true);
    try {
      const answer = await api('POST', request.path, { json: request.body });
      if (!alive()) return;
      drawHits(db, hitsSection, request, answer, paging);
      drawFacets(facetSection, request, answer, form);
      if (direction) hitsSection.querySelector('h2').focus();
    } catch (err) {
      if (!alive()) return;
      if (direction) {
        paging.undo(direction, bookmark);
        announce(describeError(err), 'error');
        return;
      }
      if (await sessionEnded(err)) return;
      clear(hitsSection).append(h('h2', { id: 'search-hits-heading', tabindex: '-1', text: 'Hits' }),
        h('div', { class: 'callout callout-error', role: 'alert' }, h('p', { text: `The search failed. ${describeError(err)}` })));
      clear(facetSection).append(h('h2', { id: 'search-facets-heading', text: 'Facets' }));
    } finally {
      form.busy(false);
    }
  }
  form.onRun(() => run());
}

/** The query form; its options follow the API of the chosen index. */
function searchForm(indexes, preselect) {
  const ids = {
    index: uid('s-index'), q: uid('s-q'), limit: uid('s-limit'), sort: uid('s-sort'), counts: uid('s-counts'),
    docs: uid('s-docs'), update: uid('s-update'), hl: uid('s-hl'), hlNumber: uid('s-hl-n'), hlSize: uid('s-hl-size'),
  };
  const groups = [['nouveau', 'Nouveau (_nouveau)'], ['search', 'Clouseau (_search)']];
  const select = h('select', { id: ids.index, name: 'index' }, groups.map(([kind, label]) => {
    const list = indexes.filter((i) => i.kind === kind);
    return list.length ? h('optgroup', { label }, list.map((i) => h('option', {
      value: i.key, selected: i.key === preselect ? true : null, text: `${i.ddoc.slice(8)} / ${i.name}${i.mango ? ' (Mango)' : ''}`,
    }))) : null;
  }));
  const source = h('pre', { class: 'code small search-source' });
  const q = h('input', { id: ids.q, name: 'q', type: 'search', value: '*:*', required: true, spellcheck: 'false', autocomplete: 'off' });
  const limit = h('input', { id: ids.limit, name: 'limit', type: 'number', min: '1', max: '200', value: String(DEFAULT_LIMIT) });
  const sort = h('input', { id: ids.sort, name: 'sort', type: 'text', spellcheck: 'false', autocomplete: 'off', placeholder: 'by relevance' });
  const counts = h('input', { id: ids.counts, name: 'counts', type: 'text', spellcheck: 'false', autocomplete: 'off', placeholder: 'category, author' });
  const includeDocs = h('input', { id: ids.docs, type: 'checkbox' });
  const update = h('input', { id: ids.update, type: 'checkbox', checked: true });
  const hlFields = h('input', { id: ids.hl, name: 'highlight', type: 'text', spellcheck: 'false', autocomplete: 'off', placeholder: 'default' });
  const hlNumber = h('input', { id: ids.hlNumber, type: 'number', min: '1', max: '20', placeholder: '1' });
  const hlSize = h('input', { id: ids.hlSize, type: 'number', min: '10', max: '1000', placeholder: '100' });
  const ranges = jsonField({
    label: 'Ranges (optional)', rows: 2, optional: true, check: mustBe.object,
    hint: 'Counts per range of a double field: {"year": [{"label": "old", "max": 1970}, {"label": "new", "min": 1970}]}',
  });
  const drilldowns = [];
  const drillList = h('ul', { class: 'search-drilldowns', 'aria-label': 'Drill-downs' });
  const button = h('button', { type: 'submit', class: 'btn btn-primary', text: 'Search' });
  const error = errorArea();
  const nouveauOnly = h('div', { class: 'search-options' },
    ranges.el,
    h('div', { class: 'check' }, update, h('label', { for: ids.update, text: 'Bring the index up to date first (update)' })));
  const clouseauOnly = h('div', { class: 'search-options search-highlight' },
    h('div', { class: 'field' }, h('label', { for: ids.hl, text: 'Highlight fields' }), hlFields),
    h('div', { class: 'field' }, h('label', { for: ids.hlNumber, text: 'Fragments per field' }), hlNumber),
    h('div', { class: 'field' }, h('label', { for: ids.hlSize, text: 'Fragment size' }), hlSize),
    drillList);
  const form = h('form', { class: 'card search-form', role: 'search', 'aria-label': 'Search an index', novalidate: true },
    h('div', { class: 'search-form-grid' },
      h('div', { class: 'field' }, h('label', { for: ids.index, text: 'Index' }), select,
        h('details', { class: 'search-def' }, h('summary', { text: 'Index function' }), source)),
      h('div', { class: 'field search-q' }, h('label', { for: ids.q, text: 'Query' }),
        h('p', { class: 'hint', text: 'Lucene syntax: title:tower AND year:[1950 TO 1990], wiz*, "a phrase", *:* for all.' }), q)),
    h('div', { class: 'search-form-row' },
      h('div', { class: 'field' }, h('label', { for: ids.limit, text: 'Limit' }), limit),
      h('div', { class: 'field' }, h('label', { for: ids.sort, text: 'Sort (optional)' }), sort),
      h('div', { class: 'field' }, h('label', { for: ids.counts, text: 'Count facets' }), counts),
      h('div', { class: 'check' }, includeDocs, h('label', { for: ids.docs, text: 'Include documents' }))),
    nouveauOnly, clouseauOnly,
    error.el,
    h('div', { class: 'editor-actions' }, button));

  const chosen = () => indexes.find((i) => i.key === select.value) || indexes[0];
  /** Shows the options of the chosen index's API and its function. */
  function sync() {
    const index = chosen();
    nouveauOnly.hidden = index.kind !== 'nouveau';
    clouseauOnly.hidden = index.kind !== 'search';
    const def = index.def && typeof index.def === 'object' ? index.def.index : index.def;
    setText(source, typeof def === 'string' ? def : JSON.stringify(def, null, 2));
    sort.value = '';
    sort.placeholder = index.kind === 'nouveau' ? 'by relevance, or -year, title' : 'by relevance, or -year<number>';
  }
  select.addEventListener('change', () => {
    drilldowns.length = 0;
    drawDrilldowns();
    sync();
  });
  sync();

  function drawDrilldowns() {
    clear(drillList).append(...drilldowns.map(([field, value], i) => h('li', { class: 'tag search-drill' },
      `${field}: ${value}`,
      h('button', {
        type: 'button', class: 'btn-link', 'aria-label': `Remove the drill-down ${field}: ${value}`, text: '×',
        onclick: () => {
          drilldowns.splice(i, 1);
          drawDrilldowns();
          onRun();
          q.focus();
        },
      }))));
    if (drilldowns.length) drillList.prepend(h('li', { class: 'label', text: 'Drilled down by' }));
  }

  let onRun = () => {};
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    onRun();
  });

  /** The request for the chosen index: `{path, body, kind}`, or null with the errors shown. */
  function read() {
    error.clear();
    const index = chosen();
    const n = Number(limit.value);
    if (!q.value.trim()) {
      error.show(new Error('Type a query (*:* finds every document).'));
      q.focus();
      return null;
    }
    if (!Number.isInteger(n) || n < 1) {
      error.show(new Error('Limit: a whole number of at least 1.'));
      limit.focus();
      return null;
    }
    const body = { q: q.value.trim(), limit: n, include_docs: includeDocs.checked };
    const countList = splitList(counts.value);
    if (countList.length) body.counts = countList;
    const sortText = sort.value.trim();
    if (sortText) body.sort = sortValue(sortText);
    const name = encodeURIComponent(index.name);
    if (index.kind === 'nouveau') {
      const r = ranges.read();
      if (r.error) {
        ranges.textarea.focus();
        return null;
      }
      if (r.value) body.ranges = r.value;
      if (!update.checked) body.update = false;
      return { kind: 'nouveau', body, path: `${docPath(index.db, index.ddoc)}/_nouveau/${name}` };
    }
    const hl = splitList(hlFields.value);
    if (hl.length) {
      body.highlight_fields = hl;
      body.highlight_pre_tag = MARK_START;
      body.highlight_post_tag = MARK_END;
      if (hlNumber.value) body.highlight_number = Number(hlNumber.value);
      if (hlSize.value) body.highlight_size = Number(hlSize.value);
    }
    if (drilldowns.length) body.drilldown = drilldowns.map((d) => [...d]);
    return { kind: 'search', body, path: `${docPath(index.db, index.ddoc)}/_search/${name}` };
  }

  return {
    el: form,
    read,
    onRun: (fn) => {
      onRun = fn;
    },
    busy: (on) => {
      button.disabled = on;
      setText(button, on ? 'Searching…' : 'Search');
    },
    /**
     * A facet value chosen: Clouseau's drilldown, or for Nouveau (which has
     * none) the query narrowed to that term; then the search runs again.
     */
    drillDown(kind, field, value) {
      if (kind === 'search') {
        if (!drilldowns.some(([f, v]) => f === field && v === value)) drilldowns.push([field, value]);
        drawDrilldowns();
      } else {
        q.value = `(${q.value.trim()}) AND ${field}:"${value.replace(/(["\\])/g, '\\$1')}"`;
      }
      onRun();
    },
  };
}

/** The sort typed: JSON when it is JSON (["-year", "title"]), else a list of fields or one field. */
function sortValue(text) {
  try {
    return JSON.parse(text);
  } catch {
    const list = splitList(text);
    return list.length === 1 ? list[0] : list;
  }
}

/** A hit's `order` as text: scores rounded, Nouveau's typed values unwrapped. */
function orderText(order) {
  if (!Array.isArray(order)) return '';
  return order.map((o) => {
    const v = o && typeof o === 'object' && 'value' in o ? o.value : o;
    return typeof v === 'number' && !Number.isInteger(v) ? v.toFixed(4) : cellText(v);
  }).join(' · ');
}

/** A highlighted fragment as text with <mark> elements, split on the tags asked for (never parsed as HTML). */
export function highlighted(fragment) {
  const out = [];
  const pieces = String(fragment).split(MARK_START);
  out.push(pieces[0]);
  for (const piece of pieces.slice(1)) {
    const end = piece.indexOf(MARK_END);
    if (end < 0) {
      out.push(h('mark', { text: piece }));
    } else {
      out.push(h('mark', { text: piece.slice(0, end) }), piece.slice(end + 1).split(MARK_END).join(''));
    }
  }
  return out;
}

/** The hits: id, score or order, stored fields, highlights, documents; then the pager. */
function drawHits(db, section, request, answer, paging) {
  const nouveau = request.kind === 'nouveau';
  const hits = (nouveau ? answer.hits : answer.rows) || [];
  const total = nouveau ? answer.total_hits : answer.total_rows;
  const more = hits.length > 0 && hits.length >= request.body.limit;
  paging.render(more ? answer.bookmark : null, hits.length);
  const list = h('ol', { class: 'search-hit-list' }, hits.map((hit) => {
    const highlights = Object.entries(hit.highlights || {});
    // A highlighted field is shown once, with its highlights.
    const fields = Object.entries(hit.fields || {}).filter(([k]) => !(hit.highlights && k in hit.highlights));
    return h('li', { class: 'search-hit', dataset: { id: hit.id } },
      h('div', { class: 'search-hit-head' },
        h('a', { class: 'mono break', href: link.doc(db, hit.id), text: hit.id }),
        h('span', { class: 'muted small', title: nouveau ? 'Sort values (score first when sorted by relevance)' : 'Score and position', text: orderText(hit.order) })),
      highlights.length ? h('div', { class: 'search-highlights' }, highlights.map(([field, fragments]) => h('p', {},
        h('span', { class: 'search-field', text: field }),
        fragments.map((f, i) => [i ? h('span', { class: 'muted', text: ' … ' }) : null, ...highlighted(f)])))) : null,
      fields.length ? h('dl', { class: 'search-fields' }, fields.map(([k, v]) => [
        h('dt', { text: k }), h('dd', { class: typeof v === 'string' ? null : 'mono', text: cellText(v) })])) : null,
      hit.doc ? h('details', {}, h('summary', { text: 'Document' }), h('pre', { class: 'code small', text: JSON.stringify(hit.doc, null, 2) })) : null);
  }));
  clear(section).append(
    h('div', { class: 'section-head' },
      h('h2', { id: 'search-hits-heading', tabindex: '-1' }, 'Hits ',
        h('span', { class: 'count', text: `(${fmtNumber(total)} in all${answer.total_hits_relation && answer.total_hits_relation !== 'EQUAL_TO' ? ' or more' : ''})` }))),
    hits.length ? list : h('p', { class: 'empty', text: 'No document matches.' }),
    paging.nav);
}

/** Facet counts as buttons that drill down, and range counts. */
function drawFacets(section, request, answer, form) {
  clear(section).append(h('h2', { id: 'search-facets-heading', text: 'Facets' }));
  const counts = Object.entries(answer.counts || {});
  const ranges = Object.entries(answer.ranges || {});
  if (!counts.length && !ranges.length) {
    section.append(h('p', { class: 'muted', text: 'Name string fields under “Count facets” to see their values here.' }));
    return;
  }
  for (const [field, values] of counts) {
    const entries = Object.entries(values || {}).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    section.append(h('h3', { text: field }), entries.length
      ? h('ul', { class: 'search-facet-list', dataset: { field } }, entries.map(([value, n]) => h('li', {},
        h('button', {
          type: 'button', class: 'search-facet', dataset: { value },
          'aria-label': `${value}: ${fmtNumber(n)} hit${n === 1 ? '' : 's'}; drill down`,
          onclick: () => form.drillDown(request.kind, field, value),
        }, h('span', { class: 'search-facet-value', text: value }), h('span', { class: 'search-facet-count', text: fmtNumber(n) })))))
      : h('p', { class: 'muted small', text: 'No values (is it a faceted string field?).' }));
  }
  for (const [field, values] of ranges) {
    section.append(h('h3', { text: `${field} (ranges)` }), h('ul', { class: 'search-facet-list', dataset: { field } },
      Object.entries(values || {}).map(([label, n]) => h('li', { class: 'search-range' },
        h('span', { class: 'search-facet-value', text: label }), h('span', { class: 'search-facet-count', text: fmtNumber(n) })))));
  }
}
