//! The single writer of a database: one thread that owns the write
//! session and groups every pending write into one transaction
//! (group commit), so fifty concurrent single-document writes cost one
//! commit rather than fifty. Each write runs inside its own savepoint: one
//! that fails is rolled back alone, and the others still commit.
//!
//! The thread runs only while writes come: it is started by a write and
//! ends (closing its connection) after `writer_idle_timeout` without one
//! (much sooner when many writers run), so a server with thousands of
//! databases holds threads for the ones being written, not for every one
//! ever touched. The queue in front of it
//! is bounded ([`QUEUE_DOCS`]): writers wait for room asynchronously.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot, watch};

use crate::StoreError;
use crate::backend::{DbBackend, DbState, WriteSession, WriteTx};

/// Upper bound on documents per group commit: large enough to amortize the
/// commit, small enough that one group never holds the write lock for long.
const MAX_GROUP_WEIGHT: usize = 20_000;

/// What a write sees: row storage (inside its savepoint) and the state.
pub(crate) struct WriteCtx<'a> {
    pub rows: &'a dyn crate::backend::WriteRows,
    pub state: &'a mut DbState,
    /// The database's `max_attachment_size`, for checks of declared lengths.
    pub max_attachment_size: u64,
    /// A partition at this size takes no more edits; 0 when the database
    /// is not partitioned or has no limit.
    pub max_partition_size: u64,
    /// The database keeps an access index (`?access=true`).
    pub access: bool,
}

impl<'a> WriteCtx<'a> {
    fn new(
        rows: &'a dyn crate::backend::WriteRows,
        state: &'a mut DbState,
        limits: WriteLimits,
    ) -> WriteCtx<'a> {
        WriteCtx {
            rows,
            state,
            max_attachment_size: limits.max_attachment_size,
            max_partition_size: limits.max_partition_size,
            access: limits.access,
        }
    }
}

/// The limits a group of writes checks, read once per group.
#[derive(Debug, Clone, Copy)]
struct WriteLimits {
    max_attachment_size: u64,
    max_partition_size: u64,
    /// The finest interval of the time bins each commit is recorded in.
    time_seq_resolution: u64,
    access: bool,
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
    /// The ids of the documents it will load, if known before it runs: a
    /// group of many writes loads them all in one look-up where a backend
    /// pays per round trip.
    fn doc_ids(&self) -> &[String] {
        &[]
    }
}

/// A write whose closure yields a typed result for an async caller.
pub(crate) struct TypedJob<T, F> {
    op: Option<F>,
    weight: usize,
    doc_ids: Vec<String>,
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
                doc_ids: Vec::new(),
                result: None,
                reply,
            },
            rx,
        )
    }

    /// Names the documents the write will load (see [`WriteJob::doc_ids`]).
    pub(crate) fn loading(mut self, doc_ids: Vec<String>) -> Self {
        self.doc_ids = doc_ids;
        self
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

    fn doc_ids(&self) -> &[String] {
        &self.doc_ids
    }
}

/// Writer threads running in the process (every store's: threads and
/// memory are the process's).
static RUNNING_WRITERS: AtomicUsize = AtomicUsize::new(0);

/// Writer threads that may wait the whole `idle_timeout` for their next
/// write. Past this many, a writer waits [`CROWDED_IDLE_TIMEOUT`] only:
/// when writes are spread over many databases (one per user), a database
/// quiet for a moment is unlikely to be written again soon, and its thread
/// and connection (~200 KiB) are worth more than the half millisecond a
/// restart costs. Without this, 5,000 databases written once each kept
/// ~500 writer threads waiting (one per open database).
const WRITERS_KEPT_WAITING: usize = 64;

/// How long a writer waits for its next write when more than
/// [`WRITERS_KEPT_WAITING`] run.
const CROWDED_IDLE_TIMEOUT: Duration = Duration::from_millis(100);

/// Counts a writer thread in [`RUNNING_WRITERS`] while it lives.
struct CountedWriter;

impl CountedWriter {
    fn start() -> CountedWriter {
        RUNNING_WRITERS.fetch_add(1, Ordering::Relaxed);
        CountedWriter
    }
}

impl Drop for CountedWriter {
    fn drop(&mut self) {
        RUNNING_WRITERS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How long a writer waits for its next write before it ends.
fn idle_wait(idle_timeout: Duration) -> Duration {
    if RUNNING_WRITERS.load(Ordering::Relaxed) > WRITERS_KEPT_WAITING {
        idle_timeout.min(CROWDED_IDLE_TIMEOUT)
    } else {
        idle_timeout
    }
}

/// Documents a database's write queue holds at most: one full group. A
/// write waits for room (asynchronously: no executor thread is blocked)
/// before it is queued, so a flood of writes to one database cannot grow
/// memory without limit, and the writer can still fill its next group from
/// the queue while it commits the one before. A write heavier than this
/// takes the whole queue.
pub(crate) const QUEUE_DOCS: usize = MAX_GROUP_WEIGHT;

/// Messages to the writer thread.
pub(crate) enum Msg {
    /// A write, and its room in the queue (given back when the writer takes
    /// it into a group).
    Job(Box<dyn WriteJob>, OwnedSemaphorePermit),
    /// Stop after the writes already queued; the sender learns when the
    /// connection is closed.
    Close(std::sync::mpsc::Sender<()>),
}

/// What a writer thread needs to open its session and serve writes.
#[derive(Clone)]
pub(crate) struct WriterConfig {
    pub db_name: String,
    pub backend: Arc<dyn DbBackend>,
    /// `max_attachment_size` and the other settings that change at run time.
    pub live: std::sync::Arc<crate::LiveSettings>,
    /// How long a writer thread waits for the next write before it closes
    /// its connection and ends.
    pub idle_timeout: Duration,
    /// The database is partitioned (its partitions have a size limit).
    pub partitioned: bool,
    /// The database keeps an access index (`?access=true`).
    pub access: bool,
}

/// A database's writer as its handles see it: a bounded queue, and the
/// thread serving it, started by the first write and ended after
/// `idle_timeout` without one. An idle database therefore holds no thread
/// and no write connection: a server with thousands of databases spends
/// threads only on the ones being written. The queue and the
/// update-sequence channel belong to the handle and outlive every thread,
/// so a write queued while a thread ends is served by the next one, and
/// feeds keep waiting across restarts.
pub(crate) struct WriterHandle {
    queue: Sender<Msg>,
    room: Arc<Semaphore>,
    shared: Arc<Shared>,
    seq_rx: watch::Receiver<u64>,
}

/// What the handle and whichever writer thread runs share.
struct Shared {
    config: WriterConfig,
    thread: Mutex<ThreadState>,
    /// Bumped with `update_seq` after each commit: wakes changes feeds.
    /// Taken (so that every receiver sees the channel closed) when the
    /// database closes.
    seq_tx: Mutex<Option<watch::Sender<u64>>>,
    commits: AtomicU64,
    /// The update sequence of this process's last commit (or the one the
    /// database was opened at).
    own_seq: AtomicU64,
    /// See [`WriterHandle::design_generation`].
    design_generation: AtomicU64,
}

/// Design generations, unique in the process: a database opened again
/// never repeats one it had.
static NEXT_DESIGN_GENERATION: AtomicU64 = AtomicU64::new(1);

fn new_design_generation() -> u64 {
    NEXT_DESIGN_GENERATION.fetch_add(1, Ordering::Relaxed)
}

/// Who holds the queue's receiving end.
enum ThreadState {
    /// No thread runs: the receiver waits here for the next one.
    Idle(Receiver<Msg>),
    /// A thread owns the receiver; it puts it back here when it ends idle.
    Running,
    /// The database was closed: the receiver is gone, writes are refused.
    Closed,
}

/// The writer no longer takes writes: its database was closed or deleted.
#[derive(Debug)]
pub(crate) struct Closed;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl WriterHandle {
    /// A writer with no thread yet, for a database at `update_seq`.
    pub(crate) fn new(config: WriterConfig, update_seq: u64) -> WriterHandle {
        let (queue, rx) = std::sync::mpsc::channel();
        let (seq_tx, seq_rx) = watch::channel(update_seq);
        WriterHandle {
            queue,
            room: Arc::new(Semaphore::new(QUEUE_DOCS)),
            shared: Arc::new(Shared {
                config,
                thread: Mutex::new(ThreadState::Idle(rx)),
                seq_tx: Mutex::new(Some(seq_tx)),
                commits: AtomicU64::new(0),
                own_seq: AtomicU64::new(update_seq),
                design_generation: AtomicU64::new(new_design_generation()),
            }),
            seq_rx,
        }
    }

    /// Takes a commit another process made: wakes feeds, and moves the
    /// design generation when it changed a design document.
    pub(crate) fn remote_commit(&self, update_seq: u64, design_changed: bool) {
        if design_changed {
            self.shared
                .design_generation
                .store(new_design_generation(), Ordering::Release);
        }
        // Not an event of this node's: the node that committed records it
        // for `_db_updates` (in the database they share).
        self.shared.advance(update_seq);
    }

    /// Queues a write of `weight` documents, waiting for room first, and
    /// starts a writer thread if none runs.
    pub(crate) async fn submit(&self, weight: usize, job: Box<dyn WriteJob>) -> Result<(), Closed> {
        let places = u32::try_from(weight.clamp(1, QUEUE_DOCS)).unwrap_or(u32::MAX);
        let room = self
            .room
            .clone()
            .acquire_many_owned(places)
            .await
            .map_err(|_| Closed)?;
        self.queue.send(Msg::Job(job, room)).map_err(|_| Closed)?;
        // After the send: a thread that ends idle checks the queue once
        // more under this lock, so either it sees the write or this sees
        // it gone and starts another.
        self.start_thread();
        Ok(())
    }

    /// Starts a thread on the queue if none runs.
    fn start_thread(&self) {
        let mut state = lock(&self.shared.thread);
        if let ThreadState::Idle(_) = &*state
            && let ThreadState::Idle(rx) = std::mem::replace(&mut *state, ThreadState::Running)
        {
            self.spawn(&mut state, rx, None);
        }
    }

    /// Starts a thread on `rx` (`first` is a message already taken from
    /// it), with the state locked and set to `Running`. If the thread
    /// cannot be started, what is queued is answered with the error rather
    /// than left waiting, and the receiver goes back to `Idle`.
    fn spawn(&self, state: &mut ThreadState, rx: Receiver<Msg>, first: Option<Msg>) {
        // Kept here too, so the receiver comes back if the spawn fails.
        let handoff = Arc::new(Mutex::new(Some((rx, first))));
        let shared = self.shared.clone();
        let taken = handoff.clone();
        let thread_name: String = format!("writer:{}", self.shared.config.db_name)
            .chars()
            .take(15)
            .collect();
        let spawned = std::thread::Builder::new()
            .name(thread_name)
            // It drops documents as deep as `ejson::MAX_DEPTH`.
            .stack_size(ejson::THREAD_STACK)
            .spawn(move || {
                let handed = lock(&taken).take();
                if let Some((rx, first)) = handed {
                    serve(shared, rx, first);
                }
            });
        if let Err(e) = spawned
            && let Some((rx, first)) = lock(&handoff).take()
        {
            let reason = format!("cannot start the database's writer: {e}");
            tracing::error!(db = %self.shared.config.db_name, error = %e, "cannot start a writer thread");
            if let Some(msg) = first {
                fail(msg, &reason);
            }
            while let Ok(msg) = rx.try_recv() {
                fail(msg, &reason);
            }
            *state = ThreadState::Idle(rx);
        }
    }

    /// Stops the writer after the writes queued before, refuses later ones,
    /// and closes the update-sequence channel (feeds waiting on it end).
    /// Blocks until no connection of the writer is left.
    pub(crate) fn close(&self) {
        self.room.close();
        let (ack_tx, ack_rx) = std::sync::mpsc::channel();
        if self.queue.send(Msg::Close(ack_tx)).is_ok() {
            let mut state = lock(&self.shared.thread);
            if let ThreadState::Idle(_) = &*state
                && let ThreadState::Idle(rx) = std::mem::replace(&mut *state, ThreadState::Closed)
            {
                // No thread runs. Usually only this close is queued and
                // there is nothing to do; writes other handles queued just
                // before it get a thread to finish them.
                match rx.try_recv() {
                    Ok(Msg::Close(ack)) => {
                        drop(rx);
                        let _ = ack.send(());
                    }
                    Ok(first) => {
                        *state = ThreadState::Running;
                        self.spawn(&mut state, rx, Some(first));
                        if let ThreadState::Idle(_) = &*state {
                            // No thread could start; everything was answered.
                            *state = ThreadState::Closed;
                        }
                    }
                    Err(_) => {}
                }
            }
            drop(state);
            // Answered by the thread, or an error once the queue is gone.
            let _ = ack_rx.recv();
        }
        lock(&self.shared.seq_tx).take();
    }

    /// The latest committed update sequence.
    pub(crate) fn update_seq(&self) -> u64 {
        *self.seq_rx.borrow()
    }

    /// A receiver that changes with every commit that moves the sequence.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.seq_rx.clone()
    }

    /// Whether a receiver of the update-sequence channel is held outside
    /// this handle: someone is waiting for changes.
    pub(crate) fn has_subscribers(&self) -> bool {
        lock(&self.shared.seq_tx)
            .as_ref()
            .is_some_and(|tx| tx.receiver_count() > 1)
    }

    /// Whether a writer thread runs now.
    pub(crate) fn is_running(&self) -> bool {
        matches!(*lock(&self.shared.thread), ThreadState::Running)
    }

    /// A number that changes whenever a committed write changed a design
    /// document: what is cached from design documents (validation
    /// functions) stays good while it stays the same.
    pub(crate) fn design_generation(&self) -> u64 {
        self.shared.design_generation.load(Ordering::Acquire)
    }

    /// Transactions committed since the database was opened.
    pub(crate) fn commits(&self) -> u64 {
        self.shared.commits.load(Ordering::Relaxed)
    }
}

impl Shared {
    /// Wakes changes feeds when the committed update sequence moved.
    fn publish(&self, update_seq: u64) {
        // Compared with this writer's own last commit, not with the feeds'
        // sequence: another node's notice of this commit may come first.
        let before = self.own_seq.fetch_max(update_seq, Ordering::AcqRel);
        self.advance(update_seq);
        if update_seq > before {
            self.config
                .live
                .events
                .note(crate::db_events::DbEventType::Updated, &self.config.db_name);
        }
    }

    /// Moves the feeds' update sequence forward (wakes them). Only forward:
    /// another node's commit may be reported after a later one of this node.
    fn advance(&self, update_seq: u64) {
        if let Some(tx) = lock(&self.seq_tx).as_ref() {
            tx.send_if_modified(|seq| {
                let changed = update_seq > *seq;
                if changed {
                    *seq = update_seq;
                }
                changed
            });
        }
    }
}

/// Answers a message that will not be served.
fn fail(msg: Msg, reason: &str) {
    match msg {
        Msg::Job(job, _room) => {
            let _ = panic::catch_unwind(AssertUnwindSafe(|| job.finish(Some(reason))));
        }
        Msg::Close(ack) => {
            let _ = ack.send(());
        }
    }
}

/// What one writer thread opened: the write session and the counters read
/// from it. Closed when the thread goes idle, reopened by the next.
struct Session {
    writes: Box<dyn WriteSession>,
    state: DbState,
}

impl Session {
    fn open(config: &WriterConfig) -> Result<Session, StoreError> {
        let mut writes = config.backend.open_writer()?;
        let state = writes.load_state()?;
        Ok(Session { writes, state })
    }

    fn reload(&mut self, db_name: &str) {
        match self.writes.load_state() {
            Ok(fresh) => self.state = fresh,
            Err(e) => {
                tracing::error!(db = %db_name, error = %e, "cannot reload the database state")
            }
        }
    }
}

/// A writer thread's loop: take every queued write, run them in one
/// transaction, commit, then answer each and wake change listeners. After
/// `idle_timeout` without a write the thread closes its connection, hands
/// the queue back and ends; a close request ends it at once.
///
/// A panic never ends the loop. One inside a write fails that write alone
/// ([`run_job`]); one anywhere else in a group rolls the group back, its
/// writes are answered with an error, the counters are reloaded from the
/// file, and the writer goes on with the next group.
fn serve(shared: Arc<Shared>, rx: Receiver<Msg>, mut first: Option<Msg>) {
    let _counted = CountedWriter::start();
    let config = &shared.config;
    let mut session: Option<Session> = None;
    let mut pending_close = None;
    while pending_close.is_none() {
        let msg = match first.take() {
            Some(msg) => msg,
            None => match rx.recv_timeout(idle_wait(config.idle_timeout)) {
                Ok(msg) => msg,
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    session = None;
                    // Checked under the lock writers take after queueing:
                    // a write queued before this is served here, one queued
                    // after finds the receiver back and starts a thread.
                    let mut state = lock(&shared.thread);
                    match rx.try_recv() {
                        Ok(msg) => msg,
                        Err(_) => {
                            *state = ThreadState::Idle(rx);
                            return;
                        }
                    }
                }
            },
        };
        if let Msg::Close(ack) = msg {
            pending_close = Some(ack);
            break;
        }
        let session = match &mut session {
            Some(session) => session,
            None => match Session::open(config) {
                Ok(opened) => session.insert(opened),
                Err(e) => {
                    tracing::error!(db = %config.db_name, error = %e, "the writer cannot open the database");
                    fail(msg, &e.to_string());
                    continue;
                }
            },
        };
        let served = panic::catch_unwind(AssertUnwindSafe(|| {
            serve_group(msg, &rx, session, &mut pending_close, &shared)
        }));
        if served.is_err() {
            tracing::error!(db = %config.db_name, "the writer panicked: its group was rolled back, the writer goes on");
            session.reload(&config.db_name);
        }
        shared.publish(session.state.update_seq);
    }
    drop(session);
    *lock(&shared.thread) = ThreadState::Closed;
    // Writes queued after the close are dropped with the receiver: their
    // callers learn that the writer stopped.
    drop(rx);
    if let Some(ack) = pending_close {
        let _ = ack.send(());
    }
}

/// Takes `first` and whatever else is queued (up to a group's weight), runs
/// them in one transaction and answers each.
fn serve_group(
    first: Msg,
    rx: &Receiver<Msg>,
    session: &mut Session,
    pending_close: &mut Option<std::sync::mpsc::Sender<()>>,
    shared: &Shared,
) {
    let mut jobs: Vec<Box<dyn WriteJob>> = Vec::new();
    let mut weight = 0;
    match first {
        Msg::Job(job, room) => {
            drop(room);
            weight += job.weight();
            jobs.push(job);
        }
        Msg::Close(ack) => *pending_close = Some(ack),
    }
    while pending_close.is_none() && weight < MAX_GROUP_WEIGHT {
        match rx.try_recv() {
            Ok(Msg::Job(job, room)) => {
                drop(room);
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
    let db_name = &shared.config.db_name;
    let limits = WriteLimits {
        max_attachment_size: shared.config.live.max_attachment_size(),
        max_partition_size: if shared.config.partitioned {
            shared.config.live.max_partition_size()
        } else {
            0
        },
        time_seq_resolution: shared.config.live.time_seq_resolution(),
        access: shared.config.access,
    };
    let commit_error = run_group(
        session.writes.as_mut(),
        &mut session.state,
        limits,
        &mut jobs,
    )
    .err();
    if commit_error.is_none() {
        shared.commits.fetch_add(1, Ordering::Relaxed);
    }
    if std::mem::take(&mut session.state.design_changed) {
        // After the commit (or its failure): a reader that saw the old
        // generation read the old design documents.
        shared
            .design_generation
            .store(new_design_generation(), Ordering::Release);
    }
    if let Some(e) = &commit_error {
        tracing::error!(db = %db_name, error = %e, "group commit failed");
        // Whatever the failure, the in-memory counters must match storage.
        session.reload(db_name);
    }
    // Published before any write is answered: whoever got an answer sees
    // the new sequence.
    shared.publish(session.state.update_seq);
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
    tx: &dyn WriteTx,
    job: &mut dyn WriteJob,
    working: &mut DbState,
    limits: WriteLimits,
) {
    let before = working.clone();
    let kept = tx.savepoint(&mut |rows| run_job(job, &mut WriteCtx::new(rows, working, limits)));
    match kept {
        Ok(true) => {}
        Ok(false) => *working = before,
        Err(e) => {
            job.abort(e.to_string());
            *working = before;
        }
    }
}

/// Runs a group in one transaction; `state` is replaced by the counters
/// it leaves once it has committed.
fn run_group(
    session: &mut dyn WriteSession,
    state: &mut DbState,
    limits: WriteLimits,
    jobs: &mut [Box<dyn WriteJob>],
) -> Result<(), String> {
    let mut committed = None;
    session
        .transaction(&mut |tx| {
            let mut working = match tx.shared_state()? {
                Some(fresh) => fresh,
                None => state.clone(),
            };
            let start = working.clone();
            if let [job] = &mut *jobs {
                // A lone write needs no savepoint: if it fails, the whole
                // transaction is rolled back instead.
                if !run_job(
                    job.as_mut(),
                    &mut WriteCtx::new(tx.rows(), &mut working, limits),
                ) {
                    return Ok(false);
                }
            } else {
                let ids: Vec<&str> = jobs
                    .iter()
                    .flat_map(|job| job.doc_ids())
                    .map(String::as_str)
                    .collect();
                if !ids.is_empty() {
                    tx.rows().prefetch_docs(&ids)?;
                }
                for job in jobs.iter_mut() {
                    run_in_savepoint(tx, job.as_mut(), &mut working, limits);
                }
            }
            if working.update_seq != start.update_seq {
                // Dated in the same transaction: a commit and its place
                // in time are kept together or not at all.
                crate::time_seq::record_commit(
                    tx.rows(),
                    start.update_seq,
                    limits.time_seq_resolution,
                )?;
            }
            if working != start {
                tx.save_state(&working)?;
            }
            committed = Some(working);
            Ok(true)
        })
        .map_err(|e| e.to_string())?;
    if let Some(working) = committed {
        *state = working;
    }
    Ok(())
}
