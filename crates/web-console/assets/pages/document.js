// #/db/NAME/doc/ID and #/db/NAME/new: a document in the JSON editor, its
// attachments and its revision tree with conflicts to resolve.

import { ApiError, api, describeError } from '../lib/api.js';
import { clear, fmtBytes, h, setText, uid } from '../lib/dom.js';
import { deletionsKeeping, writeDeletions } from '../lib/conflicts.js';
import { jsonEditor } from '../lib/json-editor.js';
import { attPath, dbPath, docPath, link } from '../lib/paths.js';
import { announce, handlePageError, main, navigate, route, startPage } from '../lib/shell.js';
import { breadcrumbs, confirmDialog } from '../lib/widgets.js';

// --------------------------------------------------------------- document

export async function renderNewDocument(db) {
  const alive = startPage(`New document in ${db}`, 'dbs');
  await api('GET', dbPath(db));
  if (!alive()) return;
  const root = clear(main());
  root.append(breadcrumbs([['Databases', link.dbs()], [db, link.db(db)], ['New document', null]]));
  root.append(h('div', { class: 'page-head' }, h('div', {}, h('h1', { text: 'New document' }),
    h('p', { class: 'muted', text: `In ${db}. Leave out _id to let the server choose one.` }))));
  const id = typeof crypto !== 'undefined' && crypto.randomUUID ? crypto.randomUUID().replace(/-/g, '') : '';
  const editor = jsonEditor({
    initial: JSON.stringify(id ? { _id: id } : {}, null, 2),
    saveLabel: 'Create document',
    onSave: async (doc) => {
      const res = doc._id
        ? await api('PUT', docPath(db, doc._id), { json: doc })
        : await api('POST', dbPath(db), { json: doc });
      announce(`Document ${res.id} created.`);
      navigate(link.doc(db, res.id));
    },
  });
  root.append(h('section', { class: 'card', 'aria-labelledby': editor.headingId }, editor.el));
  editor.textarea.focus();
}

/** A JSON text area that validates as you type; `onSave(doc)` may throw. */

export async function renderDocument(db, id) {
  const alive = startPage(id, 'dbs');
  const base = docPath(db, id);
  const [doc, leaves] = await Promise.all([
    api('GET', base, { params: { conflicts: 'true', deleted_conflicts: 'true', revs_info: 'true' } }),
    api('GET', base, { params: { open_revs: 'all', revs: 'true' } }),
  ]);
  if (!alive()) return;
  const rev = doc._rev;
  const conflicts = doc._conflicts || [];

  const root = clear(main());
  root.append(breadcrumbs([['Databases', link.dbs()], [db, link.db(db)], [id, null]]));
  root.append(h('div', { class: 'page-head' },
    h('div', {}, h('h1', { class: 'mono break', text: id }),
      h('p', { class: 'muted' }, 'Current revision ', h('span', { class: 'mono', text: rev })))));

  if (conflicts.length) {
    root.append(h('div', { class: 'callout callout-warn', role: 'note' },
      h('p', {}, h('strong', { text: `This document has ${conflicts.length} conflicting revision${conflicts.length > 1 ? 's' : ''}.` }),
        ' Compare them below and pick the one to keep. ',
        h('a', { href: '#conflicts', text: 'Resolve the conflict', onclick: (e) => { e.preventDefault(); const el = document.getElementById('conflicts'); if (el) { el.scrollIntoView({ block: 'start' }); el.focus(); } } }))));
  }

  // The editor: the body without the fields the server adds for reading.
  const body = { ...doc };
  delete body._conflicts;
  delete body._deleted_conflicts;
  delete body._revs_info;
  const deleteButton = h('button', { type: 'button', class: 'btn btn-danger-ghost', text: 'Delete document' });
  const reloadButton = h('button', { type: 'button', class: 'btn', text: 'Reload', onclick: () => route() });
  const editor = jsonEditor({
    initial: JSON.stringify(body, null, 2),
    saveLabel: 'Save changes',
    expectId: id,
    extraButtons: [reloadButton, deleteButton],
    onSave: async (edited) => {
      const res = await api('PUT', base, { json: { ...edited, _id: id } });
      announce(`Saved ${id}: revision ${res.rev}.`);
      route();
    },
  });
  deleteButton.addEventListener('click', async () => {
    const ok = await confirmDialog({
      title: `Delete document ${id}?`,
      body: [`Revision ${rev} gets a deleted successor; the document disappears from the database.`],
      confirmLabel: 'Delete document',
    });
    if (!ok) return;
    try {
      await api('DELETE', base, { params: { rev } });
      announce(`Document ${id} deleted.`);
      navigate(link.db(db));
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) return handlePageError(err);
      announce(describeError(err), 'error');
    }
  });

  root.append(h('div', { class: 'doc-grid' },
    h('section', { class: 'card', 'aria-labelledby': editor.headingId }, editor.el),
    attachmentsSection(db, id, doc)));
  root.append(revisionsSection(db, id, doc, leaves));
}

export function attachmentsSection(db, id, doc) {
  const atts = doc._attachments || {};
  const names = Object.keys(atts).sort();
  const headingId = uid('att-heading');
  const list = h('ul', { class: 'att-list' });
  for (const name of names) {
    const att = atts[name];
    list.append(h('li', { class: 'att', dataset: { name } },
      h('div', { class: 'att-main' },
        h('a', { href: attPath(db, id, name), class: 'att-name break', text: name, download: name.split('/').pop() }),
        h('span', { class: 'muted small', text: `${att.content_type || 'unknown type'} · ${fmtBytes(att.length)}` })),
      h('button', {
        type: 'button', class: 'btn btn-danger-ghost btn-small', text: 'Delete', 'aria-label': `Delete attachment ${name}`,
        onclick: async () => {
          const ok = await confirmDialog({ title: `Delete attachment ${name}?`, body: ['The document gets a new revision without it.'], confirmLabel: 'Delete attachment' });
          if (!ok) return;
          try {
            await api('DELETE', attPath(db, id, name), { params: { rev: doc._rev } });
            announce(`Attachment ${name} deleted.`);
            route();
          } catch (err) {
            if (err instanceof ApiError && err.status === 401) return handlePageError(err);
            announce(describeError(err), 'error');
          }
        },
      })));
  }
  const fileId = uid('file');
  const error = h('div', { class: 'form-error', role: 'alert' });
  const upload = h('button', { type: 'submit', class: 'btn', text: 'Upload' });
  const form = h('form', { class: 'upload' },
    h('div', { class: 'field' },
      h('label', { for: fileId, text: 'Add an attachment' }),
      h('input', { id: fileId, name: 'file', type: 'file' })),
    upload, error);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clear(error);
    const file = form.elements.file.files[0];
    if (!file) {
      error.append(h('p', { text: 'Choose a file first.' }));
      form.elements.file.focus();
      return;
    }
    upload.disabled = true;
    setText(upload, 'Uploading…');
    try {
      await api('PUT', attPath(db, id, file.name), {
        params: { rev: doc._rev },
        body: file,
        headers: { 'Content-Type': file.type || 'application/octet-stream' },
      });
      announce(`Attachment ${file.name} uploaded (${fmtBytes(file.size)}).`);
      route();
    } catch (err) {
      upload.disabled = false;
      setText(upload, 'Upload');
      if (err instanceof ApiError && err.status === 401) return handlePageError(err);
      error.append(h('p', { text: describeError(err) }));
    }
  });
  return h('section', { class: 'card', 'aria-labelledby': headingId },
    h('h2', { id: headingId, text: `Attachments (${names.length})` }),
    names.length ? list : h('p', { class: 'muted', text: 'No attachments.' }),
    form);
}

/** The revision tree drawn from open_revs=all with _revisions, and the conflict resolver. */
export function revisionsSection(db, id, doc, leafAnswers) {
  const winner = doc._rev;
  const leaves = leafAnswers.filter((x) => x.ok).map((x) => x.ok);
  const nodes = new Map();
  const revPos = (r) => Number.parseInt(r, 10);
  // Order branches: the winner first, then live leaves, then deleted ones.
  leaves.sort((a, b) => {
    const rank = (d) => (d._rev === winner ? 0 : d._deleted ? 2 : 1);
    return rank(a) - rank(b) || revPos(b._rev) - revPos(a._rev) || (a._rev < b._rev ? 1 : -1);
  });
  let row = 0;
  for (const leaf of leaves) {
    const revs = leaf._revisions
      ? leaf._revisions.ids.map((hash, i) => `${leaf._revisions.start - i}-${hash}`)
      : [leaf._rev];
    let child = null;
    let usedRow = false;
    for (const r of revs) {
      let node = nodes.get(r);
      const existed = Boolean(node);
      if (!node) {
        node = { rev: r, pos: revPos(r), row, children: new Set(), parent: null, leaf: null };
        nodes.set(r, node);
        usedRow = true;
      }
      if (child) {
        child.parent = r;
        node.children.add(child.rev);
      }
      if (existed) break;
      child = node;
    }
    nodes.get(leaf._rev).leaf = leaf;
    if (usedRow) row += 1;
  }
  const rows = Math.max(1, row);
  const minPos = Math.min(...[...nodes.values()].map((n) => n.pos));
  const maxPos = Math.max(...[...nodes.values()].map((n) => n.pos));
  const colW = 170;
  const rowH = 56;
  const padX = 24;
  const padY = 28;
  const width = padX * 2 + (maxPos - minPos) * colW + 130;
  const height = padY * 2 + (rows - 1) * rowH + 10;
  const x = (n) => padX + 8 + (n.pos - minPos) * colW;
  const y = (n) => padY + n.row * rowH;
  const liveLeaves = leaves.filter((l) => !l._deleted);
  const conflicted = liveLeaves.length > 1;

  const svg = h('svg', {
    class: 'revtree', viewBox: `0 0 ${width} ${height}`, width, height, role: 'img',
    'aria-label': `Revision tree: ${nodes.size} revisions, ${leaves.length} leaf revision${leaves.length === 1 ? '' : 's'}${conflicted ? `, ${liveLeaves.length - 1} in conflict` : ''}.`,
  });
  const edges = h('g', { class: 'edges' });
  const dots = h('g', { class: 'nodes' });
  for (const node of nodes.values()) {
    if (node.parent) {
      const parent = nodes.get(node.parent);
      const x1 = x(parent);
      const y1 = y(parent);
      const x2 = x(node);
      const y2 = y(node);
      const d = y1 === y2
        ? `M${x1} ${y1}H${x2}`
        : `M${x1} ${y1}C${x1 + colW * 0.5} ${y1} ${x2 - colW * 0.5} ${y2} ${x2} ${y2}`;
      edges.append(h('path', { d, class: 'edge' }));
    }
    let kind = 'inner';
    let label = 'ancestor';
    if (node.leaf) {
      if (node.rev === winner) {
        kind = 'winner';
        label = 'winner';
      } else if (node.leaf._deleted) {
        kind = 'deleted';
        label = 'deleted leaf';
      } else {
        kind = 'conflict';
        label = 'conflict';
      }
    }
    const [, hash = ''] = node.rev.split('-');
    dots.append(h('g', { class: `node node-${kind}`, dataset: { rev: node.rev } },
      h('title', { text: `${node.rev} (${label})` }),
      h('circle', { cx: x(node), cy: y(node), r: node.leaf ? 9 : 7 }),
      h('text', { x: x(node) + 15, y: y(node) - 6, class: 'rev-label' }, `${node.pos}-${hash.slice(0, 7)}`),
      node.leaf ? h('text', { x: x(node) + 15, y: y(node) + 13, class: `rev-kind rev-kind-${kind}` }, label) : null));
  }
  svg.append(edges, dots);

  const headingId = 'revisions-heading';
  const section = h('section', { class: 'card', 'aria-labelledby': headingId, id: 'revisions' },
    h('h2', { id: headingId, text: 'Revisions' }),
    h('p', { class: 'muted', text: `${nodes.size} known revision${nodes.size === 1 ? '' : 's'} (older ones may have been pruned), ${leaves.length} leaf revision${leaves.length === 1 ? '' : 's'}.` }),
    h('div', { class: 'revtree-scroll', tabindex: '0', 'aria-label': 'Revision tree (scrollable)' }, svg),
    h('ul', { class: 'legend', 'aria-label': 'Legend' },
      h('li', {}, h('span', { class: 'swatch swatch-winner' }), 'Winning revision'),
      h('li', {}, h('span', { class: 'swatch swatch-conflict' }), 'Conflicting leaf'),
      h('li', {}, h('span', { class: 'swatch swatch-deleted' }), 'Deleted leaf'),
      h('li', {}, h('span', { class: 'swatch swatch-inner' }), 'Ancestor')));

  // The leaves as a table (readable without the picture) and, with
  // conflicts, a form to keep one and delete the other live leaves.
  const resolver = h('form', { class: 'resolver', id: 'conflicts', tabindex: '-1' });
  const fieldset = h('fieldset', {},
    h('legend', { text: conflicted ? 'Pick the revision to keep' : 'Leaf revisions' }));
  const choiceName = uid('winner');
  for (const leaf of leaves) {
    const isWinner = leaf._rev === winner;
    const choiceId = uid('leaf');
    const preview = { ...leaf };
    delete preview._revisions;
    const kind = isWinner ? 'Winner' : leaf._deleted ? 'Deleted' : 'Conflict';
    fieldset.append(h('div', { class: `leaf leaf-${kind.toLowerCase()}`, dataset: { rev: leaf._rev } },
      h('div', { class: 'leaf-head' },
        conflicted && !leaf._deleted
          ? h('input', { type: 'radio', name: choiceName, id: choiceId, value: leaf._rev, checked: isWinner })
          : null,
        h(conflicted && !leaf._deleted ? 'label' : 'span', { for: conflicted && !leaf._deleted ? choiceId : null, class: 'leaf-rev mono', text: leaf._rev }),
        h('span', { class: `badge badge-${kind === 'Winner' ? 'ok' : kind === 'Conflict' ? 'warn' : 'muted'}`, text: kind })),
      h('details', { open: conflicted && leaves.length <= 3 && !leaf._deleted ? true : null },
        h('summary', { text: 'Content' }),
        h('pre', { class: 'code small', text: JSON.stringify(preview, null, 2) }))));
  }
  resolver.append(fieldset);
  if (conflicted) {
    const error = h('div', { class: 'form-error', role: 'alert' });
    const button = h('button', { type: 'submit', class: 'btn btn-primary', text: 'Keep selected revision' });
    resolver.append(h('p', { class: 'hint', text: 'The other live leaf revisions are deleted (as new deleted revisions), so the one you keep becomes the only winner.' }),
      h('div', { class: 'editor-actions' }, button), error);
    resolver.addEventListener('submit', async (event) => {
      event.preventDefault();
      clear(error);
      const chosen = resolver.elements[choiceName] && resolver.elements[choiceName].value;
      if (!chosen) {
        error.append(h('p', { text: 'Choose a revision to keep.' }));
        return;
      }
      const losers = liveLeaves.filter((l) => l._rev !== chosen);
      const ok = await confirmDialog({
        title: 'Resolve the conflict?',
        body: [`Keep ${chosen} and delete ${losers.length} other revision${losers.length > 1 ? 's' : ''}: ${losers.map((l) => l._rev).join(', ')}.`],
        confirmLabel: 'Keep and delete others',
        danger: false,
      });
      if (!ok) return;
      button.disabled = true;
      try {
        const refused = await writeDeletions(db, deletionsKeeping(id, liveLeaves.map((l) => l._rev), chosen));
        if (refused.length) {
          throw new Error(`Some revisions were not deleted: ${refused.map((r) => `${r.error} (${r.reason})`).join('; ')}`);
        }
        announce(`Conflict resolved: ${chosen} is the winner.`);
        route();
      } catch (err) {
        button.disabled = false;
        if (err instanceof ApiError && err.status === 401) return handlePageError(err);
        error.append(h('p', { text: describeError(err) }));
      }
    });
  }
  section.append(h('h3', { text: conflicted ? 'Conflicts' : 'Leaf revisions' }), resolver);
  return section;
}
