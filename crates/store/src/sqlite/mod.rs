//! The SQLite backend: one file per database in the data folder (the
//! embedded default), implementing `crate::backend`.

mod blobs;
pub(crate) mod checkpoint;
pub(crate) mod db;
mod doc_rows;
mod partitions;
mod read_rows;
mod registry;
pub(crate) mod schema;
pub(crate) mod session;
mod write_rows;

use std::path::Path;

use rusqlite::{Connection, OpenFlags, OptionalExtension};

pub use registry::SqliteStore;
use schema::Durability;

use crate::StoreError;

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> StoreError {
        StoreError::Backend(Box::new(e))
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
        // does): later, the mode can only change by rewriting the file.
        // Lets compaction give freed pages back to the file system.
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    }
    schema::configure(&conn, durability)?;
    Ok(conn)
}

/// One database file on its own, outside any data folder (the store's unit
/// tests): created with `setup`, or opened when `None`.
#[cfg(test)]
pub(crate) fn test_file(
    name: &str,
    path: &Path,
    durability: Durability,
    setup: Option<&crate::backend::NewDb<'_>>,
) -> Result<Box<dyn crate::backend::DbBackend>, StoreError> {
    Ok(Box::new(match setup {
        Some(setup) => db::SqliteDb::create(name, path, durability, setup)?,
        None => db::SqliteDb::open(name, path, durability)?,
    }))
}
