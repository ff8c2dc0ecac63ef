// #/server: the node's facts and figures, its active tasks, and the
// configuration by section (server admins only). What each change does is
// the server's to say: `_config/_applied_at_start` names the keys that wait
// for the next start, every other key applies at once.

import { ApiError, api, describeError } from '../lib/api.js';
import { clear, h, uid } from '../lib/dom.js';
import { refuseUnlessAdmin } from '../lib/rights.js';
import { announce, handlePageError, main, startPage } from '../lib/shell.js';
import { confirmDialog } from '../lib/widgets.js';
import { liveSections } from './server-live.js';

const CONFIG = '/_node/_local/_config';

/** The section whose values are password hashes: never shown as text. */
const ADMINS = 'admins';

/**
 * Kept across visits of the page: the section and filter chosen, and the
 * keys changed since the page was loaded that wait for a restart.
 */
const memory = { section: '', filter: '', restartNeeded: new Set() };

function keyPath(section, key) {
  return `${CONFIG}/${encodeURIComponent(section)}/${encodeURIComponent(key)}`;
}

export async function renderServer() {
  const alive = startPage('Server', 'server');
  if (await refuseUnlessAdmin({
    alive,
    title: 'Server',
    path: CONFIG,
    what: 'This page shows and changes the server\'s configuration, its active tasks and its figures.',
  })) return;
  const [config, atStart] = await Promise.all([
    api('GET', CONFIG),
    api('GET', `${CONFIG}/_applied_at_start`),
  ]);
  if (!alive()) return;

  const root = clear(main());
  root.append(h('div', { class: 'page-head' },
    h('div', {}, h('h1', { text: 'Server' }),
      h('p', { class: 'muted', text: 'The node, its active tasks and its configuration.' }))));
  const live = liveSections(alive);
  root.append(live.nodeSection, live.tasksSection, configSection(config, atStart, alive));
  live.start().catch(handlePageError);
}

// ------------------------------------------------------------ configuration

/** The configuration card: sections, their keys as fields, adding a key. */
function configSection(initial, atStart, alive) {
  let config = initial;
  const needsRestart = (section, key) => (atStart[section] || []).includes(key);
  const sectionId = uid('config-section');
  const filterId = uid('config-filter');
  const select = h('select', { id: sectionId });
  const filter = h('input', { id: filterId, type: 'search', autocomplete: 'off', spellcheck: 'false', value: memory.filter });
  const restartNote = h('div', { class: 'callout callout-warn restart-note', role: 'status' });
  const table = h('table', { class: 'table config-table' });
  const sectionsList = h('datalist', { id: uid('config-sections') });

  function drawRestartNote() {
    clear(restartNote);
    restartNote.hidden = memory.restartNeeded.size === 0;
    if (!restartNote.hidden) {
      restartNote.append(h('p', {}, h('strong', { text: 'A restart is needed' }),
        ` for the changes of ${[...memory.restartNeeded].join(', ')} to take effect.`));
    }
  }

  /** Shows only the chosen section and the keys matching the filter. */
  function applyFilter() {
    const text = filter.value.trim().toLowerCase();
    memory.filter = filter.value;
    memory.section = select.value;
    for (const body of table.tBodies) {
      const inSection = !select.value || body.dataset.section === select.value;
      let shown = 0;
      for (const row of body.querySelectorAll('tr[data-key]')) {
        const match = !text || row.dataset.key.toLowerCase().includes(text)
          || body.dataset.section.toLowerCase().includes(text);
        row.hidden = !match;
        if (match) shown += 1;
      }
      body.hidden = !inSection || shown === 0;
    }
  }

  function drawSections() {
    const names = Object.keys(config).sort();
    const chosen = names.includes(memory.section) ? memory.section : '';
    clear(select).append(h('option', { value: '', text: `All sections (${names.length})` }),
      ...names.map((name) => h('option', { value: name, selected: name === chosen ? true : null, text: name })));
    select.value = chosen;
    clear(sectionsList).append(...names.map((name) => h('option', { value: name })));
    clear(table).append(
      h('caption', { class: 'sr-only', text: 'Configuration keys by section' }),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col', text: 'Key' }),
        h('th', { scope: 'col', text: 'Value' }),
        h('th', { scope: 'col', text: 'Applies' }),
        h('th', { scope: 'col', class: 'actions', text: 'Actions' }))));
    for (const name of names) {
      const body = h('tbody', { dataset: { section: name } },
        h('tr', { class: 'config-section-row' },
          h('th', { scope: 'rowgroup', colspan: 4 }, h('span', { class: 'mono', text: `[${name}]` }))));
      for (const key of Object.keys(config[name]).sort()) {
        body.append(keyRow(name, key, config[name][key]));
      }
      table.append(body);
    }
    applyFilter();
  }

  /** Reads the whole configuration again (after a key is added or deleted). */
  async function reload() {
    const next = await api('GET', CONFIG);
    if (!alive()) return;
    config = next;
    drawSections();
  }

  /** One key: its value in a field, saved by Enter or its button. */
  function keyRow(section, key, value) {
    const secret = section === ADMINS;
    const later = needsRestart(section, key);
    const name = `[${section}] ${key}`;
    const input = h('input', {
      type: secret ? 'password' : 'text',
      class: 'config-value mono',
      value: secret ? '' : value,
      autocomplete: secret ? 'new-password' : 'off',
      spellcheck: 'false',
      placeholder: secret ? 'New password' : null,
      'aria-label': secret ? `New password for server admin ${key}` : name,
    });
    const save = h('button', { type: 'button', class: 'btn btn-small btn-primary', text: 'Save', 'aria-label': `Save ${name}` });
    const remove = h('button', { type: 'button', class: 'btn btn-small btn-danger-ghost', text: 'Delete', 'aria-label': `Delete ${name}` });
    const message = h('div', { class: 'config-message', 'aria-live': 'polite' });
    let saved = value;
    const row = h('tr', { dataset: { key, section } },
      h('th', { scope: 'row', class: 'mono break', text: key }),
      h('td', { class: 'config-value-cell' },
        secret ? h('p', { class: 'masked muted small', text: 'Password hash hidden: type a new password to change it.' }) : null,
        input, message),
      h('td', {}, later
        ? h('span', { class: 'badge badge-warn', title: 'A change takes effect when the server starts again', text: 'At next start' })
        : h('span', { class: 'badge badge-ok', title: 'A change applies from the next request', text: 'At once' })),
      h('td', { class: 'actions' }, save, ' ', remove));

    function say(text, kind) {
      clear(message).append(h('p', { class: kind === 'error' ? 'field-error' : `config-note config-note-${kind}`, role: kind === 'error' ? 'alert' : null, text }));
    }

    async function submit() {
      const next = input.value;
      if (!secret && next === saved) {
        say('Unchanged.', 'muted');
        return;
      }
      if (secret && !next) {
        say('Type the new password first.', 'error');
        input.focus();
        return;
      }
      save.disabled = true;
      remove.disabled = true;
      clear(message);
      try {
        await api('PUT', keyPath(section, key), { json: next });
        // What the server keeps (lists tidied, passwords hashed).
        const shown = await api('GET', keyPath(section, key)).catch(() => next);
        if (!alive()) return;
        saved = shown;
        input.value = secret ? '' : shown;
        if (later) {
          memory.restartNeeded.add(name);
          drawRestartNote();
          say('Saved. Applies at the next start: restart the server for it to take effect.', 'later');
          announce(`${name} saved: a restart is needed for it to take effect.`);
        } else {
          say(secret ? 'Password changed: it applies at once.' : 'Applied: the server uses it from now on.', 'live');
          announce(`${name} saved and applied.`);
        }
      } catch (err) {
        if (err instanceof ApiError && err.status === 401) return handlePageError(err);
        say(`Not saved. ${describeError(err)}`, 'error');
        input.focus();
      } finally {
        save.disabled = false;
        remove.disabled = false;
      }
    }

    input.addEventListener('keydown', (event) => {
      if (event.key === 'Enter') {
        event.preventDefault();
        submit();
      } else if (event.key === 'Escape' && input.value !== (secret ? '' : saved)) {
        event.preventDefault();
        input.value = secret ? '' : saved;
        say('Change undone.', 'muted');
      }
    });
    save.addEventListener('click', submit);
    remove.addEventListener('click', async () => {
      const ok = await confirmDialog({
        title: `Delete ${name}?`,
        body: secret
          ? [`Server admin ${key} can no longer log in with this password.`]
          : ['Recliner\'s own settings go back to their default; other keys are removed.', later ? 'It takes effect at the next start.' : 'It takes effect at once.'],
        confirmLabel: 'Delete',
      });
      if (!ok) {
        remove.focus();
        return;
      }
      try {
        const old = await api('DELETE', keyPath(section, key));
        if (!alive()) return;
        if (later) {
          memory.restartNeeded.add(name);
          drawRestartNote();
        }
        await reload();
        const now = config[section] && config[section][key];
        announce(now !== undefined
          ? `${name} is back to its default: ${now}${later ? ' (at the next start)' : ''}.`
          : `${name} deleted${secret || !old ? '' : ` (it was ${old})`}.`);
        const again = table.querySelector(`tr[data-section="${CSS.escape(section)}"][data-key="${CSS.escape(key)}"] input`);
        (again || filter).focus();
      } catch (err) {
        if (err instanceof ApiError && err.status === 401) return handlePageError(err);
        say(`Not deleted. ${describeError(err)}`, 'error');
        remove.focus();
      }
    });
    return row;
  }

  select.addEventListener('change', applyFilter);
  filter.addEventListener('input', applyFilter);
  drawSections();
  drawRestartNote();

  const card = h('section', { class: 'card config-card', 'aria-labelledby': 'config-heading' },
    h('div', { class: 'section-head' }, h('h2', { id: 'config-heading', text: 'Configuration' })),
    h('p', { class: 'muted', text: 'Each key applies at once, or at the server\'s next start where marked. A change is written to the configuration file. Press Enter in a field to save it, Escape to undo.' }),
    h('div', { class: 'toolbar config-toolbar' },
      h('div', { class: 'field' }, h('label', { for: sectionId, text: 'Section' }), select),
      h('div', { class: 'field' }, h('label', { for: filterId, text: 'Find a key' }), filter)),
    restartNote,
    h('div', { class: 'table-scroll' }, table),
    addKeyForm(sectionsList, async (section, key) => {
      await reload();
      if (!alive()) return;
      drawRestartNote();
      select.value = section;
      filter.value = '';
      applyFilter();
      const input = table.querySelector(`tr[data-section="${CSS.escape(section)}"][data-key="${CSS.escape(key)}"] input`);
      if (input) input.focus();
    }, needsRestart));
  return card;
}

/** The form adding a key to a section (new or existing). */
function addKeyForm(sectionsList, added, needsRestart) {
  const ids = { section: uid('add-section'), key: uid('add-key'), value: uid('add-value') };
  const error = h('div', { class: 'form-error', role: 'alert' });
  const form = h('form', { class: 'inline-form add-key-form', 'aria-labelledby': 'add-key-heading' },
    h('div', { class: 'field' }, h('label', { for: ids.section, text: 'Section' }),
      h('input', { id: ids.section, name: 'section', type: 'text', list: sectionsList.id, autocomplete: 'off', spellcheck: 'false', required: true })),
    h('div', { class: 'field' }, h('label', { for: ids.key, text: 'Key' }),
      h('input', { id: ids.key, name: 'key', type: 'text', autocomplete: 'off', spellcheck: 'false', required: true })),
    h('div', { class: 'field' }, h('label', { for: ids.value, text: 'Value' }),
      h('input', { id: ids.value, name: 'value', type: 'text', autocomplete: 'off', spellcheck: 'false' })),
    h('button', { type: 'submit', class: 'btn btn-primary', text: 'Add key' }));
  // A new admin's value is a password: typed masked.
  form.elements.section.addEventListener('input', () => {
    form.elements.value.type = form.elements.section.value.trim() === ADMINS ? 'password' : 'text';
  });
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clear(error);
    const section = form.elements.section.value.trim();
    const key = form.elements.key.value.trim();
    const value = form.elements.value.value;
    if (!section || !key) {
      error.append(h('p', { text: 'Name the section and the key.' }));
      (section ? form.elements.key : form.elements.section).focus();
      return;
    }
    const button = form.querySelector('button[type="submit"]');
    button.disabled = true;
    try {
      await api('PUT', keyPath(section, key), { json: value });
      form.reset();
      form.elements.value.type = 'text';
      const name = `[${section}] ${key}`;
      if (needsRestart(section, key)) memory.restartNeeded.add(name);
      announce(`${name} added${needsRestart(section, key) ? ': it applies at the next start' : ''}.`);
      await added(section, key);
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) {
        handlePageError(err);
        return;
      }
      error.append(h('p', { text: `Not added. ${describeError(err)}` }));
      form.elements.value.focus();
    } finally {
      button.disabled = false;
    }
  });
  return h('div', { class: 'add-key' },
    h('h3', { id: 'add-key-heading', text: 'Add a key' }),
    form, error, sectionsList);
}

