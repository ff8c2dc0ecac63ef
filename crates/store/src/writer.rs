//! The single writer of a database: one thread that owns the write
//! connection and groups every pending write into one SQLite transaction
//! (group commit), so fifty concurrent single-document writes cost one
//! commit rather than fifty. Each write runs inside its own savepoint: one
//! that fails is rolled back alone, and the others still commit.

use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};

use rusqlite::{Connection, TransactionBehavior};
use tokio::sync::{oneshot, watch};

use crate::StoreError;
use crate::checkpoint::Checkpointer;

/// Upper bound on documents per group commit: large enough to amortize the
/// commit, small enough that one group never holds the write lock for long.
const MAX_GROUP_WEIGHT: usize = 20_000;

/// The counters a database keeps in its `db_state` row, mirrored in memory
/// by the writer and only replaced after a successful commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DbState {
    pub update_seq: u64,
    pub purge_seq: u64,
    pub doc_count: u64,
    pub doc_del_count: u64,
    pub external_size: i64,
    pub next_doc_key: i64,
    pub revs_limit: u32,
}

impl DbState {
    pub(crate) fn load(conn: &Connection) -> Result<DbState, StoreError> {
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
        let revs_limit = crate::database::read_meta(conn, "revs_limit")?
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
        })
    }

    fn save(&self, conn: &Connection) -> rusqlite::Result<()> {
        conn.prepare_cached(
            "UPDATE db_state SET update_seq = ?1, purge_seq = ?2, doc_count = ?3,
             doc_del_count = ?4, external_size = ?5 WHERE id = 0",
        )?
        .execute(rusqlite::params![
            self.update_seq as i64,
            self.purge_seq as i64,
            self.doc_count as i64,
            self.doc_del_count as i64,
            self.external_size
        ])?;
        Ok(())
    }
}

/// What a write sees: the connection (inside its savepoint) and the state.
pub(crate) struct WriteCtx<'a> {
    pub conn: &'a Connection,
    pub state: &'a mut DbState,
    /// The database's `max_attachment_size`, for checks of declared lengths.
    pub max_attachment_size: u64,
}

/// A write waiting for the writer thread.
pub(crate) trait WriteJob: Send {
    /// Runs the write inside the open transaction; false if it failed (its
    /// savepoint is then rolled back).
    fn run(&mut self, ctx: &mut WriteCtx<'_>) -> bool;
    /// Marks a write that ran but could not be kept (its savepoint failed).
    fn abort(&mut self, reason: String);
    /// Reports the outcome once the group has committed (or failed to).
    fn finish(self: Box<Self>, commit_error: Option<&str>);
    /// Documents in this write, for sizing groups.
    fn weight(&self) -> usize;
}

/// A write whose closure yields a typed result for an async caller.
pub(crate) struct TypedJob<T, F> {
    op: Option<F>,
    weight: usize,
    result: Option<Result<T, StoreError>>,
    reply: oneshot::Sender<Result<T, StoreError>>,
}

impl<T, F> TypedJob<T, F>
where
    T: Send + 'static,
    F: FnOnce(&mut WriteCtx<'_>) -> Result<T, StoreError> + Send + 'static,
{
    pub(crate) fn new(weight: usize, op: F) -> (Self, oneshot::Receiver<Result<T, StoreError>>) {
        let (reply, rx) = oneshot::channel();
        (
            TypedJob {
                op: Some(op),
                weight,
                result: None,
                reply,
            },
            rx,
        )
    }
}

impl<T, F> WriteJob for TypedJob<T, F>
where
    T: Send + 'static,
    F: FnOnce(&mut WriteCtx<'_>) -> Result<T, StoreError> + Send + 'static,
{
    fn run(&mut self, ctx: &mut WriteCtx<'_>) -> bool {
        let Some(op) = self.op.take() else {
            return false;
        };
        let result = op(ctx);
        let ok = result.is_ok();
        self.result = Some(result);
        ok
    }

    fn abort(&mut self, reason: String) {
        self.result = Some(Err(StoreError::CommitFailed(reason)));
    }

    fn finish(self: Box<Self>, commit_error: Option<&str>) {
        let result = match (commit_error, self.result) {
            (Some(e), _) => Err(StoreError::CommitFailed(e.to_string())),
            (None, Some(result)) => result,
            (None, None) => Err(StoreError::CommitFailed("the write did not run".into())),
        };
        let _ = self.reply.send(result);
    }

    fn weight(&self) -> usize {
        self.weight
    }
}

/// Messages to the writer thread.
pub(crate) enum Msg {
    Job(Box<dyn WriteJob>),
    /// Stop after the writes already queued; the sender learns when the
    /// connection is closed.
    Close(std::sync::mpsc::Sender<()>),
}

/// Everything the writer thread owns.
pub(crate) struct Writer {
    pub conn: Connection,
    pub rx: Receiver<Msg>,
    pub state: DbState,
    /// Bumped with `update_seq` after each commit: wakes changes feeds.
    pub seq_tx: watch::Sender<u64>,
    pub db_name: String,
    pub commits: Arc<AtomicU64>,
    pub checkpointer: Checkpointer,
    pub max_attachment_size: u64,
}

/// The writer thread's loop: take every queued write, run them in one
/// transaction, commit, then answer each and wake change listeners.
///
/// A panic never ends the loop. One inside a write fails that write alone
/// ([`run_job`]); one anywhere else in a group rolls the group back, its
/// writes are answered with an error, the counters are reloaded from the
/// file, and the writer goes on with the next group.
pub(crate) fn run(writer: Writer) {
    let Writer {
        mut conn,
        rx,
        mut state,
        seq_tx,
        db_name,
        commits,
        checkpointer,
        max_attachment_size,
    } = writer;
    let mut pending_close = None;
    while pending_close.is_none() {
        let Ok(first) = rx.recv() else { break };
        let served = panic::catch_unwind(AssertUnwindSafe(|| {
            let group = Group {
                conn: &mut conn,
                state: &mut state,
                max_attachment_size,
            };
            serve_group(first, &rx, group, &mut pending_close, &seq_tx, &commits, &db_name)
        }));
        if served.is_err() {
            tracing::error!(db = %db_name, "the writer panicked: its group was rolled back, the writer goes on");
            match DbState::load(&conn) {
                Ok(fresh) => state = fresh,
                Err(e) => {
                    tracing::error!(db = %db_name, error = %e, "cannot reload the database state")
                }
            }
        }
        seq_tx.send_if_modified(|seq| {
            let changed = *seq != state.update_seq;
            *seq = state.update_seq;
            changed
        });
    }
    // The connection holds the checkpointer's wake-up handle: close it
    // first, then wait for the checkpointer, so no connection to the file
    // is left when the close is acknowledged (the file may be deleted next).
    drop(conn);
    checkpointer.stop();
    if let Some(ack) = pending_close {
        let _ = ack.send(());
    }
}

/// Takes `first` and whatever else is queued (up to a group's weight), runs
/// them in one transaction and answers each.
/// What a group of writes runs against.
struct Group<'a> {
    conn: &'a mut Connection,
    state: &'a mut DbState,
    max_attachment_size: u64,
}

fn serve_group(
    first: Msg,
    rx: &Receiver<Msg>,
    group: Group<'_>,
    pending_close: &mut Option<std::sync::mpsc::Sender<()>>,
    seq_tx: &watch::Sender<u64>,
    commits: &AtomicU64,
    db_name: &str,
) {
    let mut jobs: Vec<Box<dyn WriteJob>> = Vec::new();
    let mut weight = 0;
    match first {
        Msg::Job(job) => {
            weight += job.weight();
            jobs.push(job);
        }
        Msg::Close(ack) => *pending_close = Some(ack),
    }
    while pending_close.is_none() && weight < MAX_GROUP_WEIGHT {
        match rx.try_recv() {
            Ok(Msg::Job(job)) => {
                weight += job.weight();
                jobs.push(job);
            }
            Ok(Msg::Close(ack)) => *pending_close = Some(ack),
            Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
        }
    }
    if jobs.is_empty() {
        return;
    }
    let Group {
        conn,
        state,
        max_attachment_size,
    } = group;
    let commit_error = run_group(conn, state, max_attachment_size, &mut jobs).err();
    if commit_error.is_none() {
        commits.fetch_add(1, Ordering::Relaxed);
    }
    if let Some(e) = &commit_error {
        tracing::error!(db = %db_name, error = %e, "group commit failed");
        // Whatever the failure, the in-memory counters must match the file.
        if let Ok(fresh) = DbState::load(conn) {
            *state = fresh;
        }
    }
    // Published before any write is answered: whoever got an answer sees
    // the new sequence.
    publish_seq(seq_tx, state);
    for job in jobs {
        // Each answer on its own: a panic while answering one write must
        // not leave the others of a committed group unanswered.
        let answered =
            panic::catch_unwind(AssertUnwindSafe(|| job.finish(commit_error.as_deref())));
        if answered.is_err() {
            tracing::error!(db = %db_name, "answering a write panicked");
        }
    }
}

/// Wakes changes feeds when the committed update sequence moved.
fn publish_seq(seq_tx: &watch::Sender<u64>, state: &DbState) {
    seq_tx.send_if_modified(|seq| {
        let changed = *seq != state.update_seq;
        *seq = state.update_seq;
        changed
    });
}

/// Runs one write; a panic inside it fails this write alone (the caller
/// rolls back its changes) instead of taking the writer down.
fn run_job(job: &mut dyn WriteJob, ctx: &mut WriteCtx<'_>) -> bool {
    match panic::catch_unwind(AssertUnwindSafe(|| job.run(ctx))) {
        Ok(ok) => ok,
        Err(_) => {
            tracing::error!("a write panicked; it was rolled back alone");
            job.abort("the write failed on an internal error".into());
            false
        }
    }
}

/// Runs one write of a group inside its own savepoint; a failed write is
/// rolled back alone and leaves `working` as it was.
fn run_in_savepoint(
    tx: &mut rusqlite::Transaction<'_>,
    job: &mut dyn WriteJob,
    working: &mut DbState,
    max_attachment_size: u64,
) {
    let before = working.clone();
    let ok = match tx.savepoint() {
        Ok(mut sp) => {
            let ok = run_job(
                job,
                &mut WriteCtx {
                    conn: &sp,
                    state: working,
                    max_attachment_size,
                },
            );
            if ok {
                match sp.commit() {
                    Ok(()) => true,
                    Err(e) => {
                        job.abort(e.to_string());
                        false
                    }
                }
            } else {
                let _ = sp.rollback();
                false
            }
        }
        Err(_) => false,
    };
    if !ok {
        *working = before;
    }
}

fn run_group(
    conn: &mut Connection,
    state: &mut DbState,
    max_attachment_size: u64,
    jobs: &mut [Box<dyn WriteJob>],
) -> Result<(), String> {
    let mut tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| e.to_string())?;
    let mut working = state.clone();
    if let [job] = jobs {
        // A lone write needs no savepoint: if it fails, the whole
        // transaction is rolled back instead.
        if !run_job(
            job.as_mut(),
            &mut WriteCtx {
                conn: &tx,
                state: &mut working,
                max_attachment_size,
            },
        ) {
            return Ok(());
        }
    } else {
        for job in jobs.iter_mut() {
            run_in_savepoint(&mut tx, job.as_mut(), &mut working, max_attachment_size);
        }
    }
    if working != *state {
        working.save(&tx).map_err(|e| e.to_string())?;
    }
    tx.commit().map_err(|e| e.to_string())?;
    *state = working;
    Ok(())
}
