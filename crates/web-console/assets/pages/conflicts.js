// #/db/NAME/conflicts: every document with conflicts in a database, found by
// a scan of its changes with progress, and resolved in bulk: by a rule (the
// winning revision, or the greatest value of a field) or by a revision
// picked per document.

import { ApiError, api, describeError } from '../lib/api.js';
import { deletionsKeeping, fieldValue, keptByRule, writeDeletions } from '../lib/conflicts.js';
import { append, clear, fmtNumber, h, setText, uid } from '../lib/dom.js';
import { dbPath, link } from '../lib/paths.js';
import { announce, handlePageError, main, onCleanup, startPage } from '../lib/shell.js';
import { confirmDialog, databaseHeader } from '../lib/widgets.js';

/** Changes read per request of the scan. */
const SCAN_PAGE = 500;
/** Documents whose leaves are read per `_bulk_get`. */
const LEAVES_PAGE = 100;

export async function renderConflicts(db) {
  const alive = startPage(`Conflicts · ${db}`, 'dbs');
  const info = await api('GET', dbPath(db));
  if (!alive()) return;

  const root = clear(main());
  root.append(...databaseHeader(db, 'conflicts'));
  root.append(h('div', { class: 'page-head' },
    h('div', {}, h('h1', { text: 'Conflicts' }),
      h('p', { class: 'muted', text: `Every document of ${db} with conflicting revisions, and their resolution in bulk.` }))));

  const state = { found: [], scanning: false, stop: false };
  onCleanup(() => { state.stop = true; });

  // The scan: progress and its controls.
  const bar = h('span', { class: 'progress-bar' });
  const progress = h('div', {
    class: 'progress', role: 'progressbar', 'aria-label': 'Scan progress', 'aria-valuemin': '0', 'aria-valuemax': '100', 'aria-valuenow': '0',
  }, bar);
  const scanText = h('p', { class: 'scan-text', 'aria-live': 'polite' });
  const scanButton = h('button', { type: 'button', class: 'btn', text: 'Stop scan' });
  root.append(h('section', { class: 'card conflict-scan', 'aria-label': 'Scan' }, scanText, progress,
    h('div', { class: 'editor-actions' }, scanButton)));

  // The resolver: a rule for every selected document without a pick.
  const ruleName = uid('rule');
  const fieldId = uid('rule-field');
  const fieldInput = h('input', { id: fieldId, name: 'field', type: 'text', value: 'updated_at', autocomplete: 'off', spellcheck: 'false' });
  const resolveButton = h('button', { type: 'submit', class: 'btn btn-primary', text: 'Resolve selected documents' });
  const resolveError = h('div', { class: 'form-error resolve-outcome', role: 'alert' });
  const ruleChoice = (value, label, hint, checked) => {
    const id = uid('rule-choice');
    return h('div', { class: 'choice' },
      h('input', { id, type: 'radio', name: ruleName, value, checked }),
      h('label', { for: id }, h('strong', { text: label }), h('span', { class: 'muted', text: ` ${hint}` })));
  };
  const resolver = h('form', { class: 'card conflict-resolver', 'aria-label': 'Resolve conflicts' },
    h('h2', { text: 'Resolve' }),
    h('fieldset', {},
      h('legend', { text: 'Keep, in each selected document without a revision picked below' }),
      ruleChoice('winner', 'The winning revision', '(the one CouchDB shows: the longest edit history)', true),
      ruleChoice('field', 'The latest by a field', '(the greatest value: an ISO date, a timestamp or a number; the winner where no revision has it)', false),
      h('div', { class: 'field field-inline' }, h('label', { for: fieldId, text: 'Field (a dotted path)' }), fieldInput)),
    h('p', { class: 'hint', text: 'The revision kept stays as it is; every other live revision of its document is deleted (a new deleted revision each), so the one kept becomes the only winner. Replicas learn it as any other change.' }),
    h('div', { class: 'editor-actions' }, resolveButton));
  resolver.hidden = true;
  // Outside the form, which hides once nothing is left to resolve.
  root.append(resolver, resolveError);

  // The documents found.
  const selectAll = h('input', { type: 'checkbox', 'aria-label': 'Select every document' });
  const tbody = h('tbody');
  const table = h('table', { class: 'table conflicts-table' },
    h('caption', { class: 'sr-only', text: `Documents of ${db} with conflicts` }),
    h('thead', {}, h('tr', {},
      h('th', { scope: 'col', class: 'select' }, selectAll),
      h('th', { scope: 'col', text: 'Document' }),
      h('th', { scope: 'col', text: 'Winning revision' }),
      h('th', { scope: 'col', class: 'num', text: 'Conflicts' }),
      h('th', { scope: 'col', text: 'Keep' }))),
    tbody);
  const tableCard = h('div', { class: 'card table-card' }, h('div', { class: 'table-scroll' }, table));
  const empty = h('div', { class: 'card empty' }, h('p', { text: 'No document in conflict found yet.' }));
  root.append(empty, tableCard);
  tableCard.hidden = true;

  const selected = () => state.found.filter((entry) => entry.checkbox.checked);
  const refreshSelection = () => {
    const n = selected().length;
    setText(resolveButton, n ? `Resolve ${fmtNumber(n)} selected document${n > 1 ? 's' : ''}` : 'Resolve selected documents');
    resolveButton.disabled = n === 0 || state.scanning;
    selectAll.checked = n > 0 && n === state.found.length;
    selectAll.indeterminate = n > 0 && n < state.found.length;
  };
  selectAll.addEventListener('change', () => {
    for (const entry of state.found) entry.checkbox.checked = selectAll.checked;
    refreshSelection();
  });

  /** Adds a row for a conflicted document (its winner and conflicts). */
  const addRow = (doc) => {
    const entry = { id: doc._id, winner: doc._rev, conflicts: doc._conflicts, leaves: null, pick: null };
    entry.checkbox = h('input', { type: 'checkbox', checked: true, 'aria-label': `Select ${doc._id}` });
    entry.checkbox.addEventListener('change', refreshSelection);
    entry.row = h('tr', { dataset: { id: doc._id } },
      h('td', { class: 'select' }, entry.checkbox),
      h('th', { scope: 'row' }, h('a', { href: link.doc(db, doc._id), class: 'mono break', text: doc._id })),
      h('td', { class: 'mono muted', text: doc._rev }),
      h('td', { class: 'num', text: fmtNumber(doc._conflicts.length) }),
      h('td', {}, pickCell(entry)));
    state.found.push(entry);
    tbody.append(entry.row);
  };

  /** "By the rule" or one revision, chosen from the leaves read on opening. */
  const pickCell = (entry) => {
    const body = h('div', { class: 'leaf-picks' }, h('p', { class: 'muted', text: 'Loading the revisions…' }));
    const details = h('details', {}, h('summary', { text: 'By the rule' }), body);
    const summary = details.querySelector('summary');
    details.addEventListener('toggle', async () => {
      if (!details.open || entry.leaves) return;
      try {
        await loadLeaves(db, [entry]);
      } catch (err) {
        clear(body).append(h('p', { class: 'form-error', role: 'alert', text: describeError(err) }));
        return;
      }
      const name = uid('pick');
      const option = (value, label, extra) => {
        const id = uid('pick-choice');
        const input = h('input', { id, type: 'radio', name, value, checked: (entry.pick || '') === value });
        input.addEventListener('change', () => {
          entry.pick = value || null;
          setText(summary, value ? `Revision ${value}` : 'By the rule');
          entry.checkbox.checked = true;
          refreshSelection();
        });
        return h('div', { class: 'choice' }, input, h('label', { for: id }, label, extra));
      };
      const differing = differingFields(entry.leaves);
      append(clear(body), [option('', h('span', { text: 'By the rule above' })),
        entry.leaves.map((leaf, i) => option(leaf._rev,
          h('span', { class: 'mono', text: `${leaf._rev}${i === 0 ? ' (winner)' : ''}` }),
          h('span', { class: 'leaf-diff muted' }, differing.length
            ? differing.map((field) => ` ${field}: ${preview(fieldValue(leaf, field))}`).join(';')
            : ' same content')))]);
    });
    return details;
  };

  /** Reads every page of changes, keeping the documents with live conflicts. */
  const scan = async () => {
    state.scanning = true;
    state.stop = false;
    state.found = [];
    clear(tbody);
    tableCard.hidden = true;
    empty.hidden = false;
    resolver.hidden = true;
    setText(scanButton, 'Stop scan');
    let since = 0;
    let scanned = 0;
    let total = info.doc_count + info.doc_del_count;
    try {
      for (;;) {
        const page = await api('GET', `${dbPath(db)}/_changes`, { params: { style: 'all_docs', since, limit: SCAN_PAGE } });
        if (!alive() || state.stop) break;
        // Several leaves may all be deleted but one: the documents themselves say.
        const candidates = page.results.filter((row) => row.changes.length > 1).map((row) => row.id);
        if (candidates.length) {
          const docs = await api('POST', `${dbPath(db)}/_all_docs`, {
            params: { include_docs: 'true', conflicts: 'true' }, json: { keys: candidates },
          });
          if (!alive() || state.stop) break;
          for (const row of docs.rows) {
            if (row.doc && row.doc._conflicts && row.doc._conflicts.length) addRow(row.doc);
          }
        }
        scanned += page.results.length;
        if (typeof page.pending === 'number') total = scanned + page.pending;
        showProgress(scanned, total, false);
        since = page.last_seq;
        if (page.results.length < SCAN_PAGE || page.pending === 0) break;
      }
    } catch (err) {
      state.scanning = false;
      if (err instanceof ApiError && err.status === 401) return handlePageError(err);
      setText(scanText, `The scan stopped: ${describeError(err)}`);
      setText(scanButton, 'Scan again');
      return;
    }
    state.scanning = false;
    if (!alive()) return;
    showProgress(scanned, total, true, state.stop);
    setText(scanButton, 'Scan again');
    refreshSelection();
  };

  const showProgress = (scanned, total, done, stopped = false) => {
    const pct = total > 0 ? Math.min(100, Math.round((scanned / total) * 100)) : 100;
    bar.style.width = `${done && !stopped ? 100 : pct}%`;
    progress.setAttribute('aria-valuenow', String(done && !stopped ? 100 : pct));
    const n = state.found.length;
    const found = `${fmtNumber(n)} document${n === 1 ? '' : 's'} in conflict`;
    setText(scanText, done
      ? `${stopped ? 'Scan stopped' : 'Scan complete'}: ${fmtNumber(scanned)} document${scanned === 1 ? '' : 's'} read, ${found}.`
      : `Scanning… ${fmtNumber(scanned)} of ${fmtNumber(total)} documents read, ${found}.`);
    tableCard.hidden = n === 0;
    empty.hidden = n > 0;
    resolver.hidden = n === 0;
    if (done && n === 0 && !stopped) setText(empty.firstChild, `No document of ${db} has conflicts.`);
  };

  scanButton.addEventListener('click', () => {
    if (state.scanning) {
      state.stop = true;
    } else {
      scan();
    }
  });

  resolver.addEventListener('submit', async (event) => {
    event.preventDefault();
    clear(resolveError);
    const entries = selected();
    const rule = resolver.elements[ruleName].value;
    const field = fieldInput.value.trim();
    if (!entries.length) return;
    if (rule === 'field' && !field) {
      resolveError.append(h('p', { text: 'Name the field whose greatest value is kept.' }));
      fieldInput.focus();
      return;
    }
    resolveButton.disabled = true;
    try {
      // A document edited since the scan is left alone: the plan was made
      // for leaves it no longer has (deleting them could delete it whole).
      const live = await liveLeafRevs(db, entries.map((entry) => entry.id));
      if (!alive()) return;
      const stale = entries.filter((entry) => !sameRevs(live.get(entry.id), [entry.winner, ...entry.conflicts]));
      if (stale.length) {
        resolveError.append(h('p', { text: `${fmtNumber(stale.length)} selected document${stale.length === 1 ? ' has' : 's have'} changed since the scan and ${stale.length === 1 ? 'is' : 'are'} left as ${stale.length === 1 ? 'it is' : 'they are'}: scan again to see ${stale.length === 1 ? 'it' : 'them'} as ${stale.length === 1 ? 'it is' : 'they are'} now.` }),
          h('ul', {}, stale.slice(0, 20).map((entry) => h('li', { class: 'mono', text: entry.id }))));
        for (const entry of stale) entry.checkbox.checked = false;
      }
      const fresh = entries.filter((entry) => !stale.includes(entry));
      if (!fresh.length) {
        refreshSelection();
        return;
      }
      // The field rule compares the revisions' contents: read them first.
      const unread = fresh.filter((entry) => !entry.leaves && !entry.pick && rule === 'field');
      for (let i = 0; i < unread.length; i += LEAVES_PAGE) {
        await loadLeaves(db, unread.slice(i, i + LEAVES_PAGE));
        if (!alive()) return;
      }
      const plans = fresh.map((entry) => ({
        entry,
        keep: entry.pick || (rule === 'field' ? keptByRule(entry.leaves, 'field', field) : entry.winner),
      }));
      const deletions = plans.flatMap(({ entry, keep }) => deletionsKeeping(entry.id, [entry.winner, ...entry.conflicts], keep));
      const changed = plans.filter(({ entry, keep }) => keep !== entry.winner).length;
      const ok = await confirmDialog({
        title: `Resolve ${fmtNumber(fresh.length)} document${fresh.length > 1 ? 's' : ''}?`,
        body: [`This deletes ${fmtNumber(deletions.length)} revision${deletions.length === 1 ? '' : 's'}; ${fmtNumber(changed)} document${changed === 1 ? '' : 's'} will show a revision other than today's winner.`],
        confirmLabel: 'Resolve',
        danger: false,
      });
      if (!ok || !alive()) {
        resolveButton.disabled = false;
        return;
      }
      const refused = await writeDeletions(db, deletions, (done, all) => setText(resolveButton, `Resolving… ${fmtNumber(done)} of ${fmtNumber(all)}`));
      if (!alive()) return;
      const failedIds = new Set(refused.map((r) => r.id));
      const resolved = fresh.length - failedIds.size;
      announce(`${fmtNumber(resolved)} document${resolved === 1 ? '' : 's'} resolved.`, refused.length ? 'error' : 'ok');
      await scan();
      if (refused.length) {
        resolveError.append(h('p', { text: `${fmtNumber(failedIds.size)} document${failedIds.size === 1 ? ' was' : 's were'} not resolved:` }),
          h('ul', {}, refused.slice(0, 20).map((r) => h('li', {}, h('span', { class: 'mono', text: r.id }), `: ${r.error} (${r.reason})`))));
      }
    } catch (err) {
      resolveButton.disabled = false;
      if (err instanceof ApiError && err.status === 401) return handlePageError(err);
      resolveError.append(h('p', { text: describeError(err) }));
    }
  });

  await scan();
}

/**
 * Reads the live leaves of documents (`entry.leaves`, the winner first) with
 * one `_bulk_get` per batch.
 */
async function loadLeaves(db, entries) {
  const docs = entries.flatMap((entry) => [entry.winner, ...entry.conflicts].map((rev) => ({ id: entry.id, rev })));
  const answer = await api('POST', `${dbPath(db)}/_bulk_get`, { json: { docs } });
  const byId = new Map(entries.map((entry) => [entry.id, []]));
  for (const result of answer.results) {
    for (const item of result.docs) {
      if (item.ok && byId.has(result.id)) byId.get(result.id).push(item.ok);
    }
  }
  for (const entry of entries) {
    const leaves = byId.get(entry.id);
    const order = [entry.winner, ...entry.conflicts];
    leaves.sort((a, b) => order.indexOf(a._rev) - order.indexOf(b._rev));
    if (leaves.length !== order.length) {
      throw new Error(`Some revisions of ${entry.id} could not be read: it may have changed. Scan again.`);
    }
    entry.leaves = leaves;
  }
}

/** Each document's live leaf revisions now (the winner first), by id. */
async function liveLeafRevs(db, ids) {
  const live = new Map();
  for (let i = 0; i < ids.length; i += LEAVES_PAGE) {
    const answer = await api('POST', `${dbPath(db)}/_all_docs`, {
      params: { include_docs: 'true', conflicts: 'true' }, json: { keys: ids.slice(i, i + LEAVES_PAGE) },
    });
    for (const row of answer.rows) {
      if (row.doc) live.set(row.id, [row.doc._rev, ...(row.doc._conflicts || [])]);
    }
  }
  return live;
}

/** Whether two lists hold the same revisions. */
function sameRevs(a, b) {
  return Boolean(a) && a.length === b.length && a.every((rev) => b.includes(rev));
}

/** The top-level fields whose values differ between the leaves. */
function differingFields(leaves) {
  const keys = new Set();
  for (const leaf of leaves) for (const key of Object.keys(leaf)) if (!key.startsWith('_')) keys.add(key);
  return [...keys].filter((key) => new Set(leaves.map((leaf) => JSON.stringify(leaf[key]))).size > 1).sort();
}

/** A short text of a value for the list of differences. */
function preview(value) {
  if (value === undefined) return '(none)';
  const text = JSON.stringify(value);
  return text.length > 60 ? `${text.slice(0, 57)}…` : text;
}
