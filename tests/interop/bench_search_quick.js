// PouchDB (leveldb adapter) with pouchdb-quick-search, for
// tests/examples/search_bench.rs: loads the documents of INPUT (JSON:
// docs, queries per kind, warmup) into a database at DB_PATH, builds the
// search index on title and body, then times each query. Prints one JSON
// object on stdout. The packages come from PACKAGES_DIR (bench/node, as
// installed by `cargo xtask bench search`), PouchDB Server's PouchDB.
//
//   node bench_search_quick.js INPUT DB_PATH PACKAGES_DIR
'use strict';

const fs = require('fs');
const path = require('path');
const [input, dbPath, packagesDir] = process.argv.slice(2);
const load = require('module').createRequire(path.join(path.resolve(packagesDir), 'package.json'));
const PouchDB = load('pouchdb-core')
  .plugin(load('pouchdb-adapter-leveldb'))
  .plugin(load('pouchdb-mapreduce'))
  .plugin(load('pouchdb-quick-search'));

const { docs, queries, warmup } = JSON.parse(fs.readFileSync(input, 'utf8'));
const FIELDS = ['title', 'body'];

function peakMib() {
  const status = fs.readFileSync('/proc/self/status', 'utf8');
  const line = status.split('\n').find((l) => l.startsWith('VmHWM:'));
  return line ? Number(line.split(/\s+/)[1]) / 1024 : null;
}

function resetPeak() {
  try {
    fs.writeFileSync('/proc/self/clear_refs', '5');
  } catch (e) {
    process.stderr.write(`bench_search_quick: cannot reset the peak RSS: ${e}\n`);
  }
}

async function main() {
  const db = new PouchDB(dbPath, { adapter: 'leveldb' });
  let started = process.hrtime.bigint();
  for (let i = 0; i < docs.length; i += 1000) {
    const res = await db.bulkDocs(docs.slice(i, i + 1000));
    if (res.some((r) => r.error)) throw new Error(JSON.stringify(res.find((r) => r.error)));
  }
  const loadS = Number(process.hrtime.bigint() - started) / 1e9;
  const peakLoad = peakMib();
  process.stderr.write(`bench_search_quick: loaded ${docs.length} docs in ${loadS.toFixed(1)} s\n`);

  resetPeak();
  started = process.hrtime.bigint();
  // `build: true`, then a first query: with PouchDB 7 the index is only
  // brought up to date by the query (as Recliner's first query builds).
  await db.search({ fields: FIELDS, build: true });
  await db.search({ query: queries[0][0].q, fields: FIELDS, limit: 1 });
  const buildS = Number(process.hrtime.bigint() - started) / 1e9;
  const peakBuild = peakMib();
  process.stderr.write(`bench_search_quick: built the index in ${buildS.toFixed(1)} s\n`);

  const search = (q) =>
    db.search({ query: q.q, fields: FIELDS, limit: 25, mm: q.mm || '100%' });
  // Term, phrase (every word, in any order: quick-search has no phrases).
  const kinds = [queries[0], queries[1]];
  for (let i = 0; i < warmup; i++) await search(kinds[i % 2][i % kinds[i % 2].length]);
  resetPeak();
  const latencies = [];
  for (const list of kinds) {
    const times = [];
    for (const q of list) {
      const t = process.hrtime.bigint();
      await search(q);
      times.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
    latencies.push(times);
  }
  const peakQuery = peakMib();
  await db.close();
  process.stdout.write(
    JSON.stringify({
      load_s: loadS,
      build_s: buildS,
      latencies,
      peak_load_mib: peakLoad,
      peak_build_mib: peakBuild,
      peak_query_mib: peakQuery,
      note:
        `PouchDB ${load('pouchdb-core/package.json').version} (leveldb adapter), ` +
        `pouchdb-quick-search ${load('pouchdb-quick-search/package.json').version}; ` +
        'the index covers title and body and each query searches both; a phrase is ' +
        'both words anywhere (no phrase queries); no numeric ranges nor facets',
    }) + '\n',
  );
}

main().catch((e) => {
  process.stderr.write(`bench_search_quick: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
