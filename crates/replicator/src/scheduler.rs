//! The scheduler: every replication job of one server, whoever asked for it
//! (`/_replicate` or a `_replicator` document), with at most `max_jobs`
//! moving data at once. Jobs over the limit wait as `pending`; every
//! `interval` running jobs make room for waiting ones, at most `max_churn`
//! at a time, so that all jobs make progress: which ones is decided by
//! fair share between replicator databases (see [`crate::share`]), then by
//! time. A continuous job that caught up parks without a slot until its
//! source changes. A job that fails is `crashing` and waits an exponential
//! backoff before it runs again.
//!
//! The scheduler also keeps what `_scheduler/docs` shows of each
//! `_replicator` document (its state, including the final `completed` and
//! `failed` ones the documents manager records).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};
use store::Store;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::job::{self, Progress, ProgressSnapshot, ReplicationError, RunEnd};
use crate::peer::http::remote_feed::RemoteFeeds;
use crate::peer::{Endpoint, HttpOptions};
use crate::rep_id::job_id;
use crate::share::{self, FairShare};
use crate::spec::{ReplicationSpec, SpecDefaults, SpecError};

/// The scheduler's limits; the defaults are CouchDB's.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedulerConfig {
    /// Jobs running at once; the others wait as `pending`.
    pub max_jobs: usize,
    /// How often waiting jobs take turns with running ones.
    pub interval: Duration,
    /// Jobs stopped and started per turn, so rotation never thrashes.
    pub max_churn: usize,
    /// Events kept in each job's history.
    pub max_history: usize,
    /// The first wait after a crash; doubles with each consecutive crash.
    pub backoff_base: Duration,
    /// The backoff stops doubling after this many consecutive crashes.
    pub max_backoff_doublings: u32,
    /// A job that ran this long before crashing is healthy again: its
    /// backoff starts over.
    pub health_threshold: Duration,
    /// How long a job runs before a woken job (a parked one whose source
    /// changed) may take its slot when none is free.
    pub first_turn: Duration,
    /// What replications take for the options their requests leave out.
    pub spec_defaults: SpecDefaults,
    /// Shares of the running slots by replicator database (CouchDB's
    /// `[replicator.shares]`); others have [`share::DEFAULT_SHARES`].
    pub shares: BTreeMap<String, u32>,
}

impl Default for SchedulerConfig {
    fn default() -> SchedulerConfig {
        SchedulerConfig {
            max_jobs: 500,
            interval: Duration::from_secs(60),
            max_churn: 20,
            max_history: 20,
            backoff_base: Duration::from_secs(30),
            max_backoff_doublings: 10,
            health_threshold: Duration::from_secs(120),
            first_turn: Duration::from_secs(5),
            spec_defaults: SpecDefaults::default(),
            shares: BTreeMap::new(),
        }
    }
}

/// Who asked for a job.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Owner {
    /// `POST /_replicate`: a crash ends it (CouchDB does not retry these).
    Transient,
    /// A `_replicator` document: retried after crashes until removed.
    Doc { db: String, doc_id: String },
}

/// What happened to a job, newest first in its history.
#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    Added,
    Started,
    Stopped,
    Crashed(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub at: SystemTime,
    /// The same moment on the monotonic clock, for backoff arithmetic.
    at_instant: Instant,
    pub kind: EventKind,
}

/// A job's state as CouchDB 3 names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    Pending,
    Running,
    Crashing,
}

impl JobState {
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::Running => "running",
            JobState::Crashing => "crashing",
        }
    }
}

/// How many jobs are in each state (see [`Scheduler::job_counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobCounts {
    pub running: usize,
    pub pending: usize,
    /// Waiting out the backoff after a crash (CouchDB's `crashed` gauge).
    pub crashing: usize,
}

impl JobCounts {
    /// Every job the scheduler holds.
    pub fn total(&self) -> usize {
        self.running + self.pending + self.crashing
    }
}

/// How a job ended, for whoever waits on it.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A one-shot job reached the end: its final log.
    Completed(Value),
    /// A transient job crashed (`error` is CouchDB's error name), or was cancelled.
    Failed { error: &'static str, reason: String },
}

/// A one-shot `_replicator` job that reached the end: the documents manager
/// records it in the document.
#[derive(Debug, Clone, PartialEq)]
pub struct DocCompleted {
    pub db: String,
    pub doc_id: String,
    /// `_replication_stats`.
    pub stats: Value,
}

/// A job as `_scheduler/jobs` and `_active_tasks` show it (no credentials).
#[derive(Debug, Clone, PartialEq)]
pub struct JobInfo {
    pub id: String,
    pub owner: Owner,
    pub source: String,
    pub target: String,
    pub continuous: bool,
    pub state: JobState,
    /// When the job was added.
    pub start_time: SystemTime,
    /// When its current run started (running jobs only).
    pub started: Option<SystemTime>,
    /// A token for the running task, CouchDB's `pid`.
    pub pid: Option<String>,
    pub error_count: u32,
    /// The newest crash's reason while crashing.
    pub last_error: Option<String>,
    pub history: Vec<Event>,
    pub progress: ProgressSnapshot,
    /// Parked: caught up, holding no slot until its source changes
    /// (shown as `running`, so CouchDB's tools see a live job).
    pub idle: bool,
}

impl JobInfo {
    /// The time of the newest event.
    pub fn last_updated(&self) -> SystemTime {
        self.history.first().map_or(self.start_time, |e| e.at)
    }
}

/// What the documents manager knows of a `_replicator` document.
#[derive(Debug, Clone, PartialEq)]
pub enum DocPhase {
    /// Handed to the scheduler as this job.
    Scheduled(String),
    /// A one-shot replication finished, with its stats.
    Completed(Value),
    /// Not a valid replication, or a duplicate: the reason.
    Failed(String),
}

#[derive(Debug, Clone, PartialEq)]
struct DocRecord {
    phase: DocPhase,
    source: Option<String>,
    target: Option<String>,
    start_time: SystemTime,
    last_updated: SystemTime,
}

/// A `_replicator` document as `_scheduler/docs` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct DocInfo {
    pub db: String,
    pub doc_id: String,
    /// The job id, once known.
    pub id: Option<String>,
    /// `initializing`, `pending`, `running`, `crashing`, `completed` or `failed`.
    pub state: &'static str,
    /// Progress counters, or `{"error": reason}`, or null.
    pub info: Value,
    pub error_count: u32,
    pub source: Option<String>,
    pub target: Option<String>,
    pub start_time: SystemTime,
    pub last_updated: SystemTime,
    /// Its job is parked (see [`JobInfo::idle`]).
    pub idle: bool,
}

/// Every state `_scheduler/docs?states=` accepts.
pub const DOC_STATES: [&str; 7] = [
    "initializing",
    "error",
    "pending",
    "running",
    "crashing",
    "completed",
    "failed",
];

/// The running task of a job.
struct Run {
    generation: u64,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
    started: SystemTime,
    /// Asked to stop (rotation, cancel, shutdown); still checkpointing.
    stopping: bool,
}

struct Job {
    id: String,
    owner: Owner,
    spec: Arc<ReplicationSpec>,
    start_time: SystemTime,
    history: VecDeque<Event>,
    progress: Arc<Progress>,
    run: Option<Run>,
    last_started: Option<Instant>,
    done: watch::Sender<Option<Outcome>>,
    /// Caught up and parked until its source changes.
    parked: Option<Parked>,
}

/// A continuous job with nothing to do: no task, no slot, no open
/// database; woken by its source's next change.
struct Parked {
    /// The generation of its last run (its `pid` while parked).
    generation: u64,
    /// A change arrived: it runs at the first free slot, before others.
    woken: bool,
    /// For a remote source without a shared feed, the task following its
    /// changes feed.
    watcher: Option<JoinHandle<()>>,
    /// The checkpoint it parked at.
    since: Value,
}

impl Drop for Parked {
    fn drop(&mut self) {
        if let Some(watcher) = self.watcher.take() {
            watcher.abort();
        }
    }
}

#[derive(Default)]
struct Table {
    jobs: HashMap<String, Job>,
    /// Parked jobs by their local source database.
    parked_by_source: HashMap<String, std::collections::HashSet<String>>,
    docs: BTreeMap<(String, String), DocRecord>,
    next_generation: u64,
    shutting_down: bool,
    /// The priorities that share the slots fairly between databases.
    share: FairShare,
}

struct Inner {
    store: Store,
    /// The validation functions local targets apply to replicated writes.
    validators: query_server::Validators,
    /// Changeable while the server runs (`/_node/{node}/_config/replicator`).
    config: std::sync::RwLock<SchedulerConfig>,
    table: Mutex<Table>,
    completed_docs: Mutex<Option<mpsc::UnboundedSender<DocCompleted>>>,
    /// The `_db_updates` feeds that wake jobs parked on remote sources.
    feeds: RemoteFeeds,
}

/// The replication jobs of one server. Cheap to clone.
#[derive(Clone)]
pub struct Scheduler {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("jobs", &self.table().jobs.len())
            .finish()
    }
}

/// The job a request was given: a new one, or the same replication already scheduled.
#[derive(Debug)]
pub struct Added {
    pub id: String,
    /// False when the same replication was already scheduled.
    pub new: bool,
    /// The owner of the job that was already scheduled (when `!new`).
    pub existing_owner: Option<Owner>,
    /// Turns `Some` when the job ends.
    pub done: watch::Receiver<Option<Outcome>>,
}

impl Scheduler {
    pub fn new(
        store: Store,
        config: SchedulerConfig,
        validators: query_server::Validators,
    ) -> Scheduler {
        Scheduler {
            inner: Arc::new(Inner {
                store,
                validators,
                config: std::sync::RwLock::new(config),
                table: Mutex::new(Table::default()),
                completed_docs: Mutex::new(None),
                feeds: RemoteFeeds::default(),
            }),
        }
    }

    /// Parses a replication request with this server's defaults.
    pub fn parse_spec(&self, request: &Value) -> Result<ReplicationSpec, SpecError> {
        ReplicationSpec::parse_with(request, &self.config().spec_defaults)
    }

    /// The limits now in force.
    pub fn config(&self) -> SchedulerConfig {
        self.inner
            .config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Changes the limits while jobs run; a new `max_jobs` applies at once
    /// (jobs start, or the longest-running stop, up to `max_churn`).
    pub fn update_config(&self, change: impl FnOnce(&mut SchedulerConfig)) {
        {
            let mut config = self.inner.config.write().unwrap_or_else(|p| p.into_inner());
            change(&mut config);
        }
        self.reschedule();
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.inner
            .table
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Where completed `_replicator` jobs are announced (one receiver: the
    /// documents manager).
    pub fn completed_docs(&self) -> mpsc::UnboundedReceiver<DocCompleted> {
        let (tx, rx) = mpsc::unbounded_channel();
        *self
            .inner
            .completed_docs
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(tx);
        rx
    }

    /// Schedules a replication; it starts at once if a slot is free. When the
    /// same replication (same job id) is already scheduled, nothing changes
    /// and the answer names that job.
    pub fn add(&self, spec: ReplicationSpec, owner: Owner) -> Added {
        let id = job_id(self.inner.store.server_uuid(), &spec);
        let mut table = self.table();
        if let Some(job) = table.jobs.get(&id) {
            return Added {
                id,
                new: false,
                existing_owner: Some(job.owner.clone()),
                done: job.done.subscribe(),
            };
        }
        let (done, done_rx) = watch::channel(None);
        let now = SystemTime::now();
        let mut history = VecDeque::new();
        history.push_front(Event {
            at: now,
            at_instant: Instant::now(),
            kind: EventKind::Added,
        });
        tracing::info!(job = %id, source = %spec.source, target = %spec.target, "replication job added");
        let key = share_key(&owner, &spec);
        let shares = share::shares_of(&self.config().shares, &key);
        table.share.job_added(&id, &key, shares);
        table.jobs.insert(
            id.clone(),
            Job {
                id: id.clone(),
                owner,
                spec: Arc::new(spec),
                start_time: now,
                history,
                progress: Arc::new(Progress::default()),
                run: None,
                last_started: None,
                done,
                parked: None,
            },
        );
        self.fill(&mut table, usize::MAX);
        Added {
            id,
            new: true,
            existing_owner: None,
            done: done_rx,
        }
    }

    /// Removes a job: stops it, waits briefly for its last checkpoint (at
    /// most `REMOVE_LIMIT`, then it is aborted with every request it has
    /// in flight, closing their connections), and tells any waiter it was
    /// cancelled. False when no such job exists.
    pub async fn remove(&self, id: &str) -> bool {
        let (task, done) = {
            let mut table = self.table();
            let Some(mut job) = remove_job(&mut table, id) else {
                return false;
            };
            unpark(&mut table, &mut job, &self.inner.feeds);
            let task = job.run.as_mut().and_then(|run| {
                let _ = run.stop.send(true);
                run.task.take()
            });
            self.fill(&mut table, usize::MAX);
            (task, job.done)
        };
        tracing::info!(job = %id, "replication job removed");
        if let Some(task) = task {
            stop_within(task, id, REMOVE_LIMIT).await;
        }
        done.send_replace(Some(Outcome::Failed {
            error: "cancelled",
            reason: "the replication was cancelled".into(),
        }));
        true
    }

    /// Every job, by id.
    pub fn jobs(&self) -> Vec<JobInfo> {
        let table = self.table();
        let mut jobs: Vec<JobInfo> = table.jobs.values().map(|job| self.info(job)).collect();
        jobs.sort_by(|a, b| a.id.cmp(&b.id));
        jobs
    }

    /// One job.
    pub fn job(&self, id: &str) -> Option<JobInfo> {
        let table = self.table();
        table.jobs.get(id).map(|job| self.info(job))
    }

    /// How many jobs are in each state: the `couch_replicator.jobs` gauges
    /// of `_node/{node}/_stats`, without copying every job as [`Scheduler::jobs`] does.
    pub fn job_counts(&self) -> JobCounts {
        let table = self.table();
        let mut counts = JobCounts::default();
        for job in table.jobs.values() {
            match state_of(job) {
                JobState::Running => counts.running += 1,
                JobState::Pending => counts.pending += 1,
                JobState::Crashing => counts.crashing += 1,
            }
        }
        counts
    }

    fn info(&self, job: &Job) -> JobInfo {
        let error_count = consecutive_crashes(&job.history, self.config().health_threshold);
        let last_error = match job.history.front().map(|e| &e.kind) {
            Some(EventKind::Crashed(reason)) if job.run.is_none() => Some(reason.clone()),
            _ => None,
        };
        let state = state_of(job);
        JobInfo {
            id: job.id.clone(),
            owner: job.owner.clone(),
            source: job.spec.source.to_string(),
            target: job.spec.target.to_string(),
            continuous: job.spec.continuous,
            state,
            start_time: job.start_time,
            started: job.run.as_ref().map(|r| r.started),
            pid: job
                .run
                .as_ref()
                .map(|r| r.generation)
                .or(job.parked.as_ref().map(|p| p.generation))
                .map(|generation| format!("<recliner.{generation}.0>")),
            error_count,
            last_error,
            history: job.history.iter().cloned().collect(),
            progress: job.progress.snapshot(),
            idle: job.parked.is_some(),
        }
    }

    /// Records what the documents manager knows of a document: scheduled as
    /// a job, completed, or failed.
    pub fn set_doc(
        &self,
        db: &str,
        doc_id: &str,
        phase: DocPhase,
        source: Option<String>,
        target: Option<String>,
    ) {
        let now = SystemTime::now();
        let mut table = self.table();
        let key = (db.to_string(), doc_id.to_string());
        let start_time = table.docs.get(&key).map_or(now, |d| d.start_time);
        table.docs.insert(
            key,
            DocRecord {
                phase,
                source,
                target,
                start_time,
                last_updated: now,
            },
        );
    }

    /// Forgets a deleted document.
    pub fn forget_doc(&self, db: &str, doc_id: &str) {
        self.table()
            .docs
            .remove(&(db.to_string(), doc_id.to_string()));
    }

    /// Forgets every document of a deleted replicator database.
    pub fn forget_db(&self, db: &str) {
        self.table().docs.retain(|(d, _), _| d != db);
    }

    /// The jobs of a replicator database's documents.
    pub fn jobs_of_db(&self, db: &str) -> Vec<String> {
        self.table()
            .jobs
            .values()
            .filter(|job| matches!(&job.owner, Owner::Doc { db: d, .. } if d == db))
            .map(|job| job.id.clone())
            .collect()
    }

    /// Every known document of `db` (all databases when `None`), by id.
    pub fn docs(&self, db: Option<&str>) -> Vec<DocInfo> {
        let table = self.table();
        table
            .docs
            .iter()
            .filter(|((d, _), _)| db.is_none_or(|db| db == d))
            .map(|((d, id), record)| self.doc_info(&table, d, id, record))
            .collect()
    }

    /// One document.
    pub fn doc(&self, db: &str, doc_id: &str) -> Option<DocInfo> {
        let table = self.table();
        let record = table.docs.get(&(db.to_string(), doc_id.to_string()))?;
        Some(self.doc_info(&table, db, doc_id, record))
    }

    fn doc_info(&self, table: &Table, db: &str, doc_id: &str, record: &DocRecord) -> DocInfo {
        let mut info = DocInfo {
            db: db.to_string(),
            doc_id: doc_id.to_string(),
            id: None,
            state: "initializing",
            info: Value::Null,
            error_count: 0,
            source: record.source.clone(),
            target: record.target.clone(),
            start_time: record.start_time,
            last_updated: record.last_updated,
            idle: false,
        };
        match &record.phase {
            DocPhase::Scheduled(id) => {
                info.id = Some(id.clone());
                match table.jobs.get(id) {
                    Some(job) => {
                        let job = self.info(job);
                        info.state = job.state.as_str();
                        info.idle = job.idle;
                        info.error_count = job.error_count;
                        info.last_updated = job.last_updated();
                        info.start_time = job.start_time;
                        info.info = match &job.last_error {
                            Some(reason) => json!({"error": reason}),
                            None => progress_json(&job.progress),
                        };
                    }
                    // Between the end of a job and its document's update.
                    None => info.state = "pending",
                }
            }
            DocPhase::Completed(stats) => {
                info.state = "completed";
                info.info = stats.clone();
            }
            DocPhase::Failed(reason) => {
                info.state = "failed";
                info.info = json!({"error": reason});
            }
        }
        info
    }

    /// Rotates jobs every `interval` until `shutdown` turns true, then stops
    /// every job and waits for their checkpoints.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let mut updates = self.inner.store.subscribe_db_updates();
        let mut next_turn = tokio::time::Instant::now() + self.config().interval;
        let mut woken_check = tokio::time::interval(WOKEN_CHECK);
        woken_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = woken_check.tick() => {
                    let mut table = self.table();
                    self.make_room_for_woken(&mut table);
                }
                _ = tokio::time::sleep_until(next_turn) => {
                    self.account_turn();
                    self.reschedule();
                    // Read each turn: `interval` may change while the server runs.
                    next_turn = tokio::time::Instant::now() + self.config().interval;
                }
                update = updates.recv() => match update {
                    // A deleted source wakes its jobs too: they end with `db_not_found`.
                    Ok(update) => self.source_changed(Some(&update.db)),
                    // Fell behind: any parked job may have changes.
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        self.source_changed(None)
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                        updates = self.inner.store.subscribe_db_updates();
                    }
                },
                _ = shutdown.changed() => break,
            }
        }
        self.stop_all().await;
    }

    /// A local database changed (`None`: any may have): wakes the jobs
    /// parked on it.
    fn source_changed(&self, db: Option<&str>) {
        let mut table = self.table();
        let ids: Vec<String> = match db {
            Some(db) => match table.parked_by_source.get(db) {
                Some(ids) => ids.iter().cloned().collect(),
                None => return,
            },
            None => table.parked_by_source.values().flatten().cloned().collect(),
        };
        for id in ids {
            self.wake_in(&mut table, &id);
        }
    }

    /// Wakes a parked job.
    fn wake(&self, id: &str) {
        let mut table = self.table();
        self.wake_in(&mut table, id);
    }

    /// Marks a parked job woken and gives it a slot: a free one, else the
    /// slot of the longest-running job that has had its first turn (it stops
    /// after a checkpoint and waits its own turn again), so jobs with a few
    /// changes are never stuck behind jobs with a long backlog.
    fn wake_in(&self, table: &mut Table, id: &str) {
        let Some(job) = table.jobs.get_mut(id) else {
            return;
        };
        let Some(parked) = job.parked.as_mut() else {
            return;
        };
        if parked.woken {
            return;
        }
        parked.woken = true;
        if let Some(watcher) = parked.watcher.take() {
            watcher.abort();
        }
        self.fill(table, usize::MAX);
        self.make_room_for_woken(table);
    }

    /// When woken jobs wait and no slot is free, stops the longest-running
    /// jobs that have had their first turn, one per waiting woken job (at
    /// most `max_churn`, counting those already stopping): they checkpoint,
    /// and their slots go to the woken jobs first. Called at each wake and
    /// a few times a second, so a job whose first turn ends later gives
    /// way then.
    fn make_room_for_woken(&self, table: &mut Table) {
        if table.shutting_down {
            return;
        }
        let woken = table
            .jobs
            .values()
            .filter(|j| j.run.is_none() && j.parked.as_ref().is_some_and(|p| p.woken))
            .count();
        if woken == 0 {
            return;
        }
        let config = self.config();
        let running = table.jobs.values().filter(|j| j.run.is_some()).count();
        if running < config.max_jobs {
            self.fill(table, usize::MAX);
            return;
        }
        let stopping = table
            .jobs
            .values()
            .filter(|j| j.run.as_ref().is_some_and(|r| r.stopping))
            .count();
        let wanted = woken.min(config.max_churn).saturating_sub(stopping);
        if wanted == 0 {
            return;
        }
        let mut longest: Vec<(std::cmp::Reverse<u64>, Instant, String)> = table
            .jobs
            .values()
            .filter_map(|j| {
                j.run.as_ref().filter(|r| !r.stopping)?;
                let since = j.last_started?;
                let priority = std::cmp::Reverse(table.share.priority(&j.id));
                (since.elapsed() >= config.first_turn).then_some((priority, since, j.id.clone()))
            })
            .collect();
        longest.sort();
        for (_, _, id) in longest.into_iter().take(wanted) {
            if let Some(job) = table.jobs.get_mut(&id) {
                tracing::debug!(job = %id, "replication job paused for woken ones");
                stop_run(job, config.max_history);
            }
        }
    }

    /// The fair-share accounting of one turn: running jobs charge their
    /// databases, usage and priorities decay.
    fn account_turn(&self) {
        let config = self.config();
        let mut table = self.table();
        let running: Vec<(String, String, Duration)> = table
            .jobs
            .values()
            .filter(|j| j.run.is_some())
            .map(|j| {
                let ran = j.last_started.map_or(Duration::ZERO, |t| t.elapsed());
                (j.id.clone(), share_key(&j.owner, &j.spec), ran)
            })
            .collect();
        table.share.turn(&running, config.interval, |key| {
            share::shares_of(&config.shares, key)
        });
    }

    /// One turn: start jobs whose backoff is over, then let waiting jobs
    /// take the place of the longest-running ones.
    pub fn reschedule(&self) {
        let mut table = self.table();
        let churn = self.config().max_churn;
        let started = self.fill(&mut table, churn);
        let running = table.jobs.values().filter(|j| j.run.is_some()).count();
        if running < self.config().max_jobs {
            return;
        }
        let waiting = self.ready(&table).count();
        let turn = churn.saturating_sub(started).min(waiting);
        if turn == 0 {
            return;
        }
        // The highest fair-share priority values stop first, then the
        // longest running.
        let mut oldest: Vec<(std::cmp::Reverse<u64>, Instant, String)> = table
            .jobs
            .values()
            .filter(|j| j.run.as_ref().is_some_and(|r| !r.stopping))
            .map(|j| {
                let priority = std::cmp::Reverse(table.share.priority(&j.id));
                (
                    priority,
                    j.last_started.unwrap_or_else(Instant::now),
                    j.id.clone(),
                )
            })
            .collect();
        oldest.sort();
        for (_, _, id) in oldest.into_iter().take(turn) {
            if let Some(job) = table.jobs.get_mut(&id) {
                stop_run(job, self.config().max_history);
                tracing::info!(job = %id, "replication job paused to let a waiting one run");
            }
        }
    }

    /// Stops every job, waiting for their checkpoints.
    pub async fn stop_all(&self) {
        let tasks: Vec<JoinHandle<()>> = {
            let mut table = self.table();
            table.shutting_down = true;
            let max_history = self.config().max_history;
            table
                .jobs
                .values_mut()
                .filter_map(|job| {
                    stop_run(job, max_history);
                    job.run.as_mut().and_then(|r| r.task.take())
                })
                .collect()
        };
        // All at once: one stuck peer's time limit is everyone's.
        futures_util::future::join_all(
            tasks
                .into_iter()
                .map(|t| stop_within(t, "at shutdown", STOP_LIMIT)),
        )
        .await;
    }

    /// Jobs ready to run (not running, backoff over), each with what
    /// orders them: woken jobs first (they have a change to deliver now),
    /// then the lowest fair-share priority value, then the longest waiting.
    fn ready<'t>(
        &self,
        table: &'t Table,
    ) -> impl Iterator<Item = (bool, u64, Option<Instant>, &'t str)> {
        let now = Instant::now();
        let config = self.config();
        table
            .jobs
            .values()
            .filter(|job| job.run.is_none())
            .filter(|job| job.parked.as_ref().is_none_or(|p| p.woken))
            .filter(move |job| {
                // Only a job whose last event is a crash waits out a
                // backoff (as CouchDB's `not_recently_crashed`).
                let Some(Event {
                    kind: EventKind::Crashed(_),
                    at_instant,
                    ..
                }) = job.history.front()
                else {
                    return true;
                };
                let crashes = consecutive_crashes(&job.history, config.health_threshold);
                crashes == 0 || now.duration_since(*at_instant) >= backoff(&config, crashes)
            })
            .map(|job| {
                let priority = table.share.priority(&job.id);
                (
                    job.parked.is_none(),
                    priority,
                    job.last_started,
                    job.id.as_str(),
                )
            })
    }

    /// The `count` most deserving ready jobs, in order. Only those are
    /// sorted: with thousands of jobs waiting at a start, sorting them all
    /// at every free slot cost more than running them.
    fn eligible(&self, table: &Table, count: usize) -> Vec<String> {
        match count {
            0 => return Vec::new(),
            // The common case, a job ending: one pass, nothing collected.
            1 => {
                return self
                    .ready(table)
                    .min()
                    .map(|(_, _, _, id)| id.to_string())
                    .into_iter()
                    .collect();
            }
            _ => {}
        }
        let mut ready: Vec<_> = self.ready(table).collect();
        if ready.len() > count {
            ready.select_nth_unstable(count);
            ready.truncate(count);
        }
        ready.sort_unstable();
        ready
            .into_iter()
            .map(|(_, _, _, id)| id.to_string())
            .collect()
    }

    /// Starts ready jobs while slots are free, at most `limit`; returns how many.
    fn fill(&self, table: &mut Table, limit: usize) -> usize {
        if table.shutting_down {
            return 0;
        }
        let running = table.jobs.values().filter(|j| j.run.is_some()).count();
        let free = self.config().max_jobs.saturating_sub(running).min(limit);
        if free == 0 {
            return 0;
        }
        let ready = self.eligible(table, free);
        let mut started = 0;
        for id in ready {
            self.start(table, &id);
            started += 1;
        }
        started
    }

    fn start(&self, table: &mut Table, id: &str) {
        table.next_generation += 1;
        let generation = table.next_generation;
        let max_history = self.config().max_history;
        let Some(mut job) = table.jobs.remove(id) else {
            return;
        };
        unpark(table, &mut job, &self.inner.feeds);
        let job = table.jobs.entry(id.to_string()).or_insert(job);
        let (stop, stop_rx) = watch::channel(false);
        let scheduler = self.clone();
        let store = self.inner.store.clone();
        let validators = self.inner.validators.clone();
        let spec = job.spec.clone();
        let progress = job.progress.clone();
        let job_id = id.to_string();
        tracing::info!(job = %id, source = %spec.source, target = %spec.target, "replication started");
        // Continuous jobs park when they have nothing to do.
        let linger = spec.continuous.then_some(LINGER);
        let task = tokio::spawn(async move {
            let result =
                job::run_parking(&store, &spec, stop_rx, &progress, Some(&validators), linger)
                    .await;
            scheduler.exited(&job_id, generation, result);
        });
        push_event(job, EventKind::Started, max_history);
        job.last_started = Some(Instant::now());
        job.run = Some(Run {
            generation,
            stop,
            task: Some(task),
            started: SystemTime::now(),
            stopping: false,
        });
    }

    /// A job's task ended: record why, then give its slot to a waiting job.
    fn exited(&self, id: &str, generation: u64, result: Result<RunEnd, ReplicationError>) {
        let mut table = self.table();
        let max_history = self.config().max_history;
        let Some(job) = table.jobs.get_mut(id) else {
            return;
        };
        let Some(run) = job.run.take_if(|r| r.generation == generation) else {
            return;
        };
        // The database pays for the run (at most a turn's worth), as CouchDB charges a stopped job.
        let key = share_key(&job.owner, &job.spec);
        let ran = job.last_started.map_or(Duration::ZERO, |t| t.elapsed());
        table.share.charge(&key, ran, self.config().interval);
        let result = match result {
            Ok(RunEnd::Idle { since }) if !run.stopping && !table.shutting_down => {
                self.park(&mut table, id, generation, since);
                self.fill(&mut table, usize::MAX);
                return;
            }
            Ok(RunEnd::Idle { since }) => Ok(json!({"ok": true, "source_last_seq": since})),
            Ok(RunEnd::Log(log)) => Ok(log),
            Err(e) => Err(e),
        };
        let Some(job) = table.jobs.get_mut(id) else {
            return;
        };
        match result {
            Ok(log) if !run.stopping && !job.spec.continuous => {
                tracing::info!(job = %id, "replication completed");
                let Some(job) = remove_job(&mut table, id) else {
                    return;
                };
                if let Owner::Doc { db, doc_id } = &job.owner {
                    let stats = completion_stats(&log);
                    let key = (db.clone(), doc_id.clone());
                    if let Some(record) = table.docs.get_mut(&key) {
                        record.phase = DocPhase::Completed(stats.clone());
                        record.last_updated = SystemTime::now();
                    }
                    let sender = self
                        .inner
                        .completed_docs
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .clone();
                    if let Some(sender) = sender {
                        let _ = sender.send(DocCompleted {
                            db: db.clone(),
                            doc_id: doc_id.clone(),
                            stats,
                        });
                    }
                }
                job.done.send_replace(Some(Outcome::Completed(log)));
            }
            Ok(_) => tracing::info!(job = %id, "replication stopped"),
            Err(e) if run.stopping => {
                tracing::info!(job = %id, error = %e, "replication stopped with an error");
            }
            Err(e) => {
                let reason = e.to_string();
                match job.owner {
                    Owner::Transient => {
                        tracing::warn!(job = %id, error = %reason, "replication failed");
                        if let Some(job) = remove_job(&mut table, id) {
                            let error = match e {
                                ReplicationError::DbNotFound(_) => "db_not_found",
                                _ => "replication_failed",
                            };
                            job.done
                                .send_replace(Some(Outcome::Failed { error, reason }));
                        }
                    }
                    Owner::Doc { .. } => {
                        push_event(job, EventKind::Crashed(reason.clone()), max_history);
                        let crashes =
                            consecutive_crashes(&job.history, self.config().health_threshold);
                        tracing::warn!(job = %id, error = %reason, retry_in = ?backoff(&self.config(), crashes), "replication crashed");
                    }
                }
            }
        }
        self.fill(&mut table, usize::MAX);
    }
}

impl Scheduler {
    /// Parks a job that caught up: it waits for its source's next change
    /// with no slot, task or open database. A local source is followed
    /// through the store's commits; a remote one by a longpoll feed of its
    /// own. A change that landed while the job was ending wakes it at once.
    fn park(&self, table: &mut Table, id: &str, generation: u64, since: Value) {
        let Some(job) = table.jobs.get_mut(id) else {
            return;
        };
        let spec = job.spec.clone();
        let mut parked = Parked {
            generation,
            woken: false,
            watcher: None,
            since: since.clone(),
        };
        let scheduler = self.clone();
        let store = self.inner.store.clone();
        let job_id = id.to_string();
        match &spec.source {
            crate::spec::Peer::Local(name) => {
                table
                    .parked_by_source
                    .entry(name.clone())
                    .or_default()
                    .insert(id.to_string());
                // A commit between the job's last look and now was announced
                // before this job was listed: look once more.
                tokio::spawn(async move {
                    let endpoint = Endpoint::new(
                        &spec.source,
                        &store,
                        HttpOptions::of(&spec),
                        spec.user.as_ref(),
                        None,
                    );
                    let moved = match endpoint {
                        Ok(endpoint) => endpoint
                            .changes_after(&since, Duration::ZERO)
                            .await
                            .unwrap_or(true),
                        Err(_) => true,
                    };
                    if moved {
                        scheduler.wake(&job_id);
                    }
                });
            }
            crate::spec::Peer::Remote(db) => {
                // One feed per server where it may be read, else one per job.
                let options = HttpOptions::of(&spec);
                if !self.inner.feeds.park(self, id, db, options, since.clone()) {
                    parked.watcher =
                        Some(watch_alone(scheduler, job_id, spec.clone(), since.clone()));
                }
            }
        }
        if let Some(job) = table.jobs.get_mut(id) {
            job.parked = Some(parked);
        }
        tracing::debug!(job = %id, "replication job parked until its source changes");
    }
}

/// Follows a remote source's changes feed from `since` until it shows a
/// change (or cannot be read: then the job runs and reports why).
async fn watch_remote(store: &Store, spec: &ReplicationSpec, since: &Value) {
    let Ok(endpoint) = Endpoint::new(
        &spec.source,
        store,
        HttpOptions::of(spec),
        spec.user.as_ref(),
        None,
    ) else {
        return;
    };
    loop {
        match endpoint.changes_after(since, REMOTE_WAIT).await {
            Ok(false) => continue,
            Ok(true) | Err(_) => return,
        }
    }
}

/// Takes a job out of the parked lists.
fn unpark(table: &mut Table, job: &mut Job, feeds: &RemoteFeeds) {
    if job.parked.take().is_none() {
        return;
    }
    match &job.spec.source {
        crate::spec::Peer::Local(name) => {
            if let Some(ids) = table.parked_by_source.get_mut(name) {
                ids.remove(&job.id);
                if ids.is_empty() {
                    table.parked_by_source.remove(name);
                }
            }
        }
        crate::spec::Peer::Remote(db) => feeds.unpark(&job.id, db),
    }
}

impl crate::peer::http::remote_feed::Waker for Scheduler {
    fn wake(&self, job: &str) {
        Scheduler::wake(self, job);
    }

    fn watch_alone(&self, job: &str) {
        let mut table = self.table();
        let Some(job) = table.jobs.get_mut(job) else {
            return;
        };
        let Some(parked) = job
            .parked
            .as_mut()
            .filter(|p| !p.woken && p.watcher.is_none())
        else {
            return;
        };
        parked.watcher = Some(watch_alone(
            self.clone(),
            job.id.clone(),
            job.spec.clone(),
            parked.since.clone(),
        ));
    }
}

/// A parked job's own longpoll on its remote source, waking it at the
/// first change.
fn watch_alone(
    scheduler: Scheduler,
    job: String,
    spec: Arc<ReplicationSpec>,
    since: Value,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        watch_remote(&scheduler.inner.store, &spec, &since).await;
        scheduler.wake(&job);
    })
}

/// How long a continuous job that moved documents waits for more before
/// it parks: a busy source keeps its job running.
const LINGER: Duration = Duration::from_secs(1);

/// How often waiting woken jobs look for a job whose first turn is over.
const WOKEN_CHECK: Duration = Duration::from_millis(250);

/// The longest wait of a parked job's longpoll on a remote source.
const REMOTE_WAIT: Duration = Duration::from_secs(60);

/// A job's state: running unless asked to stop, crashing while its newest
/// event is a crash, else pending. A parked job is running, and idle.
fn state_of(job: &Job) -> JobState {
    if job.parked.as_ref().is_some_and(|p| !p.woken) {
        return JobState::Running;
    }
    if job.run.as_ref().is_some_and(|r| !r.stopping) {
        JobState::Running
    } else if job.run.is_none()
        && matches!(
            job.history.front().map(|e| &e.kind),
            Some(EventKind::Crashed(_))
        )
    {
        JobState::Crashing
    } else {
        JobState::Pending
    }
}

/// Who a job's running time is charged to for fair share: its replicator
/// database, or for `_replicate` its user (as CouchDB keys them).
fn share_key(owner: &Owner, spec: &ReplicationSpec) -> String {
    match owner {
        Owner::Doc { db, .. } => db.clone(),
        Owner::Transient => spec
            .user
            .as_ref()
            .and_then(|u| u.name.clone())
            .unwrap_or_default(),
    }
}

/// Takes a job out of the table for good (not to restart it).
fn remove_job(table: &mut Table, id: &str) -> Option<Job> {
    let job = table.jobs.remove(id)?;
    table
        .share
        .job_removed(id, &share_key(&job.owner, &job.spec));
    Some(job)
}

/// Asks a running job to stop (it checkpoints first).
fn stop_run(job: &mut Job, max_history: usize) {
    let Some(run) = job.run.as_mut() else {
        return;
    };
    if run.stopping {
        return;
    }
    run.stopping = true;
    let _ = run.stop.send(true);
    push_event(job, EventKind::Stopped, max_history);
}

fn push_event(job: &mut Job, kind: EventKind, max_history: usize) {
    job.history.push_front(Event {
        at: SystemTime::now(),
        at_instant: Instant::now(),
        kind,
    });
    job.history.truncate(max_history.max(1));
}

/// How many times in a row a job crashed: crashes that each came soon
/// (within the health threshold) after the event before them. A normal stop
/// after a start ends the streak.
fn consecutive_crashes(history: &VecDeque<Event>, health_threshold: Duration) -> u32 {
    let mut count = 0;
    let events: Vec<&Event> = history.iter().collect();
    for (i, event) in events.iter().enumerate() {
        let older = events.get(i + 1);
        match (&event.kind, older) {
            (EventKind::Crashed(_), Some(older)) => {
                if event.at_instant.duration_since(older.at_instant) > health_threshold {
                    return count;
                }
                count += 1;
            }
            (EventKind::Crashed(_), None) => count += 1,
            (EventKind::Stopped, Some(older)) if older.kind == EventKind::Started => {
                return count;
            }
            _ => {}
        }
    }
    count
}

/// The wait before a job that crashed `crashes` times in a row runs again.
fn backoff(config: &SchedulerConfig, crashes: u32) -> Duration {
    if crashes == 0 {
        return Duration::ZERO;
    }
    let doublings = (crashes - 1).min(config.max_backoff_doublings);
    config.backoff_base.saturating_mul(1 << doublings)
}

/// A finished one-shot's `_replication_stats`, from its final log.
fn completion_stats(log: &Value) -> Value {
    match log["history"].get(0) {
        Some(h) => json!({
            "revisions_checked": h["missing_checked"],
            "missing_revisions_found": h["missing_found"],
            "docs_read": h["docs_read"],
            "docs_written": h["docs_written"],
            "doc_write_failures": h["doc_write_failures"],
            "checkpointed_source_seq": log["source_last_seq"],
        }),
        None => json!({
            "revisions_checked": 0,
            "missing_revisions_found": 0,
            "docs_read": 0,
            "docs_written": 0,
            "doc_write_failures": 0,
            "checkpointed_source_seq": log["source_last_seq"],
        }),
    }
}

/// A job's counters as CouchDB shows them in `info` and `_active_tasks`.
pub fn progress_json(p: &ProgressSnapshot) -> Value {
    json!({
        "revisions_checked": p.stats.missing_checked,
        "missing_revisions_found": p.stats.missing_found,
        "docs_read": p.stats.docs_read,
        "docs_written": p.stats.docs_written,
        "changes_pending": p.changes_pending,
        "doc_write_failures": p.stats.doc_write_failures,
        "checkpointed_source_seq": p.checkpointed_source_seq,
        "source_seq": p.source_seq,
        "through_seq": p.through_seq,
    })
}

/// How long a job stopped at shutdown may take to write its checkpoint and
/// end (a peer may not answer at all) before its task is aborted.
const STOP_LIMIT: Duration = Duration::from_secs(30);

/// How long a removed job (cancelled, or its `_replicator` document
/// deleted or changed) may take to settle its writes and checkpoint: a
/// healthy peer answers in far less; one that does not answer is not waited
/// for. Its connections close when it is aborted, and the caller gets its
/// answer: a cancel is never held by the peer it cancels.
const REMOVE_LIMIT: Duration = Duration::from_secs(2);

/// Awaits a stopping job's task for at most `limit`, then aborts it (and
/// with it the requests it has in flight, its writes included): removing
/// one job, or stopping them all, never waits on a stuck peer.
async fn stop_within(task: JoinHandle<()>, job: &str, limit: Duration) {
    let abort = task.abort_handle();
    if tokio::time::timeout(limit, task).await.is_err() {
        tracing::warn!(%job, ?limit, "a replication job did not stop in time; aborted");
        abort.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(events: &[(u64, EventKind)]) -> VecDeque<Event> {
        // `events` oldest first, at seconds from a base instant.
        let base = Instant::now();
        let mut h = VecDeque::new();
        for (secs, kind) in events {
            h.push_front(Event {
                at: SystemTime::now(),
                at_instant: base + Duration::from_secs(*secs),
                kind: kind.clone(),
            });
        }
        h
    }

    fn crashed() -> EventKind {
        EventKind::Crashed("boom".into())
    }

    #[test]
    fn quick_crashes_in_a_row_count_and_a_healthy_run_resets_them() {
        let t = Duration::from_secs(120);
        use EventKind::*;
        assert_eq!(consecutive_crashes(&history(&[(0, Added)]), t), 0);
        assert_eq!(
            consecutive_crashes(&history(&[(0, Added), (1, Started), (2, crashed())]), t),
            1
        );
        assert_eq!(
            consecutive_crashes(
                &history(&[
                    (0, Added),
                    (1, Started),
                    (2, crashed()),
                    (40, Started),
                    (41, crashed()),
                    (100, Started),
                    (101, crashed()),
                ]),
                t
            ),
            3
        );
        // Ran 1000 s before crashing: healthy, the streak is over.
        assert_eq!(
            consecutive_crashes(
                &history(&[
                    (0, Added),
                    (1, Started),
                    (2, crashed()),
                    (40, Started),
                    (1040, crashed())
                ]),
                t
            ),
            0
        );
        // A normal stop after a start ends the streak.
        assert_eq!(
            consecutive_crashes(
                &history(&[
                    (0, Added),
                    (1, Started),
                    (2, crashed()),
                    (40, Started),
                    (50, Stopped)
                ]),
                t
            ),
            0
        );
    }

    #[test]
    fn backoff_starts_at_the_base_doubles_and_is_capped() {
        let config = SchedulerConfig::default();
        assert_eq!(backoff(&config, 0), Duration::ZERO);
        assert_eq!(backoff(&config, 1), Duration::from_secs(30));
        assert_eq!(backoff(&config, 2), Duration::from_secs(60));
        assert_eq!(backoff(&config, 3), Duration::from_secs(120));
        assert_eq!(backoff(&config, 11), Duration::from_secs(30 * 1024));
        assert_eq!(backoff(&config, 50), Duration::from_secs(30 * 1024));
    }

    #[test]
    fn completion_stats_come_from_the_newest_history_entry() {
        let log = json!({"source_last_seq": 7, "history": [
            {"missing_checked": 5, "missing_found": 4, "docs_read": 4, "docs_written": 3, "doc_write_failures": 1},
            {"missing_checked": 1, "missing_found": 1, "docs_read": 1, "docs_written": 1, "doc_write_failures": 0},
        ]});
        assert_eq!(
            completion_stats(&log),
            json!({"revisions_checked": 5, "missing_revisions_found": 4, "docs_read": 4,
                   "docs_written": 3, "doc_write_failures": 1, "checkpointed_source_seq": 7})
        );
    }
}
