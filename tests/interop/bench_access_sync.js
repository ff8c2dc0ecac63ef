'use strict';
// For `cargo xtask bench access`: one stock PouchDB (memory adapter)
// replicates a user's documents from the URL given (credentials in it)
// and prints {"ms": time, "docs": documents replicated} as JSON.

const { pouchdb } = require('./lib');

async function main() {
  const url = process.argv[2];
  if (!url) {
    process.stderr.write('usage: node bench_access_sync.js URL\n');
    process.exit(2);
  }
  const PouchDB = pouchdb();
  const local = new PouchDB(`bench-${process.pid}`, { adapter: 'memory' });
  const started = process.hrtime.bigint();
  const result = await local.replicate.from(new PouchDB(url));
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  process.stdout.write(JSON.stringify({ ms, docs: result.docs_written }));
  process.exit(0);
}

main().catch((err) => {
  process.stderr.write(`${err.stack || err}\n`);
  process.exit(1);
});
