//! Recliner's SQLite backend: one file per database in the data folder
//! (the embedded default), implementing `store::backend`. A crate of its
//! own beside `store-postgres`, so that the store knows CouchDB's rules and
//! not its backends; the server chooses one.

mod access_rows;
mod blobs;
mod body_sql;
mod change_log;
pub(crate) mod checkpoint;
mod coordination;
pub(crate) mod db;
mod doc_rows;
mod file_limit;
mod id_blocks;
mod partitions;
#[cfg(test)]
mod purge_rows;
mod read_rows;
mod registry;
pub(crate) mod schema;
mod seq_buckets;
pub(crate) mod session;
mod write_rows;

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::{Connection, OpenFlags, OptionalExtension};
use store::{Durability, Store, StoreError, StoreOptions};

pub use registry::SqliteStore;

/// Opens (creating if needed) a data folder of SQLite databases, with the
/// default options.
pub fn open(data_dir: impl Into<PathBuf>) -> Result<Store, StoreError> {
    open_with(data_dir, StoreOptions::default())
}

/// Opens (creating if needed) a data folder of SQLite databases and the
/// server identity in it.
pub fn open_with(data_dir: impl Into<PathBuf>, options: StoreOptions) -> Result<Store, StoreError> {
    let data_dir = data_dir.into();
    let backend = Arc::new(SqliteStore::open(data_dir.clone(), options.durability)?);
    file_limit::check_file_limit(options.max_dbs_open);
    Ok(Store::with_backend(
        data_dir,
        backend.clone(),
        backend,
        options,
    ))
}

/// A connection as `store::backend`'s row traits see it (the orphan rule
/// keeps them from being implemented on `Connection` itself).
pub(crate) struct Rows<'c>(pub &'c Connection);

impl Deref for Rows<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.0
    }
}

/// A write transaction's connection as `store::backend::WriteRows` sees
/// it: with what its writes change in the counted structures, which only
/// a write session counts in when it commits.
pub(crate) struct WriteConn<'c> {
    conn: &'c Connection,
    pub(crate) counts: CountChanges,
}

impl<'c> WriteConn<'c> {
    pub(crate) fn new(conn: &'c Connection) -> WriteConn<'c> {
        WriteConn {
            conn,
            counts: CountChanges::default(),
        }
    }
}

/// What a transaction's writes change in the counts kept beside the
/// documents: their liveness by id (`id_blocks`), and the sequences their
/// rows move between (`seq_buckets`).
#[derive(Debug, Default)]
pub(crate) struct CountChanges {
    pub(crate) ids: id_blocks::Changes,
    pub(crate) seqs: seq_buckets::Changes,
}

impl CountChanges {
    /// Where a savepoint starts.
    pub(crate) fn mark(&self) -> (usize, usize) {
        (self.ids.mark(), self.seqs.mark())
    }

    /// Forgets what was recorded since `mark` (its savepoint rolled back).
    pub(crate) fn rollback_to(&self, (ids, seqs): (usize, usize)) {
        self.ids.rollback_to(ids);
        self.seqs.rollback_to(seqs);
    }

    /// Counts the changes in: in the transaction, before it commits.
    pub(crate) fn apply(&self, conn: &Connection) -> Result<(), StoreError> {
        id_blocks::apply(conn, &self.ids)?;
        seq_buckets::apply(conn, &self.seqs)
    }
}

impl Deref for WriteConn<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn
    }
}

fn read_meta(conn: &Connection, key: &str) -> Result<Option<String>, StoreError> {
    Ok(conn
        .prepare_cached("SELECT value FROM db_meta WHERE key = ?1")?
        .query_row([key], |r| r.get(0))
        .optional()?)
}

fn write_meta(conn: &Connection, key: &str, value: &str) -> Result<(), StoreError> {
    conn.prepare_cached("INSERT OR REPLACE INTO db_meta (key, value) VALUES (?1, ?2)")?
        .execute([key, value])?;
    Ok(())
}

/// The page size of new database files: SQLite's default, kept for what
/// every open database costs. A row that does not fit a page's rest leaves
/// it empty, so bodies of about 1 KiB fill 4 KiB pages to four fifths and
/// 2 KiB bodies to a half (8 KiB pages: nine tenths and three quarters;
/// 16 KiB: all but a few percent), and a compacted file stays that much
/// larger than its live data. But each connection's page cache grows with
/// the page: with 5,000 small databases, 500 open, the server held 192 MiB
/// resident at 4 KiB, 267 MiB at 8 KiB and 386 MiB at 16 KiB.
const PAGE_SIZE: i64 = 4 * 1024;

fn open_connection(
    path: &Path,
    create: bool,
    durability: Durability,
) -> Result<Connection, StoreError> {
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if create {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let conn = Connection::open_with_flags(path, flags)?;
    if create {
        // Before anything writes the file's header (switching to WAL
        // does): later, both can only change by rewriting the file.
        // (The page size first: setting the vacuum mode fixes it.)
        conn.pragma_update(None, "page_size", PAGE_SIZE)?;
        // Lets compaction give freed pages back to the file system.
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    }
    schema::configure(&conn, durability)?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use std::ops::Bound;

    use super::*;

    /// A savepoint rolled back takes back what its writes recorded in
    /// every count, not only in one of them.
    #[test]
    fn a_rolled_back_savepoint_takes_back_every_count() {
        let conn = Connection::open_in_memory().expect("a database");
        conn.execute_batch(
            "CREATE TABLE docs (id TEXT PRIMARY KEY, deleted INTEGER NOT NULL, seq INTEGER NOT NULL);",
        )
        .expect("docs");
        conn.execute_batch(id_blocks::SCHEMA).expect("blocks");
        conn.execute_batch(seq_buckets::SCHEMA).expect("buckets");
        id_blocks::fill(&conn).expect("the first block");
        conn.execute_batch("INSERT INTO docs VALUES ('a', 0, 5000);")
            .expect("a row");
        let counts = CountChanges::default();
        // `a` was written; `b` was too, in a savepoint rolled back.
        counts.ids.record(("a".into(), 1));
        counts.seqs.record((5000, 1));
        let mark = counts.mark();
        counts.ids.record(("b".into(), 1));
        counts.seqs.record((6000, 1));
        counts.rollback_to(mark);
        counts.apply(&conn).expect("counted");
        let live = id_blocks::live_between(&conn, &Bound::Unbounded, &Bound::Unbounded);
        assert_eq!(live.expect("live"), 1);
        assert_eq!(seq_buckets::docs_after(&conn, 0).expect("after"), 1);
    }
}
