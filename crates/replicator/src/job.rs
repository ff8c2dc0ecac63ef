//! Running a replication: verify the peers, find where to resume from the
//! checkpoints, then read changes, ask the target what it lacks, fetch and
//! write those revisions, and checkpoint, until the source has no more.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use revtree::RevId;
use serde_json::{Value, json};
use store::Store;
use wire::doc::DocMeta;
use wire::rows::{Entries, RevsDiffRequest};

use crate::checkpoint::{HistoryEntry, LogDoc, ReplicationLog, StoredLog, compare_logs};
use crate::peer::{Endpoint, EndpointError, HttpOptions, Missing, WriteFailure};
use crate::rep_id::{REP_ID_VERSION, replication_id_with_code};
use crate::spec::ReplicationSpec;

/// Why a replication stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReplicationError {
    /// A peer database is missing: CouchDB's `db_not_found`.
    #[error("could not open {0}")]
    DbNotFound(String),
    /// A peer was recreated or restored while the replication ran: no
    /// checkpoint is recorded, and the next run resumes from the last safe one.
    #[error("{0}; restarting from the last checkpoint")]
    PeerChanged(String),
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    /// Asked to stop before it had read its checkpoints: nothing to record.
    #[error("stopped before it started")]
    Stopped,
}

/// The counters a replication reports (and checkpoints).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub missing_checked: u64,
    pub missing_found: u64,
    pub docs_read: u64,
    pub docs_written: u64,
    pub doc_write_failures: u64,
}

/// What a running replication has done so far, for `_active_tasks` and
/// `_scheduler/*`: updated after every batch and checkpoint.
#[derive(Debug, Default)]
pub struct Progress(std::sync::Mutex<ProgressSnapshot>);

/// A copy of a replication's progress.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProgressSnapshot {
    pub stats: Stats,
    /// The source's update sequence when last looked at.
    pub source_seq: Value,
    /// The last sequence whose changes are written.
    pub through_seq: Value,
    /// The last sequence recorded in a checkpoint.
    pub checkpointed_source_seq: Value,
    /// When that checkpoint was recorded (kept across a parked job's runs).
    pub checkpointed_at: Option<Instant>,
    /// Changes the source still has after `through_seq`, when known.
    pub changes_pending: Option<u64>,
    /// Whether the job is replicating or idle, waiting for the source to change.
    pub process_status: ProcessStatus,
    pub updated: Option<SystemTime>,
}

/// What a job is doing, as `_active_tasks` reports it in `process_status`
/// (CouchDB shows its job process's Erlang status there: `running` while it
/// works, `waiting` while it sits in a receive, idle).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ProcessStatus {
    /// Reading, diffing, fetching, writing or checkpointing.
    Running,
    /// Caught up: waiting for the source to change (or not started).
    #[default]
    Waiting,
}

impl ProcessStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ProcessStatus::Running => "running",
            ProcessStatus::Waiting => "waiting",
        }
    }
}

impl Progress {
    fn update(&self, f: impl FnOnce(&mut ProgressSnapshot)) {
        let mut guard = self.0.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard);
        guard.updated = Some(SystemTime::now());
    }

    /// A checkpoint recorded `seq` now.
    fn checkpointed(&self, seq: &Value) {
        self.update(|p| {
            p.checkpointed_source_seq = seq.clone();
            p.checkpointed_at = Some(Instant::now());
        });
    }

    pub fn snapshot(&self) -> ProgressSnapshot {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

use wire::time::http_date;
/// A time as RFC 3339 in UTC (`2026-11-22T03:13:34Z`), as CouchDB writes
/// `_replication_state_time`.
pub use wire::time::rfc3339;

/// Runs a one-shot replication to the end and returns CouchDB's answer to
/// `POST /_replicate`: `ok`, `session_id`, `source_last_seq`,
/// `replication_id_version`, `history` (and `no_changes` when nothing moved).
/// Local targets obey `validators` when given.
pub async fn run_once(
    store: &Store,
    spec: &ReplicationSpec,
    validators: Option<&design_functions::Validators>,
) -> Result<Value, ReplicationError> {
    let (_keep, stop) = tokio::sync::watch::channel(false);
    run(store, spec, stop, &Progress::default(), validators).await
}

/// The source code of a replication's filter function (`ddoc/name`, or
/// the view of `_view`), read from the source; `None` without one or when
/// the source lacks it (its changes feed then says why).
async fn filter_code(
    source: &Endpoint,
    filter: &crate::spec::ChangesFilter,
) -> Result<Option<String>, EndpointError> {
    let crate::spec::ChangesFilter::Named { name, query_params } = filter else {
        return Ok(None);
    };
    let (path, section) = if name == "_view" {
        let view = query_params
            .get("view")
            .and_then(Value::as_str)
            .unwrap_or_default();
        (view.to_string(), "views")
    } else {
        (name.clone(), "filters")
    };
    let Some((ddoc, function)) = path.split_once('/') else {
        return Ok(None);
    };
    let Some(doc) = source.get_doc(&format!("_design/{ddoc}")).await? else {
        return Ok(None);
    };
    let code = doc.get(section).and_then(|s| s.get(function));
    Ok(code.map(|c| match c {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }))
}

/// How often a local source counts the changes left (`changes_pending`).
const PENDING_EVERY: Duration = Duration::from_secs(1);

/// How often an idle continuous replication checks that a remote source is
/// still the database it started with.
const IDENTITY_EVERY: Duration = Duration::from_secs(5);

/// How long a continuous replication waits on an idle source before asking again.
const IDLE_WAIT: Duration = Duration::from_secs(30);

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEnd {
    /// A one-shot run reached the end, or a run was stopped: its log.
    Log(Value),
    /// A continuous run that may park caught up, checkpointed at `since`
    /// and had nothing more to do: it can give up its slot until its
    /// source changes, then start again from that checkpoint.
    Idle { since: Value },
}

/// Runs a replication. A one-shot one ends when the source has no more
/// changes; a continuous one keeps waiting for new changes until `stop`
/// turns true, then checkpoints and returns its log.
pub async fn run(
    store: &Store,
    spec: &ReplicationSpec,
    stop: tokio::sync::watch::Receiver<bool>,
    progress: &Progress,
    validators: Option<&design_functions::Validators>,
) -> Result<Value, ReplicationError> {
    match run_parking(store, spec, stop, progress, validators, None).await? {
        RunEnd::Log(log) => Ok(log),
        // Not asked to park: never happens, but the log says where it was.
        RunEnd::Idle { since } => Ok(json!({"ok": true, "source_last_seq": since})),
    }
}

/// [`run`], where a continuous run that has caught up ends as
/// [`RunEnd::Idle`] instead of waiting: at once when it found nothing to
/// do, else after `linger` without a new change (so a busy source keeps
/// its job running). `None` never parks.
pub async fn run_parking(
    store: &Store,
    spec: &ReplicationSpec,
    mut stop: tokio::sync::watch::Receiver<bool>,
    progress: &Progress,
    validators: Option<&design_functions::Validators>,
    linger: Option<Duration>,
) -> Result<RunEnd, ReplicationError> {
    progress.update(|p| p.process_status = ProcessStatus::Running);
    let options = HttpOptions::of(spec);
    let source = Endpoint::new(&spec.source, store, options, spec.user.as_ref(), validators)?;
    let target = Endpoint::new(&spec.target, store, options, spec.user.as_ref(), validators)?;
    let not_found = |e: EndpointError, side: &Endpoint| match e {
        EndpointError::NotFound(_) => ReplicationError::DbNotFound(side.display()),
        other => other.into(),
    };
    // Until the checkpoints are read there is nothing to record: a stop
    // ends the run at once, even in a request a peer never answers.
    let setup = async {
        let source_info = source.info().await.map_err(|e| not_found(e, &source))?;
        progress.update(|p| p.source_seq = source_info.update_seq.clone());
        if spec.create_target {
            target.create(&spec.create_target_params).await?;
        }
        let target_info = target.info().await.map_err(|e| not_found(e, &target))?;
        let code = filter_code(&source, &spec.filter).await?;
        let rep_id = replication_id_with_code(store.server_uuid(), spec, code.as_deref());
        let log_id = format!("_local/{rep_id}");
        let logs = if spec.use_checkpoints {
            (
                StoredLog::read(source.get_local(&log_id).await?),
                StoredLog::read(target.get_local(&log_id).await?),
            )
        } else {
            (StoredLog::default(), StoredLog::default())
        };
        Ok::<_, ReplicationError>((source_info, target_info, log_id, logs))
    };
    let Some((source_info, target_info, log_id, (source_log, target_log))) =
        unless_stopped(&mut stop, setup).await?
    else {
        return Err(ReplicationError::Stopped);
    };
    let resume = compare_logs(source_log.log.as_ref(), target_log.log.as_ref());
    let mut since = spec.since_seq.clone().unwrap_or(resume.since.clone());
    let mut checkpointer = Checkpointer {
        source: &source,
        target: &target,
        log_id: &log_id,
        source_instance: source_info.instance_start_time,
        target_instance: target_info.instance_start_time,
        source_rev: source_log.rev,
        target_rev: target_log.rev,
        previous: &resume.history,
        session_id: uuid::Uuid::new_v4().simple().to_string(),
        start_time: http_date(SystemTime::now()),
        start_seq: since.clone(),
    };
    // Counters continue from the checkpoint's newest session, as CouchDB's do.
    let mut stats = resume
        .history
        .first()
        .map(|h| Stats {
            missing_checked: h.missing_checked,
            missing_found: h.missing_found,
            docs_read: h.docs_read,
            docs_written: h.docs_written,
            doc_write_failures: h.doc_write_failures,
        })
        .unwrap_or_default();
    let mut moved = false;
    let mut last_checkpoint = Instant::now();
    // The sequence the newest checkpoint records.
    let mut recorded = since.clone();
    let interval = Duration::from_millis(spec.checkpoint_interval);

    // One write may run while the next batch is read, diffed and fetched:
    // `since` is how far changes were read, `written` how far every change
    // is written (what checkpoints record).
    let mut written = since.clone();
    // Until the first batch, the job is through where it starts: clients
    // read these sequences back as `since` (never `null`).
    progress.update(|p| {
        for seq in [&mut p.through_seq, &mut p.checkpointed_source_seq] {
            if seq.is_null() {
                *seq = since.clone();
            }
        }
    });
    // Up to `worker_processes` (at most 4) writes run while the next batch
    // is prepared; they are settled in order, so `written` only ever moves
    // past batches whose every predecessor is written too.
    let mut in_flight = Writes::new(spec.worker_processes.clamp(1, 4) as usize);
    let mut last_pending_count: Option<Instant> = None;
    let mut last_identity_check = Instant::now();
    // Whether this run moved documents since it last waited for changes.
    let mut busy = false;
    loop {
        if *stop.borrow() {
            break;
        }
        // Counting what is left costs a scan on a local source: at most once a second.
        let count_pending = last_pending_count.is_none_or(|t| t.elapsed() >= PENDING_EVERY);
        // A batch being read, diffed or fetched is dropped at a stop (the
        // next run reads it again); the writes already queued are settled
        // and checkpointed below.
        let read = source.changes(&since, spec.worker_batch_size, &spec.filter, count_pending);
        let Some(batch) = unless_stopped(&mut stop, read).await? else {
            break;
        };
        if let Some(pending) = batch.pending {
            last_pending_count = Some(Instant::now());
            progress.update(|p| p.changes_pending = Some(pending));
        }
        let advanced = batch.last_seq != since;
        if batch.changes.is_empty() {
            in_flight.settle_all(&mut stats, &mut written).await?;
            // Changes that no filter let through move the reading on, but
            // nothing was replicated: a run that sees only those ends as
            // CouchDB's `no_changes` and records no checkpoint.
            if advanced {
                since = batch.last_seq;
            }
            // Nothing is in flight: everything read is written.
            written = since.clone();
            progress.update(|p| {
                p.stats = stats.clone();
                p.through_seq = written.clone();
                p.changes_pending = Some(0);
            });
            if !spec.continuous {
                break;
            }
            if let Some(linger) = linger {
                // Parked jobs start again from their checkpoint: one is
                // recorded when the interval allows (across runs), so a
                // job woken often does not write one at every change; a
                // restart re-reads at most one interval of changes.
                let since_checkpoint = progress.snapshot().checkpointed_at.map(|at| at.elapsed());
                let due = since_checkpoint.is_none_or(|elapsed| elapsed >= interval);
                if spec.use_checkpoints && written != recorded && due {
                    checkpointer.record(&written, &stats).await?;
                    recorded = written.clone();
                    last_checkpoint = Instant::now();
                    progress.checkpointed(&written);
                }
                if !busy {
                    progress.update(|p| p.process_status = ProcessStatus::Waiting);
                    return Ok(RunEnd::Idle { since: written });
                }
                busy = false;
                // Not longer than until the checkpoint is due.
                let mut wait = linger;
                if spec.use_checkpoints
                    && written != recorded
                    && let Some(elapsed) = since_checkpoint
                {
                    wait = wait.min(interval.saturating_sub(elapsed));
                }
                progress.update(|p| p.process_status = ProcessStatus::Waiting);
                source.wait_for_changes(&since, wait, &mut stop).await?;
                progress.update(|p| p.process_status = ProcessStatus::Running);
                continue;
            }
            // Caught up: record progress once the interval allows, then sleep
            // until the source moves (or the next checkpoint is due).
            let mut wait = IDLE_WAIT;
            if spec.use_checkpoints && written != recorded {
                let since_last = last_checkpoint.elapsed();
                if since_last >= interval {
                    checkpointer.record(&written, &stats).await?;
                    last_checkpoint = Instant::now();
                    recorded = written.clone();
                    progress.checkpointed(&written);
                } else {
                    wait = interval - since_last;
                }
            }
            // A source deleted and recreated may never show new changes
            // after our sequence: look at its identity while idle.
            if last_identity_check.elapsed() >= IDENTITY_EVERY || source.answers_without_requests()
            {
                checkpointer.verify_peers(false).await?;
                last_identity_check = Instant::now();
            }
            progress.update(|p| p.process_status = ProcessStatus::Waiting);
            source.wait_for_changes(&since, wait, &mut stop).await?;
            progress.update(|p| p.process_status = ProcessStatus::Running);
            continue;
        }
        moved = true;
        // With `winning_revs_only` only the winner (first in `style=all_docs`) travels.
        let keep = if spec.winning_revs_only {
            1
        } else {
            usize::MAX
        };
        let asked: RevsDiffRequest = Entries(
            batch
                .changes
                .into_iter()
                .map(|mut c| {
                    c.revs.truncate(keep);
                    (c.id, c.revs)
                })
                .collect(),
        );
        stats.missing_checked += asked.0.iter().map(|(_, r)| r.len() as u64).sum::<u64>();
        let in_scope: HashMap<String, Vec<RevId>> = asked.0.iter().cloned().collect();
        let Some(mut missing) = unless_stopped(&mut stop, target.revs_diff(asked)).await? else {
            break;
        };
        only_asked(&mut missing, &in_scope);
        stats.missing_found += missing.iter().map(|m| m.revs.len() as u64).sum::<u64>();
        // Changes already on the target (re-read after a restart) are no work.
        busy |= !missing.is_empty();
        let fetch = source.fetch_many(&missing, spec.use_bulk_get);
        let Some(docs) = unless_stopped(&mut stop, fetch).await? else {
            break;
        };
        stats.docs_read += docs.len() as u64;
        // Revisions carrying attachment bytes the target lacks are streamed
        // one by one (several at a time); the rest go in one `_bulk_docs`.
        let copy = copy_attachment_docs(&source, &target, spec, &missing, docs, &mut stats);
        let Some(docs) = unless_stopped(&mut stop, copy).await? else {
            break;
        };
        in_flight.make_room(&mut stats, &mut written).await?;
        let writer = target.clone();
        let count = docs.len() as u64;
        in_flight.queue.push_back(PendingWrite {
            task: tokio::spawn(async move { writer.write(docs).await }),
            count,
            through: batch.last_seq.clone(),
        });
        since = batch.last_seq;
        progress.update(|p| {
            p.stats = stats.clone();
            p.through_seq = written.clone();
        });
        if spec.use_checkpoints && last_checkpoint.elapsed() >= interval {
            // The counters must match the recorded sequence: let the write finish.
            in_flight.settle_all(&mut stats, &mut written).await?;
            checkpointer.record(&written, &stats).await?;
            recorded = written.clone();
            last_checkpoint = Instant::now();
            progress.checkpointed(&written);
        }
    }
    in_flight.settle_all(&mut stats, &mut written).await?;
    let since = written;

    if !moved {
        // Without a checkpoint to show, CouchDB's answer is just this.
        if resume.history.is_empty() {
            return Ok(RunEnd::Log(json!({"ok": true, "no_changes": true})));
        }
        return Ok(RunEnd::Log(json!({
            "ok": true,
            "no_changes": true,
            "session_id": checkpointer.session_id,
            "source_last_seq": since,
            "replication_id_version": REP_ID_VERSION,
            "history": resume.history,
        })));
    }
    let history = if spec.use_checkpoints {
        checkpointer.record(&since, &stats).await?
    } else {
        // No checkpoint, but the written documents are made durable all the same.
        target.ensure_full_commit().await?;
        vec![checkpointer.entry(&since, &stats)]
    };
    let mut answer = json!({
        "ok": true,
        "session_id": checkpointer.session_id,
        "source_last_seq": since,
        "replication_id_version": REP_ID_VERSION,
    });
    // A `doc_ids` replication's answer also carries its session's figures
    // at the top, as CouchDB's does.
    if let (crate::spec::ChangesFilter::DocIds(_), Some(session)) = (&spec.filter, history.first())
    {
        session.put_figures(&mut answer);
    }
    answer["history"] = serde_json::to_value(&history).unwrap_or_default();
    Ok(RunEnd::Log(answer))
}

/// Runs `work` unless `stop` turns true first (then `None`, and the work is
/// dropped). A stop sender that is gone never stops anything.
async fn unless_stopped<T, E>(
    stop: &mut tokio::sync::watch::Receiver<bool>,
    work: impl std::future::Future<Output = Result<T, E>>,
) -> Result<Option<T>, ReplicationError>
where
    ReplicationError: From<E>,
{
    let stopped = async {
        if stop.wait_for(|s| *s).await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        biased;
        () = stopped => Ok(None),
        done = work => Ok(Some(done?)),
    }
}

/// Copies the revisions whose attachments must travel (streamed, up to
/// `worker_processes` at once) and returns the others.
async fn copy_attachment_docs(
    source: &Endpoint,
    target: &Endpoint,
    spec: &ReplicationSpec,
    missing: &[Missing],
    docs: Vec<Value>,
    stats: &mut Stats,
) -> Result<Vec<Value>, ReplicationError> {
    use futures_util::StreamExt;
    let ancestors: std::collections::HashMap<&str, &[revtree::RevId]> = missing
        .iter()
        .map(|m| (m.id.as_str(), m.possible_ancestors.as_slice()))
        .collect();
    let mut plain = Vec::with_capacity(docs.len());
    let mut heavy = Vec::new();
    for doc in docs {
        // A fetched revision without its id or revision cannot be written
        // anywhere: the source broke the protocol, and the job says so.
        let meta = DocMeta::of(&doc).map_err(|e| EndpointError::Protocol {
            url: source.display(),
            detail: format!("fetched document: {e}"),
        })?;
        let since = ancestors.get(meta.id).copied().unwrap_or(&[]);
        let names = crate::transfer::attachments_to_send(&meta, since);
        if names.is_empty() {
            plain.push(doc);
        } else {
            // Owned: the copies run as futures of their own.
            heavy.push((doc, names, since.to_vec()));
        }
    }
    if heavy.is_empty() {
        return Ok(plain);
    }
    let workers = spec.worker_processes.max(1) as usize;
    let retries = spec.retries_per_request;
    let mut copies = futures_util::stream::iter(heavy)
        .map(|(doc, names, since)| async move {
            crate::transfer::copy(source, target, doc, &names, &since, retries).await
        })
        .buffer_unordered(workers);
    while let Some(result) = copies.next().await {
        match result? {
            None => stats.docs_written += 1,
            Some(failure) => {
                tracing::warn!(id = %failure.id, error = %failure.error, reason = %failure.reason, "the target refused a document");
                stats.doc_write_failures += 1;
            }
        }
    }
    Ok(plain)
}

/// A `_bulk_docs` write running while the next batch is prepared.
struct PendingWrite {
    task: tokio::task::JoinHandle<Result<Vec<WriteFailure>, EndpointError>>,
    count: u64,
    /// The batch's last sequence: written through here once it succeeds.
    through: Value,
}

impl Drop for PendingWrite {
    /// A write is part of its job: a job that ends without settling it (it
    /// failed, or was aborted waiting on a target that does not answer)
    /// ends the write too, and its request's connection with it.
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The writes in flight, oldest first.
struct Writes {
    queue: std::collections::VecDeque<PendingWrite>,
    max: usize,
}

impl Writes {
    fn new(max: usize) -> Writes {
        Writes {
            queue: std::collections::VecDeque::new(),
            max,
        }
    }

    /// Settles the oldest writes until another one may start.
    async fn make_room(
        &mut self,
        stats: &mut Stats,
        written: &mut Value,
    ) -> Result<(), ReplicationError> {
        while self.queue.len() >= self.max {
            self.settle_oldest(stats, written).await?;
        }
        Ok(())
    }

    /// Waits for every write in flight.
    async fn settle_all(
        &mut self,
        stats: &mut Stats,
        written: &mut Value,
    ) -> Result<(), ReplicationError> {
        while !self.queue.is_empty() {
            self.settle_oldest(stats, written).await?;
        }
        Ok(())
    }

    /// Waits for the oldest write, counts its outcome, and moves `written`.
    async fn settle_oldest(
        &mut self,
        stats: &mut Stats,
        written: &mut Value,
    ) -> Result<(), ReplicationError> {
        let Some(mut pending) = self.queue.pop_front() else {
            return Ok(());
        };
        let failures = (&mut pending.task)
            .await
            .map_err(|e| EndpointError::Protocol {
                url: String::new(),
                detail: format!("write task failed: {e}"),
            })??;
        for f in &failures {
            tracing::warn!(id = %f.id, error = %f.error, reason = %f.reason, "the target refused a document");
        }
        stats.doc_write_failures += failures.len() as u64;
        stats.docs_written += pending.count - failures.len() as u64;
        // A refused document still counts as done: the checkpoint moves past it.
        *written = std::mem::take(&mut pending.through);
        Ok(())
    }
}

/// Writes the replication log to both peers for one session.
struct Checkpointer<'a> {
    source: &'a Endpoint,
    target: &'a Endpoint,
    /// The peers' `instance_start_time` when the replication started: a
    /// change means the database was recreated (or restored) and the
    /// sequence about to be recorded may skip its data.
    source_instance: String,
    target_instance: String,
    log_id: &'a str,
    /// The checkpoint documents' `_rev`s (`0-N`), to update them in place.
    source_rev: Option<String>,
    target_rev: Option<String>,
    /// The history carried forward from the compared checkpoints.
    previous: &'a [HistoryEntry],
    session_id: String,
    start_time: String,
    start_seq: Value,
}

impl Checkpointer<'_> {
    /// Fails when the source (and the target, if asked) is no longer the
    /// database the replication started with (its `instance_start_time` changed).
    async fn verify_peers(&self, target_too: bool) -> Result<(), ReplicationError> {
        let sides = [
            ("source", self.source, &self.source_instance),
            ("target", self.target, &self.target_instance),
        ];
        for (side, endpoint, started) in sides.into_iter().take(if target_too { 2 } else { 1 }) {
            let now = endpoint.info().await?.instance_start_time;
            if &now != started {
                return Err(ReplicationError::PeerChanged(format!(
                    "the {side} {} changed its instance_start_time since the replication started",
                    endpoint.display()
                )));
            }
        }
        Ok(())
    }

    /// This session's history entry, recorded through `seq`.
    fn entry(&self, seq: &Value, stats: &Stats) -> HistoryEntry {
        HistoryEntry {
            session_id: self.session_id.clone(),
            start_time: self.start_time.clone(),
            end_time: http_date(SystemTime::now()),
            start_last_seq: self.start_seq.clone(),
            end_last_seq: seq.clone(),
            recorded_seq: seq.clone(),
            missing_checked: stats.missing_checked,
            missing_found: stats.missing_found,
            docs_read: stats.docs_read,
            docs_written: stats.docs_written,
            doc_write_failures: stats.doc_write_failures,
        }
    }

    /// Makes the target durable, then writes the checkpoint on the target
    /// and on the source; a source that refuses it (401/403: read-only
    /// access) only costs re-checking on resume. Returns the new history.
    async fn record(
        &mut self,
        seq: &Value,
        stats: &Stats,
    ) -> Result<Vec<HistoryEntry>, ReplicationError> {
        self.target.ensure_full_commit().await?;
        self.verify_peers(true).await?;
        let log = ReplicationLog::with_session(
            self.previous,
            self.entry(seq, stats),
            seq.clone(),
            REP_ID_VERSION,
        );
        let doc = LogDoc {
            rev: self.target_rev.as_deref(),
            log: &log,
        };
        let rev = self.target.put_local(self.log_id, &doc).await?;
        self.target_rev = Some(rev);
        let doc = LogDoc {
            rev: self.source_rev.as_deref(),
            log: &log,
        };
        match self.source.put_local(self.log_id, &doc).await {
            Ok(rev) => self.source_rev = Some(rev),
            Err(EndpointError::Http {
                status: 401 | 403, ..
            }) => {
                tracing::warn!(source = %self.source.display(), "the source refused the checkpoint; only the target records it");
            }
            Err(e) => return Err(e.into()),
        }
        Ok(log.history)
    }
}

/// Keeps of a target's `_revs_diff` answer only revisions it was asked
/// about: a target that names another document or revision (outside
/// `doc_ids` or a selector, say) is sent nothing for it.
fn only_asked(missing: &mut Vec<Missing>, asked: &HashMap<String, Vec<RevId>>) {
    missing.retain_mut(|m| match asked.get(&m.id) {
        Some(revs) => {
            m.revs.retain(|rev| revs.contains(rev));
            !m.revs.is_empty()
        }
        None => {
            tracing::warn!(doc = %m.id, "the target claims a document it was not asked about; ignored");
            false
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_checkpoint_is_refused_when_a_peer_is_not_the_database_it_was() {
        let dir = std::env::temp_dir().join(format!("recliner-verify-{}", uuid::Uuid::new_v4()));
        let store = store_sqlite::open(&dir).unwrap();
        store.create_db("a").await.unwrap();
        store.create_db("b").await.unwrap();
        let peer = |name: &str| {
            Endpoint::new(
                &crate::spec::Peer::Local(name.into()),
                &store,
                HttpOptions {
                    max_answer: crate::spec::defaults::MAX_ANSWER_BYTES as usize,
                    timeout: Duration::from_secs(5),
                    retries: 0,
                    http_connections: 1,
                },
                None,
                None,
            )
            .unwrap()
        };
        let (source, target) = (peer("a"), peer("b"));
        let a_instance = source.info().await.unwrap().instance_start_time;
        let b_instance = target.info().await.unwrap().instance_start_time;
        let mut checkpointer = Checkpointer {
            source: &source,
            target: &target,
            source_instance: a_instance,
            target_instance: b_instance,
            log_id: "_local/x",
            source_rev: None,
            target_rev: None,
            previous: &[],
            session_id: "s".into(),
            start_time: String::new(),
            start_seq: json!(0),
        };
        assert!(
            checkpointer
                .record(&json!(0), &Stats::default())
                .await
                .is_ok()
        );
        // The target was recreated since: no checkpoint may be recorded.
        checkpointer.target_instance = "0".into();
        assert!(checkpointer.verify_peers(false).await.is_ok());
        match checkpointer.record(&json!(0), &Stats::default()).await {
            Err(ReplicationError::PeerChanged(reason)) => assert!(reason.contains("target b")),
            other => panic!("expected PeerChanged, got {other:?}"),
        }
        checkpointer.source_instance = "0".into();
        assert!(matches!(
            checkpointer.verify_peers(false).await,
            Err(ReplicationError::PeerChanged(_))
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Writes that finish in `order` (a permutation of the batches), at
    /// most `max` in flight, batch `k` refusing `refused[k]` of its three
    /// documents and batch `error_at` failing outright.
    fn run_writes(order: Vec<usize>, max: usize, refused: Vec<u64>, error_at: Option<usize>) {
        use std::sync::{Arc, Mutex};
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async move {
            let n = order.len();
            let through = |k: usize| json!((k as u64 + 1) * 10);
            let finished = Arc::new(Mutex::new(vec![false; n]));
            let (mut senders, mut receivers): (Vec<_>, Vec<_>) = (0..n)
                .map(|_| {
                    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                    (Some(tx), Some(rx))
                })
                .unzip();
            // The target finishes the writes in its own order, one at a
            // time, interleaved with the job's queueing and settling.
            let done = finished.clone();
            let target = tokio::spawn(async move {
                for k in order {
                    tokio::task::yield_now().await;
                    done.lock().unwrap()[k] = true;
                    if let Some(tx) = senders[k].take() {
                        let _ = tx.send(());
                    }
                }
            });
            // Every batch at or before `written` is finished at the target.
            let check = |written: &Value| {
                let through_batches = written.as_u64().unwrap_or(0) / 10;
                let finished = finished.lock().unwrap();
                assert!(
                    finished.iter().take(through_batches as usize).all(|f| *f),
                    "{written} passes an unfinished batch: {finished:?}"
                );
            };
            let mut writes = Writes::new(max);
            let mut stats = Stats::default();
            let mut written = json!(0);
            let mut outcome = Ok(());
            for k in 0..n {
                outcome = writes.make_room(&mut stats, &mut written).await;
                check(&written);
                if outcome.is_err() {
                    break;
                }
                let rx = receivers[k].take().unwrap();
                let failed = refused[k];
                let fails = error_at == Some(k);
                let task = tokio::spawn(async move {
                    let _ = rx.await;
                    if fails {
                        return Err(EndpointError::Transport {
                            url: String::new(),
                            detail: "reset".into(),
                        });
                    }
                    Ok((0..failed)
                        .map(|i| WriteFailure {
                            id: format!("{k}-{i}"),
                            error: "forbidden".into(),
                            reason: String::new(),
                        })
                        .collect())
                });
                writes.queue.push_back(PendingWrite {
                    task,
                    count: 3,
                    through: through(k),
                });
                assert!(writes.queue.len() <= max);
            }
            if outcome.is_ok() {
                outcome = writes.settle_all(&mut stats, &mut written).await;
            }
            check(&written);
            match error_at {
                None => {
                    assert!(outcome.is_ok());
                    assert_eq!(written, through(n - 1), "everything is written");
                    let failures: u64 = refused.iter().sum();
                    assert_eq!(stats.doc_write_failures, failures);
                    assert_eq!(stats.docs_written, 3 * n as u64 - failures);
                }
                Some(e) => {
                    assert!(outcome.is_err());
                    assert!(
                        written.as_u64().unwrap_or(0) < through(e).as_u64().unwrap_or(0),
                        "{written} passes the failed batch {e}"
                    );
                }
            }
            target.abort();
        });
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// What decides checkpoints is `written`, moved only by
        /// `Writes::settle_oldest`: whatever order the target finishes the
        /// writes in, it never passes a batch that is not fully written, it
        /// never passes a failed one, and it ends at the last batch.
        #[test]
        fn a_checkpoint_never_passes_a_batch_that_is_not_fully_written(
            (order, max, refused, error_at) in (1usize..20).prop_flat_map(|n| (
                Just((0..n).collect::<Vec<_>>()).prop_shuffle(),
                1usize..5,
                proptest::collection::vec(0u64..=3, n),
                proptest::option::weighted(0.3, 0..n),
            ))
        ) {
            run_writes(order, max, refused, error_at);
        }
    }

    #[tokio::test]
    async fn a_job_reports_waiting_when_caught_up() {
        let dir = std::env::temp_dir().join(format!("recliner-status-{}", uuid::Uuid::new_v4()));
        let store = store_sqlite::open(&dir).unwrap();
        store.create_db("a").await.unwrap();
        let progress = std::sync::Arc::new(Progress::default());
        let spec = crate::spec::ReplicationSpec::parse(
            &json!({"source": "a", "target": "b", "create_target": true, "continuous": true}),
        )
        .unwrap();
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let job = {
            let (store, progress) = (store.clone(), progress.clone());
            tokio::spawn(async move { run(&store, &spec, stop_rx, &progress, None).await })
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        // Caught up (`changes_pending` is 0 once the feed is read to its end) and idle.
        while progress.snapshot().changes_pending != Some(0)
            || progress.snapshot().process_status != ProcessStatus::Waiting
        {
            assert!(Instant::now() < deadline, "the idle job never waits");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let _ = stop.send(true);
        job.await.unwrap().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_job_that_has_started_is_running() {
        // A peer that accepts connections and never answers: the job is
        // still busy with its first request.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/db", listener.local_addr().unwrap());
        let dir = std::env::temp_dir().join(format!("recliner-running-{}", uuid::Uuid::new_v4()));
        let store = store_sqlite::open(&dir).unwrap();
        let spec =
            crate::spec::ReplicationSpec::parse(&json!({"source": url, "target": "b"})).unwrap();
        let progress = std::sync::Arc::new(Progress::default());
        assert_eq!(progress.snapshot().process_status, ProcessStatus::Waiting);
        let (_stop, stop_rx) = tokio::sync::watch::channel(false);
        let job = {
            let (store, progress) = (store.clone(), progress.clone());
            tokio::spawn(async move { run(&store, &spec, stop_rx, &progress, None).await })
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while progress.snapshot().process_status != ProcessStatus::Running {
            assert!(Instant::now() < deadline, "the job never says it runs");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        job.abort();
        drop(listener);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
