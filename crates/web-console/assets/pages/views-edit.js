// #/db/NAME/views/edit/DDOC/VIEW and #/db/NAME/views/new?ddoc=DDOC: a view's
// map and reduce functions edited, renamed or deleted, or a new view in a
// new or existing design document. JavaScript cannot be compiled in the
// browser (the content security policy forbids eval), so the server checks
// it on save: a 400 compilation_error names the function and the view, and
// its reason is shown under that function with the user's text kept.

import { ApiError, api, describeError } from '../lib/api.js';
import { clear, h, setText, uid } from '../lib/dom.js';
import { announce, handlePageError, main, navigate, route, startPage } from '../lib/shell.js';
import { confirmDialog, databaseHeader } from '../lib/widgets.js';
import {
  BUILTIN_REDUCES, ddocName, ddocPath, isJavaScript, loadDesignDocs, viewLink, viewsNav,
} from './views-common.js';
import { isDatabaseAdmin } from '../lib/rights.js';

const MAP_TEMPLATE = 'function (doc) {\n  emit(doc._id, 1);\n}';
const REDUCE_TEMPLATE = 'function (keys, values, rereduce) {\n  return sum(values);\n}';
/** The select's value for a reduce written in JavaScript. */
const CUSTOM = 'custom';
/** Fields a design document holds besides views; with none, deleting its last view deletes it. */
const BOOKKEEPING = new Set(['_id', '_rev', 'language', 'views']);

/** `target` is { ddoc, view } to edit a view, { ddoc } (maybe '') for a new one. */
export async function renderViewEditor(db, target) {
  const isNew = target.view === undefined;
  const alive = startPage(isNew ? `New view · ${db}` : `Edit ${target.view} · ${db}`, 'dbs');
  const [docs, admin] = await Promise.all([loadDesignDocs(db), isDatabaseAdmin(db)]);
  if (!alive()) return;
  const doc = docs.find((d) => ddocName(d) === target.ddoc);
  const def = !isNew && doc && doc.views ? doc.views[target.view] : null;

  const root = clear(main());
  root.append(...databaseHeader(db, 'views'));
  root.append(h('div', { class: 'page-head' },
    h('div', {}, h('h1', { text: isNew ? 'New view' : 'Edit view' }),
      isNew
        ? h('p', { class: 'muted', text: `A view in a new or existing design document of ${db}.` })
        : h('p', { class: 'muted mono break', text: `_design/${target.ddoc}/_view/${target.view}` }))));
  const content = h('div', { class: 'views-main' });
  root.append(h('div', { class: 'views-layout' }, viewsNav(db, docs, isNew ? null : target), content));

  const stop = (text, extra) => content.append(h('div', { class: 'callout callout-error', role: 'alert' }, h('p', { text }), extra || null));
  if (!admin) {
    stop('Only admins of this database may change its design documents.',
      isNew ? null : h('p', {}, h('a', { href: viewLink.run(db, target.ddoc, target.view), text: 'Run the view instead' })));
    return;
  }
  if (!isNew && (!def || !def.map)) {
    stop(doc ? `_design/${target.ddoc} has no view named ${target.view}.` : `There is no design document _design/${target.ddoc}.`);
    return;
  }
  if (doc && !isJavaScript(doc)) {
    stop(`_design/${target.ddoc} is written in ${doc.language}, not JavaScript: it is not edited here.`);
    return;
  }
  const editor = viewForm(db, docs, isNew ? { ddoc: target.ddoc } : { doc, view: target.view, def });
  content.append(h('section', { class: 'card', 'aria-labelledby': editor.headingId }, editor.el));
}

/** A code text area: Tab indents, Escape then Tab leaves it. */
function codeArea(id, value, describedBy) {
  const area = h('textarea', {
    id, class: 'code', spellcheck: 'false', autocomplete: 'off', autocapitalize: 'none', wrap: 'off',
    rows: Math.min(24, Math.max(6, value.split('\n').length + 2)), 'aria-describedby': describedBy,
  });
  area.value = value;
  area.addEventListener('keydown', (event) => {
    if (event.key === 'Tab' && !event.shiftKey && !event.ctrlKey && !event.altKey && !event.metaKey && !area.dataset.escaped) {
      event.preventDefault();
      area.setRangeText('  ', area.selectionStart, area.selectionEnd, 'end');
    } else if (event.key === 'Escape') {
      area.dataset.escaped = '1';
    } else {
      delete area.dataset.escaped;
    }
  });
  return area;
}

/**
 * The editor's form. `editing` is { doc, view, def } for an existing view,
 * { ddoc } (the design document to preselect) for a new one.
 */
function viewForm(db, docs, editing) {
  const isNew = !editing.doc;
  const headingId = uid('view-editor');
  const ids = {};
  for (const name of ['ddoc', 'newDdoc', 'name', 'map', 'reduce', 'custom', 'hint']) ids[name] = uid(`view-edit-${name}`);
  const errorArea = (name) => h('div', { id: `${ids[name]}-error`, class: 'form-error field-error', role: 'alert' });
  const errors = { ddoc: errorArea('newDdoc'), name: errorArea('name'), map: errorArea('map'), reduce: errorArea('reduce'), form: h('div', { class: 'form-error', role: 'alert' }) };

  // The design document: fixed when editing; chosen or named when new.
  const jsDocs = docs.filter(isJavaScript);
  let ddocSelect = null;
  let newDdocInput = null;
  let ddocFields;
  if (isNew) {
    const preselect = jsDocs.some((d) => ddocName(d) === editing.ddoc) ? editing.ddoc : '';
    ddocSelect = h('select', { id: ids.ddoc, name: 'ddoc' },
      jsDocs.map((d) => h('option', { value: ddocName(d), selected: ddocName(d) === preselect, text: d._id })),
      h('option', { value: '', selected: !preselect, text: 'New design document…' }));
    newDdocInput = h('input', {
      id: ids.newDdoc, name: 'newDdoc', type: 'text', class: 'mono', autocomplete: 'off', spellcheck: 'false',
      'aria-describedby': `${ids.newDdoc}-error`,
    });
    const newField = h('div', { class: 'field' },
      h('label', { for: ids.newDdoc, text: 'New design document name (after _design/)' }), newDdocInput, errors.ddoc);
    const toggle = () => { newField.hidden = ddocSelect.value !== ''; };
    ddocSelect.addEventListener('change', toggle);
    toggle();
    ddocFields = [h('div', { class: 'field' }, h('label', { for: ids.ddoc, text: 'Design document' }), ddocSelect), newField];
  } else {
    ddocFields = [h('div', { class: 'field' },
      h('span', { class: 'label', text: 'Design document' }),
      h('span', { class: 'mono break', text: editing.doc._id }))];
  }

  const nameInput = h('input', {
    id: ids.name, name: 'name', type: 'text', class: 'mono', autocomplete: 'off', spellcheck: 'false', required: true,
    value: isNew ? '' : editing.view, 'aria-describedby': `${ids.name}-error`,
  });
  const mapArea = codeArea(ids.map, isNew ? MAP_TEMPLATE : String(editing.def.map), `${ids.hint} ${ids.map}-error`);
  const reduceNow = isNew ? '' : editing.def.reduce || '';
  const builtin = BUILTIN_REDUCES.includes(reduceNow);
  const reduceSelect = h('select', { id: ids.reduce, name: 'reduce', 'aria-describedby': `${ids.reduce}-error` },
    h('option', { value: '', selected: !reduceNow, text: 'None' }),
    BUILTIN_REDUCES.map((r) => h('option', { value: r, selected: r === reduceNow, text: r })),
    h('option', { value: CUSTOM, selected: Boolean(reduceNow) && !builtin, text: 'Custom JavaScript' }));
  const customArea = codeArea(ids.custom, reduceNow && !builtin ? String(reduceNow) : REDUCE_TEMPLATE, `${ids.hint} ${ids.reduce}-error`);
  const customField = h('div', { class: 'field' }, h('label', { for: ids.custom, text: 'Custom reduce function' }), customArea);
  const toggleCustom = () => { customField.hidden = reduceSelect.value !== CUSTOM; };
  reduceSelect.addEventListener('change', toggleCustom);
  toggleCustom();

  const save = h('button', { type: 'submit', class: 'btn btn-primary', text: isNew ? 'Create and run' : 'Save and run' });
  const cancel = h('a', { class: 'btn btn-ghost', href: isNew ? viewLink.list(db) : viewLink.run(db, ddocName(editing.doc), editing.view), text: 'Cancel' });
  const remove = isNew ? null : h('button', { type: 'button', class: 'btn btn-danger-ghost', text: 'Delete view' });
  const form = h('form', { class: 'view-editor', novalidate: true },
    h('h2', { id: headingId, text: isNew ? 'Define the view' : 'Functions' }),
    h('div', { class: 'view-editor-grid' }, ...ddocFields,
      h('div', { class: 'field' }, h('label', { for: ids.name, text: 'View name' }), nameInput, errors.name)),
    h('p', { id: ids.hint, class: 'hint', text: 'Tab indents; press Escape then Tab to leave a function. The server compiles the functions when you save.' }),
    h('div', { class: 'field' }, h('label', { for: ids.map, text: 'Map function' }), mapArea, errors.map),
    h('div', { class: 'field' }, h('label', { for: ids.reduce, text: 'Reduce' }), reduceSelect),
    customField, errors.reduce,
    errors.form,
    h('div', { class: 'editor-actions' }, save, cancel, remove));

  function clearErrors() {
    for (const el of Object.values(errors)) clear(el);
    for (const el of [nameInput, mapArea, reduceSelect, customArea, newDdocInput]) if (el) el.removeAttribute('aria-invalid');
  }
  /** Shows `message` in an error area and marks (and focuses) its control. */
  function fail(where, message, control) {
    errors[where].append(h('p', { text: message }));
    if (control) {
      control.setAttribute('aria-invalid', 'true');
      control.focus();
    }
  }

  /** The design document to write (a copy) and the view's name, or null after showing why not. */
  function prepare() {
    const name = nameInput.value.trim();
    if (!name) {
      fail('name', 'Name the view.', nameInput);
      return null;
    }
    let doc;
    if (!isNew) {
      doc = editing.doc;
    } else if (ddocSelect.value) {
      doc = docs.find((d) => ddocName(d) === ddocSelect.value);
    } else {
      const ddoc = newDdocInput.value.trim().replace(/^_design\//, '');
      if (!ddoc) {
        fail('ddoc', 'Name the new design document.', newDdocInput);
        return null;
      }
      if (docs.some((d) => ddocName(d) === ddoc)) {
        fail('ddoc', `_design/${ddoc} exists already: choose it in the list above.`, newDdocInput);
        return null;
      }
      doc = { _id: `_design/${ddoc}`, language: 'javascript' };
    }
    const body = JSON.parse(JSON.stringify(doc));
    body.views = { ...(body.views || {}) };
    const renamed = !isNew && name !== editing.view;
    if ((isNew || renamed) && body.views[name]) {
      fail('name', `${body._id} already has a view named ${name}.`, nameInput);
      return null;
    }
    if (!mapArea.value.trim()) {
      fail('map', 'A view needs a map function.', mapArea);
      return null;
    }
    const view = isNew ? {} : { ...editing.def };
    if (renamed) delete body.views[editing.view];
    view.map = mapArea.value;
    delete view.reduce;
    if (reduceSelect.value === CUSTOM) {
      if (!customArea.value.trim()) {
        fail('reduce', 'Write the reduce function, or choose another reduce.', customArea);
        return null;
      }
      view.reduce = customArea.value;
    } else if (reduceSelect.value) {
      view.reduce = reduceSelect.value;
    }
    body.views[name] = view;
    return { body, name };
  }

  /**
   * Shows a refused save where it belongs: a compile error under the
   * function it names, a conflict with what to do, anything else above the
   * buttons. The user's text stays as typed.
   */
  function showSaveError(err, name) {
    const reason = err instanceof ApiError ? err.message : String(err);
    if (err instanceof ApiError && err.error === 'compilation_error') {
      const named = /Compilation of the (map|reduce) function in the '(.*)' view failed/.exec(reason);
      if (named && named[2] === name) {
        const reduce = named[1] === 'reduce';
        fail(reduce ? 'reduce' : 'map', `The server could not compile it: ${reason}`, reduce ? customArea : mapArea);
        return;
      }
      fail('form', `The server could not compile a function of this design document: ${reason}`, null);
      return;
    }
    if (err instanceof ApiError && err.status === 409) {
      errors.form.append(h('p', { text: `Conflict: the design document was changed by someone else since this editor opened (${reason}). Nothing was saved and your text is kept: copy it, reload, and apply your change again.` }),
        h('p', {}, h('button', { type: 'button', class: 'btn btn-small', text: 'Reload (discards your changes)', onclick: () => route() })));
      save.focus();
      return;
    }
    if (err instanceof ApiError && err.error === 'invalid_design_doc' && /reduce/i.test(reason)) {
      fail('reduce', describeError(err), reduceSelect);
      return;
    }
    errors.form.append(h('p', { text: describeError(err) }));
    save.focus();
  }

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearErrors();
    const prepared = prepare();
    if (!prepared) return;
    const { body, name } = prepared;
    const ddoc = ddocName(body);
    save.disabled = true;
    setText(save, 'Saving…');
    try {
      const res = await api('PUT', ddocPath(db, ddoc), { json: body });
      announce(`Saved ${body._id} (revision ${res.rev}); running ${name}.`);
      navigate(viewLink.run(db, ddoc, name));
    } catch (err) {
      save.disabled = false;
      setText(save, isNew ? 'Create and run' : 'Save and run');
      if (err instanceof ApiError && err.status === 401) {
        handlePageError(err);
        return;
      }
      showSaveError(err, name);
    }
  });

  if (remove) {
    remove.addEventListener('click', async () => {
      clearErrors();
      const { doc, view } = editing;
      const others = Object.keys(doc.views || {}).filter((v) => v !== view);
      const wholeDoc = !others.length && Object.keys(doc).every((k) => BOOKKEEPING.has(k));
      const ok = await confirmDialog({
        title: `Delete view ${view}?`,
        body: wholeDoc
          ? [`It is the only content of ${doc._id}: the design document is deleted, with its index.`]
          : [`${doc._id} is saved without it; its index is dropped.`],
        confirmLabel: 'Delete view',
      });
      if (!ok) {
        remove.focus();
        return;
      }
      try {
        if (wholeDoc) {
          await api('DELETE', ddocPath(db, ddocName(doc)), { params: { rev: doc._rev } });
        } else {
          const body = JSON.parse(JSON.stringify(doc));
          delete body.views[view];
          await api('PUT', ddocPath(db, ddocName(doc)), { json: body });
        }
        announce(wholeDoc ? `View ${view} and ${doc._id} deleted.` : `View ${view} deleted from ${doc._id}.`);
        navigate(viewLink.list(db));
      } catch (err) {
        if (err instanceof ApiError && err.status === 401) {
          handlePageError(err);
          return;
        }
        showSaveError(err, null);
        remove.focus();
      }
    });
  }

  return { el: form, headingId };
}
