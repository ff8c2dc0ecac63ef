//! What `_scheduler/jobs`, `_scheduler/docs` and `_active_tasks` show of
//! the scheduler's jobs and `_replicator` documents, and the documents'
//! records the documents manager keeps here.

use std::time::SystemTime;

use serde_json::{Value, json};

use super::{
    DocPhase, Event, EventKind, Job, JobState, Owner, Scheduler, Table, consecutive_crashes,
    state_of,
};
use crate::job::ProgressSnapshot;

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

/// What the scheduler keeps of one `_replicator` document.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct DocRecord {
    pub(super) phase: DocPhase,
    source: Option<String>,
    target: Option<String>,
    start_time: SystemTime,
    pub(super) last_updated: SystemTime,
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

impl Scheduler {
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
