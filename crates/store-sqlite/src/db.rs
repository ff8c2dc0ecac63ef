//! One database as one SQLite file: pooled reader connections (WAL readers
//! never wait for the writer), the writer's session, and what only a file
//! has (its free pages, fsync).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use rusqlite::Connection;

use crate::session::SqliteSession;
use store::Durability;
use store::StoreError;
use store::backend::{DbBackend, Garbage, NewDb, ReadRows, WriteSession};

/// How long one try at emptying the log after compaction waits for
/// readers (writes wait as long: 250 ms made the longest write during a
/// compaction 400 ms).
const TRUNCATE_WAIT: std::time::Duration = std::time::Duration::from_millis(50);
/// How many times emptying the log is tried while it is busy, a wait
/// apart, writes going on in between.
const TRUNCATE_TRIES: u32 = 20;

/// Reader connections kept open per database; more are opened on demand and
/// closed after use when this many are already pooled.
const MAX_POOLED_READERS: usize = 8;

pub(crate) struct SqliteDb {
    name: String,
    path: PathBuf,
    durability: Durability,
    readers: Mutex<Vec<Connection>>,
    /// Closed or deleted: reader connections are no longer pooled.
    closed: AtomicBool,
}

impl SqliteDb {
    /// Creates the file, sets the database up, and opens it.
    pub(super) fn create(
        name: &str,
        path: &Path,
        durability: Durability,
        setup: &NewDb<'_>,
    ) -> Result<SqliteDb, StoreError> {
        let mut conn = crate::open_connection(path, true, durability)?;
        crate::schema::migrate(&mut conn)?;
        let tx = conn.transaction()?;
        if crate::read_meta(&tx, "uuid")?.is_none() {
            for (key, value) in store::backend::new_db_meta(setup) {
                crate::write_meta(&tx, key, &value)?;
            }
        }
        tx.commit()?;
        Ok(SqliteDb::wrap(name, path, durability, conn))
    }

    /// Opens an existing file.
    pub(super) fn open(
        name: &str,
        path: &Path,
        durability: Durability,
    ) -> Result<SqliteDb, StoreError> {
        if !path.is_file() {
            return Err(StoreError::DbNotFound(name.to_string()));
        }
        let mut conn = crate::open_connection(path, false, durability)?;
        crate::schema::migrate(&mut conn)?;
        Ok(SqliteDb::wrap(name, path, durability, conn))
    }

    /// `conn` (which set the schema up) becomes the first pooled reader.
    fn wrap(name: &str, path: &Path, durability: Durability, conn: Connection) -> SqliteDb {
        SqliteDb {
            name: name.to_string(),
            path: path.to_path_buf(),
            durability,
            readers: Mutex::new(vec![conn]),
            closed: AtomicBool::new(false),
        }
    }

    fn reader(&self) -> Result<Connection, StoreError> {
        let pooled = self.readers.lock().ok().and_then(|mut pool| pool.pop());
        if let Some(conn) = pooled {
            return Ok(conn);
        }
        let conn =
            crate::open_connection(&self.path, false, self.durability).map_err(|e| match e {
                StoreError::Backend(_) if !self.path.exists() => {
                    StoreError::DbNotFound(self.name.clone())
                }
                other => other,
            })?;
        conn.pragma_update(None, "query_only", "ON")?;
        Ok(conn)
    }

    /// Runs `op` on a pooled reader connection in one read transaction.
    pub(crate) fn read_conn<T>(
        &self,
        op: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let conn = self.reader()?;
        let result = (|| {
            let tx = conn.unchecked_transaction()?;
            let out = op(&tx);
            drop(tx);
            out
        })();
        if !self.closed.load(Ordering::Acquire)
            && let Ok(mut pool) = self.readers.lock()
            && pool.len() < MAX_POOLED_READERS
        {
            pool.push(conn);
        }
        result
    }
}

impl DbBackend for SqliteDb {
    fn open_writer(&self) -> Result<Box<dyn WriteSession>, StoreError> {
        Ok(Box::new(SqliteSession::open(
            &self.name,
            self.path.clone(),
            self.durability,
        )?))
    }

    fn read(
        &self,
        op: &mut dyn FnMut(&dyn ReadRows) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.read_conn(|conn| op(&crate::Rows(conn)))
    }

    fn index_dir(&self) -> PathBuf {
        let mut dir = self.path.as_os_str().to_owned();
        dir.push("-indexes");
        PathBuf::from(dir)
    }

    fn garbage(&self, kept_extra_revs: u64) -> Result<Garbage, StoreError> {
        self.read_conn(|conn| garbage(conn, kept_extra_revs))
    }

    fn sync(&self) -> Result<(), StoreError> {
        let mut wal = self.path.as_os_str().to_owned();
        wal.push("-wal");
        for file in [PathBuf::from(wal), self.path.clone()] {
            match std::fs::File::open(&file) {
                Ok(f) => f.sync_all()?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    fn give_back_log(&self) -> Result<(), StoreError> {
        use rusqlite::wal::CheckpointMode;
        let conn = crate::open_connection(&self.path, false, self.durability)?;
        // Copy the log into the file without stopping anyone; then empty it
        // and cut it to nothing, which waits for the readers still in it:
        // briefly, as writes wait meanwhile (a busy log stays for the
        // checkpointer, and is cut back to its size limit when it restarts).
        let _ = conn.wal_checkpoint_v2(None::<&str>, CheckpointMode::PASSIVE);
        conn.busy_timeout(TRUNCATE_WAIT)?;
        // The checkpointer thread may be copying the same log (compaction
        // filled it past its threshold): busy at once, so tried again.
        for _ in 0..TRUNCATE_TRIES {
            match conn.wal_checkpoint_v2(None::<&str>, CheckpointMode::TRUNCATE) {
                Ok(_) => return Ok(()),
                Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy) => {
                    std::thread::sleep(TRUNCATE_WAIT);
                }
                Err(e) => return Err(e.into()),
            }
        }
        tracing::debug!(db = %self.name, "the log is busy; left to the checkpointer");
        Ok(())
    }

    fn measure_page_fill(&self) -> Result<Option<f64>, StoreError> {
        // SQLite's own page statistics: every page read once, on a reader.
        self.read_conn(|conn| {
            let (used, total): (Option<i64>, Option<i64>) = conn.query_row(
                "SELECT sum(pgsize - unused), sum(pgsize) FROM dbstat",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            Ok(match (used, total) {
                (Some(used), Some(total)) if total > 0 => Some(used as f64 / total as f64),
                _ => None,
            })
        })
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        if let Ok(mut pool) = self.readers.lock() {
            pool.clear();
        }
    }
}

/// How much of the file compaction would give back, estimated without
/// reading the data: free pages, plus the share of revision bodies that are
/// no longer leaves (revision rows beyond one per document, less those the
/// last compaction kept), counted at the average body size.
fn garbage(conn: &Connection, kept: u64) -> Result<Garbage, StoreError> {
    let pragma = |name: &str| -> Result<u64, StoreError> {
        let value: i64 = conn.pragma_query_value(None, name, |r| r.get(0))?;
        Ok(value.max(0) as u64)
    };
    let page_size = pragma("page_size")?;
    let pages = pragma("page_count")?;
    // Free pages go back to the file system only in incremental mode
    // (files made before it stay in the other mode, where SQLite reuses
    // free pages but compaction cannot give them back).
    let free = if pragma("auto_vacuum")? == 2 {
        pragma("freelist_count")?
    } else {
        0
    };
    let count = |sql: &str| -> Result<u64, StoreError> {
        let n: i64 = conn.query_row(sql, [], |r| r.get(0))?;
        Ok(n.max(0) as u64)
    };
    let revs = count("SELECT COUNT(*) FROM revs")?;
    let docs = count("SELECT COUNT(*) FROM docs")?;
    let attachment_bytes = count("SELECT COALESCE(SUM(length), 0) FROM att_blobs")?;
    let stale_revs = revs.saturating_sub(docs).saturating_sub(kept);
    let file_size = pages * page_size;
    let body_bytes = ((pages - free.min(pages)) * page_size).saturating_sub(attachment_bytes);
    let stale_bytes = if revs == 0 {
        0
    } else {
        (body_bytes as u128 * stale_revs as u128 / revs as u128) as u64
    };
    Ok(Garbage {
        file_size,
        garbage: (free * page_size + stale_bytes).min(file_size),
    })
}
