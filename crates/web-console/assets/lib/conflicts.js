// Resolving a document's conflict, the one way the console does it (on a
// document's page and across a database): the revision kept stays as it is
// (its attachments and history untouched) and every other live leaf gets a
// deleted child revision, so the kept one is the only live leaf and wins.

import { api } from './api.js';
import { dbPath } from './paths.js';

/** Most documents written in one `_bulk_docs` request. */
const BATCH = 500;

/**
 * The deletions that leave `keep` as the only live leaf of document `id`,
 * whose live leaf revisions are `liveRevs`.
 */
export function deletionsKeeping(id, liveRevs, keep) {
  if (!liveRevs.includes(keep)) {
    throw new Error(`${keep} is not a live revision of ${id}.`);
  }
  return liveRevs.filter((rev) => rev !== keep).map((rev) => ({ _id: id, _rev: rev, _deleted: true }));
}

/**
 * Writes `deletions` (from `deletionsKeeping`) in batches and answers the
 * refused ones as `{id, rev, error, reason}`: a document edited meanwhile is
 * a 409 `conflict` there, and the rest are still written.
 */
export async function writeDeletions(db, deletions, onProgress = () => {}) {
  const refused = [];
  for (let i = 0; i < deletions.length; i += BATCH) {
    const batch = deletions.slice(i, i + BATCH);
    const results = await api('POST', `${dbPath(db)}/_bulk_docs`, { json: { docs: batch } });
    results.forEach((result, j) => {
      if (result.error) {
        refused.push({ id: batch[j]._id, rev: batch[j]._rev, error: result.error, reason: result.reason || '' });
      }
    });
    onProgress(Math.min(i + BATCH, deletions.length), deletions.length);
  }
  return refused;
}

/**
 * The revision a rule keeps among a document's live leaves (`{_rev, ...body}`
 * each, the winner first): `winner` keeps CouchDB's winner (the longest edit
 * history); `field` keeps the leaf with the greatest value of a field (ISO
 * dates and numbers compare as such), the winner when none has it.
 */
export function keptByRule(leaves, rule, field) {
  if (rule !== 'field' || !field) return leaves[0]._rev;
  let best = null;
  for (const leaf of leaves) {
    const value = fieldValue(leaf, field);
    if (value === undefined) continue;
    if (best === null || compareValues(value, best.value) > 0) best = { rev: leaf._rev, value };
  }
  return best ? best.rev : leaves[0]._rev;
}

/** A field of a document by a dotted path (`meta.updated`). */
export function fieldValue(doc, path) {
  let value = doc;
  for (const part of path.split('.')) {
    if (value === null || typeof value !== 'object' || !(part in value)) return undefined;
    value = value[part];
  }
  return value;
}

/** Numbers by value, texts by code point (ISO dates sort so), numbers before texts. */
function compareValues(a, b) {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'number') return -1;
  if (typeof b === 'number') return 1;
  const x = typeof a === 'string' ? a : JSON.stringify(a);
  const y = typeof b === 'string' ? b : JSON.stringify(b);
  return x < y ? -1 : x > y ? 1 : 0;
}
