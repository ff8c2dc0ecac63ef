//! One Recliner database in PostgreSQL: snapshots for readers, and the
//! writer's session, whose every transaction first locks the database's
//! `recliner_dbs` row. That lock serializes the database's writers across
//! nodes: each group starts from the counters the last commit (of any node)
//! left, so sequences strictly increase and two edits of one document on
//! two nodes give one winner and one conflict, never a lost update.

use std::path::PathBuf;
use std::sync::Mutex;

use store::StoreError;
use store::backend::{
    ChangeListener, DbBackend, DbState, Garbage, ReadRows, WriteRows, WriteSession, WriteTx,
};

use crate::conn::{Lent, PgConn, Pool};
use crate::listener::Listener;
use crate::rows::{KnownMeta, PgRows};
use crate::text::texts;
use store::backend::WRITE_GROUP_META;

pub(crate) struct PgDb {
    pub(crate) name: String,
    pub(crate) db_id: i64,
    pub(crate) pool: Pool,
    pub(crate) index_dir: PathBuf,
    pub(crate) listener: Listener,
    /// This handle's registrations with the listener.
    pub(crate) listening: Mutex<Vec<u64>>,
}

impl PgDb {
    fn stop_listening(&self) {
        let tokens = std::mem::take(
            &mut *self
                .listening
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        for token in tokens {
            self.listener.unregister(self.db_id, token);
        }
    }
}

impl Drop for PgDb {
    fn drop(&mut self) {
        self.stop_listening();
    }
}

/// The counters of a database as its row holds them (locked when `lock`),
/// and the metadata every write group reads (`WRITE_GROUP_META`, `None`
/// where unset), in one round trip.
fn load_state(
    conn: &mut PgConn,
    db_id: i64,
    name: &str,
    lock: bool,
) -> Result<(DbState, KnownMeta), StoreError> {
    let sql = if lock {
        "SELECT d.update_seq, d.purge_seq, d.doc_count, d.doc_del_count, d.external_size,
                d.next_doc_key, m.key, m.value
         FROM recliner_dbs d LEFT JOIN recliner_meta m ON m.db_id = d.db_id AND m.key = ANY($2)
         WHERE d.db_id = $1 FOR UPDATE OF d"
    } else {
        "SELECT d.update_seq, d.purge_seq, d.doc_count, d.doc_del_count, d.external_size,
                d.next_doc_key, m.key, m.value
         FROM recliner_dbs d LEFT JOIN recliner_meta m ON m.db_id = d.db_id AND m.key = ANY($2)
         WHERE d.db_id = $1"
    };
    let rows = conn.query(sql, &[&db_id, &texts(WRITE_GROUP_META)])?;
    let Some(row) = rows.first() else {
        return Err(StoreError::DbNotFound(name.to_string()));
    };
    let mut meta: KnownMeta = WRITE_GROUP_META
        .iter()
        .map(|key| (key.to_string(), None))
        .collect();
    for found in &rows {
        if let (Some(key), Some(value)) = (found.opt_text(6)?, found.opt_text(7)?) {
            meta.insert(key, Some(value));
        }
    }
    let revs_limit = meta
        .get("revs_limit")
        .and_then(|value| value.as_deref()?.parse().ok())
        .unwrap_or(revtree::DEFAULT_REVS_LIMIT);
    let count = |i: usize| -> Result<u64, StoreError> { Ok(row.get::<i64>(i)?.max(0) as u64) };
    let state = DbState {
        update_seq: count(0)?,
        purge_seq: count(1)?,
        doc_count: count(2)?,
        doc_del_count: count(3)?,
        external_size: row.get(4)?,
        next_doc_key: row.get(5)?,
        revs_limit,
        design_changed: false,
    };
    Ok((state, meta))
}

/// Runs `op` in a transaction begun with `begin`; commits when it returns
/// `Ok(true)`, rolls back otherwise. A connection whose transaction could
/// not be ended is not pooled again.
fn in_transaction<T>(
    conn: &mut Lent,
    begin: &str,
    op: impl FnOnce(&mut PgConn) -> Result<(T, bool), StoreError>,
) -> Result<T, StoreError> {
    conn.batch(begin)?;
    let outcome = op(conn);
    let end = match &outcome {
        Ok((_, true)) => "COMMIT",
        _ => "ROLLBACK",
    };
    if let Err(e) = conn.batch(end) {
        conn.broken = true;
        if outcome.is_ok() {
            return Err(e);
        }
    }
    outcome.map(|(value, _)| value)
}

impl DbBackend for PgDb {
    fn open_writer(&self) -> Result<Box<dyn WriteSession>, StoreError> {
        Ok(Box::new(PgSession {
            conn: self.pool.get()?,
            db_id: self.db_id,
            name: self.name.clone(),
            channel: self.listener.channel().map(str::to_string),
        }))
    }

    fn read(
        &self,
        op: &mut dyn FnMut(&dyn ReadRows) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let mut conn = self.pool.get()?;
        in_transaction(
            &mut conn,
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
            |conn| {
                let rows = PgRows::new(conn, self.db_id, &self.name, self.listener.channel());
                // A read changes nothing: ending it either way is the same.
                op(&rows).map(|()| ((), true))
            },
        )
    }

    fn index_dir(&self) -> PathBuf {
        self.index_dir.clone()
    }

    fn garbage(&self, kept_extra_revs: u64) -> Result<Garbage, StoreError> {
        // Bodies of revisions beyond one per document (less the conflicts'
        // leaves the last compaction kept), at the average body size.
        let mut conn = self.pool.get()?;
        let row = conn.query_one(
            "SELECT (SELECT count(*) FROM recliner_revs WHERE db_id = $1),
                    (SELECT count(*) FROM recliner_docs WHERE db_id = $1),
                    (SELECT COALESCE(sum(octet_length(body)), 0)::bigint FROM recliner_revs WHERE db_id = $1)",
            &[&self.db_id],
        )?;
        let value = |i: usize| -> Result<u64, StoreError> { Ok(row.get::<i64>(i)?.max(0) as u64) };
        let (revs, docs, bytes) = (value(0)?, value(1)?, value(2)?);
        let stale = revs.saturating_sub(docs).saturating_sub(kept_extra_revs);
        let garbage = if revs == 0 {
            0
        } else {
            (bytes as u128 * stale as u128 / revs as u128) as u64
        };
        Ok(Garbage {
            file_size: bytes,
            garbage,
        })
    }

    fn sync(&self) -> Result<(), StoreError> {
        // A commit PostgreSQL acknowledged is durable (synchronous_commit).
        Ok(())
    }

    fn close(&self) {
        self.stop_listening();
    }

    fn listen(&self, listener: ChangeListener) {
        let token = self.listener.register(self.db_id, listener);
        self.listening
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(token);
    }
}

/// The writer's connection, held while its thread runs.
struct PgSession {
    conn: Lent,
    db_id: i64,
    name: String,
    channel: Option<String>,
}

impl WriteSession for PgSession {
    fn load_state(&mut self) -> Result<DbState, StoreError> {
        load_state(&mut self.conn, self.db_id, &self.name, false).map(|(state, _)| state)
    }

    fn transaction(
        &mut self,
        group: &mut dyn FnMut(&dyn WriteTx) -> Result<bool, StoreError>,
    ) -> Result<bool, StoreError> {
        let (db_id, name, channel) = (self.db_id, self.name.as_str(), self.channel.as_deref());
        in_transaction(&mut self.conn, "BEGIN", |conn| {
            // Taken first: every other node's writer of this database waits
            // here until this transaction ends.
            let (state, meta) = load_state(conn, db_id, name, true)?;
            let tx = PgTx {
                rows: PgRows::new(conn, db_id, name, channel),
                state,
            };
            tx.rows.know_meta(meta);
            let commit = group(&tx)?;
            if commit {
                tx.rows.flush()?;
            }
            Ok((commit, commit))
        })
    }
}

struct PgTx<'a> {
    rows: PgRows<'a>,
    /// The counters as the lock found them.
    state: DbState,
}

impl WriteTx for PgTx<'_> {
    fn rows(&self) -> &dyn WriteRows {
        &self.rows
    }

    fn shared_state(&self) -> Result<Option<DbState>, StoreError> {
        Ok(Some(self.state.clone()))
    }

    fn savepoint(&self, job: &mut dyn FnMut(&dyn WriteRows) -> bool) -> Result<bool, StoreError> {
        self.rows.begin_job();
        let kept = job(&self.rows);
        self.rows.end_job(kept)
    }

    fn save_state(&self, state: &DbState) -> Result<(), StoreError> {
        self.rows.save_state(state)
    }
}
