//! Recliner's SQLite backend: one file per database in the data folder
//! (the embedded default), implementing `store::backend`. A crate of its
//! own beside `store-postgres`, so that the store knows CouchDB's rules and
//! not its backends; the server chooses one.

mod access_rows;
mod blobs;
mod body_sql;
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
/// it: with the documents whose liveness its writes change, which only a
/// write session counts into the id blocks when it commits (see
/// `id_blocks`).
pub(crate) struct WriteConn<'c> {
    conn: &'c Connection,
    pub(crate) ids: id_blocks::Changes,
}

impl<'c> WriteConn<'c> {
    pub(crate) fn new(conn: &'c Connection) -> WriteConn<'c> {
        WriteConn {
            conn,
            ids: id_blocks::Changes::default(),
        }
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

/// The page size of new database files.
const PAGE_SIZE: i64 = 16 * 1024;

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
        // Bodies of one or two KiB pack a 4 KiB page to half or three
        // quarters (a row that does not fit leaves the rest empty); in
        // 16 KiB pages they fill nine tenths, so the file stays near the
        // size of its live data. (First: setting the vacuum mode fixes
        // the page size.)
        conn.pragma_update(None, "page_size", PAGE_SIZE)?;
        // Lets compaction give freed pages back to the file system.
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    }
    schema::configure(&conn, durability)?;
    Ok(conn)
}
