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

mod parking;
mod status;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};
use store::Store;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::job::{self, Progress, ReplicationError, RunEnd};
use crate::peer::http::remote_feed::RemoteFeeds;
use crate::rep_id::job_id;
use crate::share::{self, FairShare};
use crate::spec::{ReplicationSpec, SpecDefaults, SpecError};

use self::parking::unpark;
use self::status::DocRecord;
pub use self::status::{DOC_STATES, DocInfo, JobCounts, JobInfo, progress_json};

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
    validators: design_functions::Validators,
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
        validators: design_functions::Validators,
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

    /// Whose rights job `id` runs with (`Some(None)`: a server admin's),
    /// or `None` when no such job exists: for the replication rules'
    /// question of who may cancel it (`access::replication::check_cancel`).
    pub fn job_rights(&self, id: &str) -> Option<Option<auth::UserCtx>> {
        self.table().jobs.get(id).map(|job| job.spec.user.clone())
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

/// How long a continuous job that moved documents waits for more before
/// it parks: a busy source keeps its job running.
const LINGER: Duration = Duration::from_secs(1);

/// How often waiting woken jobs look for a job whose first turn is over.
const WOKEN_CHECK: Duration = Duration::from_millis(250);

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
