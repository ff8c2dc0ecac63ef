//! The writer's session on a SQLite file: one connection, an immediate
//! transaction per group, a savepoint per write, and the checkpointer that
//! moves the write-ahead log into the file in the background.

use std::path::PathBuf;
use std::sync::Arc;

use rusqlite::{Connection, TransactionBehavior};

use crate::WriteConn;
use crate::checkpoint::{self, Checkpointer};
use store::Durability;
use store::StoreError;
use store::backend::{DbState, WriteRows, WriteSession, WriteTx};

pub(super) struct SqliteSession {
    /// Dropped before the checkpointer stops (see [`Drop`]).
    conn: Option<Connection>,
    checkpointer: Option<Checkpointer>,
}

impl SqliteSession {
    pub(super) fn open(
        db_name: &str,
        path: PathBuf,
        durability: Durability,
    ) -> Result<SqliteSession, StoreError> {
        let mut conn = crate::open_connection(&path, false, durability)?;
        let checkpointer = Checkpointer::new(
            Arc::new(move || {
                crate::open_connection(&path, false, durability).map_err(|e| e.to_string())
            }),
            db_name,
            checkpoint::BACKGROUND_PAGES,
        );
        checkpointer.attach(&mut conn)?;
        Ok(SqliteSession {
            conn: Some(conn),
            checkpointer: Some(checkpointer),
        })
    }

    fn conn(&mut self) -> Result<&mut Connection, StoreError> {
        self.conn
            .as_mut()
            .ok_or_else(|| StoreError::CommitFailed("the write session is closed".into()))
    }
}

/// The connection holds the checkpointer's wake-up hook: close it first,
/// then wait for the checkpointer, so no connection to the file is left
/// afterwards (the file may be deleted next).
impl Drop for SqliteSession {
    fn drop(&mut self) {
        drop(self.conn.take());
        if let Some(checkpointer) = self.checkpointer.take() {
            checkpointer.stop();
        }
    }
}

impl WriteSession for SqliteSession {
    fn load_state(&mut self) -> Result<DbState, StoreError> {
        load_state(self.conn()?)
    }

    fn transaction(
        &mut self,
        group: &mut dyn FnMut(&dyn WriteTx) -> Result<bool, StoreError>,
    ) -> Result<bool, StoreError> {
        let conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let work = SqliteTx {
            conn: &tx,
            rows: WriteConn::new(&tx),
        };
        let commit = group(&work)?;
        if commit {
            work.rows.counts.apply(&tx)?;
            drop(work);
            tx.commit()?;
        }
        Ok(commit)
    }
}

struct SqliteTx<'a> {
    conn: &'a Connection,
    /// The same connection as the rules see it.
    rows: WriteConn<'a>,
}

impl WriteTx for SqliteTx<'_> {
    fn rows(&self) -> &dyn WriteRows {
        &self.rows
    }

    fn shared_state(&self) -> Result<Option<DbState>, StoreError> {
        // One writer per file: the writer's own counters are current.
        Ok(None)
    }

    fn savepoint(&self, job: &mut dyn FnMut(&dyn WriteRows) -> bool) -> Result<bool, StoreError> {
        // Writes run one after another: each savepoint is released (or
        // rolled back) before the next, so one name serves them all.
        self.conn.prepare_cached("SAVEPOINT job")?.execute([])?;
        let mark = self.rows.counts.mark();
        let kept = job(&self.rows);
        if !kept {
            self.conn.prepare_cached("ROLLBACK TO job")?.execute([])?;
            self.rows.counts.rollback_to(mark);
        }
        self.conn.prepare_cached("RELEASE job")?.execute([])?;
        Ok(kept)
    }

    fn save_state(&self, state: &DbState) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "UPDATE db_state SET update_seq = ?1, purge_seq = ?2, doc_count = ?3,
                 doc_del_count = ?4, external_size = ?5 WHERE id = 0",
            )?
            .execute(rusqlite::params![
                state.update_seq as i64,
                state.purge_seq as i64,
                state.doc_count as i64,
                state.doc_del_count as i64,
                state.external_size
            ])?;
        Ok(())
    }
}

/// The counters as the file has them.
pub(crate) fn load_state(conn: &Connection) -> Result<DbState, StoreError> {
    let (update_seq, purge_seq, doc_count, doc_del_count, external_size) = conn.query_row(
        "SELECT update_seq, purge_seq, doc_count, doc_del_count, external_size FROM db_state WHERE id = 0",
        [],
        |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, i64>(4)?,
            ))
        },
    )?;
    let next_doc_key: i64 =
        conn.query_row("SELECT COALESCE(MAX(doc_key), 0) + 1 FROM docs", [], |r| {
            r.get(0)
        })?;
    let revs_limit = crate::read_meta(conn, "revs_limit")?
        .and_then(|v| v.parse().ok())
        .unwrap_or(revtree::DEFAULT_REVS_LIMIT);
    Ok(DbState {
        update_seq: update_seq as u64,
        purge_seq: purge_seq as u64,
        doc_count: doc_count as u64,
        doc_del_count: doc_del_count as u64,
        external_size,
        next_doc_key,
        revs_limit,
        design_changed: false,
    })
}
