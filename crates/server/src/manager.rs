//! The replicator databases' manager: follows the changes of `_replicator`
//! and of every database named `*/_replicator`, and turns each document
//! into a replication job. A new document starts a job, an edited one
//! restarts it, a deleted one cancels it; a document that is not a valid
//! spec is marked `failed` with the reason. Only final states are written
//! back (`_replication_state` `completed` or `failed`, with its time and
//! stats or reason), and the manager's own writes never retrigger a job.
//! A replicator database created while the server runs is followed at
//! once; a deleted one's jobs are cancelled.
//!
//! Nodes sharing a store (PostgreSQL) all follow the same documents, and
//! each job runs on one node only: the one holding its lease in the store.
//! The holder renews it every [`LEASE_TICK`]; the others try to take the
//! leases they wait for as often, so when a node dies another one starts
//! its jobs within [`LEASE_TTL`] and a tick, from their checkpoints (the
//! replication ids are the same on every node: they share the server uuid).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use replicator::{DocCompleted, DocPhase, Owner, Scheduler};
use serde_json::{Map, Value, json};
use store::db_events::{DbEventType, DbUpdate};
use store::name::is_replicator_db;
use store::{ChangesQuery, Database, DocInput, Store};
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;

/// The replicator database every server has.
pub const REPLICATOR_DB: &str = "_replicator";

/// Changes read per page while following a replicator database.
const PAGE: usize = 500;

/// How long a node's lease on a document's job lasts unless renewed.
pub const LEASE_TTL: Duration = Duration::from_secs(15);

/// How often held leases are renewed and awaited ones sought.
pub const LEASE_TICK: Duration = Duration::from_secs(5);

/// What the manager remembers of a document it has seen.
struct DocEntry {
    /// The document's spec fields, to tell a user's edit from our own state writes.
    fingerprint: String,
    /// Its job in the scheduler, while it has one.
    job_id: Option<String>,
    /// Another node holds the document's lease: this node schedules the
    /// document if it gets the lease.
    waiting: bool,
    /// When this node last renewed the lease of the document's job.
    renewed: Instant,
}

/// A document whose lease a tick renews or seeks.
struct LeaseCheck {
    db: String,
    doc_id: String,
    job_id: Option<String>,
    waiting: bool,
    renewed: Instant,
}

/// What became of a document handed to the scheduler.
enum Scheduled {
    Job(String),
    /// Finished or refused: no job.
    Nothing,
    /// Another node holds its lease.
    Elsewhere,
}

/// The lease of one document's job.
fn lease_key(db: &str, doc_id: &str) -> String {
    // JSON: database names and document ids may both hold `/`.
    json!(["_replicator", db, doc_id]).to_string()
}

/// Runs the replication documents of one server: hands their jobs to the
/// scheduler and records their final states.
#[derive(Clone)]
pub struct ReplicatorManager {
    store: Store,
    scheduler: Scheduler,
    /// This process among the nodes sharing the store: the holder of its leases.
    node: Arc<str>,
    /// By replicator database and document id.
    docs: Arc<Mutex<HashMap<(String, String), DocEntry>>>,
    /// Finds a document owner's roles, so its jobs run with its rights.
    roles: RolesLookup,
    /// Whom a document without an owner runs as: an anonymous caller
    /// (a server admin in an admin party, where every caller is one).
    nobody: auth::UserCtx,
}

/// A user's roles by name (`None`: no such user), from the server's
/// admins and `_users`.
pub type RolesLookup = Arc<
    dyn Fn(
            String,
        )
            -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<Vec<String>>> + Send>>
        + Send
        + Sync,
>;

/// The parts of a document that describe the replication: everything but
/// revision and state fields, in canonical JSON.
fn fingerprint(doc: &Map<String, Value>) -> String {
    let spec: Map<String, Value> = doc
        .iter()
        .filter(|(k, _)| k.as_str() != "_rev" && !k.starts_with("_replication_"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut out = Vec::new();
    let _ = revtree::write_canonical_json(&mut out, &Value::Object(spec));
    String::from_utf8(out).unwrap_or_default()
}

fn now_iso() -> String {
    replicator::rfc3339(SystemTime::now())
}

impl ReplicatorManager {
    pub fn new(
        store: Store,
        scheduler: Scheduler,
        roles: RolesLookup,
        node: Arc<str>,
        nobody: auth::UserCtx,
    ) -> ReplicatorManager {
        ReplicatorManager {
            store,
            scheduler,
            node,
            docs: Arc::new(Mutex::new(HashMap::new())),
            roles,
            nobody,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<(String, String), DocEntry>> {
        self.docs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Follows every replicator database until `shutdown` turns true.
    /// Jobs belong to the scheduler, which stops them at shutdown.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        if let Err(e) = self.store.ensure_db(REPLICATOR_DB).await {
            tracing::error!(error = %e, "cannot open the _replicator database");
        }
        // Subscribed before listing: a database created in between is seen.
        let mut events = self.store.subscribe_db_updates();
        let mut followers: HashMap<String, JoinHandle<()>> = HashMap::new();
        self.follow_all(&mut followers).await;
        let mut completed = self.scheduler.completed_docs();
        let mut tick = tokio::time::interval(LEASE_TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    self.renew_and_seek_leases().await;
                    if self.store.is_shared() {
                        // Other nodes create and delete replicator databases
                        // without telling this one.
                        self.follow_all(&mut followers).await;
                    }
                }
                event = events.recv() => match event {
                    Ok(DbUpdate { kind: DbEventType::Created, db }) if is_replicator_db(&db) => {
                        self.follow(&mut followers, &db).await;
                    }
                    Ok(DbUpdate { kind: DbEventType::Deleted, db }) if is_replicator_db(&db) => {
                        self.unfollow(&mut followers, &db).await;
                    }
                    Ok(_) => {}
                    // Missed events: compare with the databases there are.
                    Err(broadcast::error::RecvError::Lagged(_)) => self.follow_all(&mut followers).await,
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                Some(done) = completed.recv() => self.record_completion(done).await,
                _ = shutdown.changed() => break,
            }
        }
        for follower in followers.into_values() {
            follower.abort();
        }
        // Stopping: once a job has stopped (and checkpointed), another
        // node may take it at once rather than when its lease runs out.
        if self.store.is_shared() {
            let held: Vec<((String, String), String)> = self
                .lock()
                .iter()
                .filter_map(|(key, entry)| Some((key.clone(), entry.job_id.clone()?)))
                .collect();
            for ((db, doc_id), job_id) in held {
                self.scheduler.remove(&job_id).await;
                self.release(&db, &doc_id).await;
            }
        }
    }

    async fn release(&self, db: &str, doc_id: &str) {
        if !self.store.is_shared() {
            return;
        }
        if let Err(e) = self
            .store
            .release_lease(&lease_key(db, doc_id), &self.node)
            .await
        {
            tracing::warn!(db = %db, doc = %doc_id, error = %e, "cannot give a replication's lease up");
        }
    }

    /// Renews the leases of the jobs this node runs (stopping any it lost),
    /// and schedules the documents whose lease it can take now.
    async fn renew_and_seek_leases(&self) {
        // A store no other node shares grants every lease for good: with
        // thousands of jobs, asking again every tick is wasted work.
        if !self.store.is_shared() {
            return;
        }
        let entries: Vec<LeaseCheck> = self
            .lock()
            .iter()
            .filter(|(_, entry)| entry.job_id.is_some() || entry.waiting)
            .map(|((db, doc_id), entry)| LeaseCheck {
                db: db.clone(),
                doc_id: doc_id.clone(),
                job_id: entry.job_id.clone(),
                waiting: entry.waiting,
                renewed: entry.renewed,
            })
            .collect();
        for LeaseCheck {
            db,
            doc_id,
            job_id,
            waiting,
            renewed,
        } in entries
        {
            let key = lease_key(&db, &doc_id);
            let held = self.store.lease(&key, &self.node, LEASE_TTL).await;
            match (job_id, held) {
                (Some(_), Ok(true)) => {
                    if let Some(entry) = self.lock().get_mut(&(db.clone(), doc_id.clone())) {
                        entry.renewed = Instant::now();
                    }
                }
                (Some(job_id), outcome) => {
                    // Lost to another node, or not renewed for so long that
                    // another node may have taken it: stop, and wait for it.
                    let lost = matches!(outcome, Ok(false)) || renewed.elapsed() >= LEASE_TTL;
                    if let Err(e) = &outcome {
                        tracing::warn!(db = %db, doc = %doc_id, error = %e, "cannot renew a replication's lease");
                    }
                    if lost {
                        tracing::warn!(db = %db, doc = %doc_id, job = %job_id, "the replication's lease is lost; its job stops here");
                        self.scheduler.remove(&job_id).await;
                        self.scheduler.forget_doc(&db, &doc_id);
                        if let Some(entry) = self.lock().get_mut(&(db.clone(), doc_id.clone())) {
                            entry.job_id = None;
                            entry.waiting = true;
                        }
                    }
                }
                (None, Ok(true)) if waiting => {
                    // Ours now: the document as it is now (its holder may
                    // have finished it meanwhile).
                    let Ok(database) = self.store.db(&db).await else {
                        self.release(&db, &doc_id).await;
                        continue;
                    };
                    let doc = database
                        .get(&doc_id, Default::default())
                        .await
                        .ok()
                        .and_then(|json| json.to_value().ok());
                    let Some(Value::Object(doc)) = doc else {
                        self.lock().remove(&(db.clone(), doc_id.clone()));
                        self.release(&db, &doc_id).await;
                        continue;
                    };
                    tracing::info!(db = %db, doc = %doc_id, "took over a replication's lease");
                    let scheduled = self.schedule(&database, &doc_id, &doc).await;
                    self.record(&db, &doc_id, fingerprint(&doc), scheduled)
                        .await;
                }
                (None, Ok(_)) => {}
                (None, Err(e)) => {
                    tracing::debug!(db = %db, doc = %doc_id, error = %e, "cannot take a replication's lease yet")
                }
            }
        }
    }

    /// Remembers what became of a document; gives its lease up when it has
    /// no job here.
    async fn record(&self, db: &str, doc_id: &str, fingerprint: String, scheduled: Scheduled) {
        let (job_id, waiting) = match scheduled {
            Scheduled::Job(id) => (Some(id), false),
            Scheduled::Nothing => (None, false),
            Scheduled::Elsewhere => (None, true),
        };
        let release = job_id.is_none() && !waiting;
        self.lock().insert(
            (db.to_string(), doc_id.to_string()),
            DocEntry {
                fingerprint,
                job_id,
                waiting,
                renewed: Instant::now(),
            },
        );
        if release {
            self.release(db, doc_id).await;
        }
    }

    /// Follows every replicator database there is, and stops following
    /// those that are gone.
    async fn follow_all(&self, followers: &mut HashMap<String, JoinHandle<()>>) {
        let names = match self.store.all_dbs().await {
            Ok(names) => names,
            Err(e) => {
                tracing::error!(error = %e, "cannot list the replicator databases");
                return;
            }
        };
        let present: std::collections::HashSet<&str> = names
            .iter()
            .map(String::as_str)
            .filter(|n| is_replicator_db(n))
            .collect();
        let gone: Vec<String> = followers
            .keys()
            .filter(|n| !present.contains(n.as_str()))
            .cloned()
            .collect();
        for name in gone {
            self.unfollow(followers, &name).await;
        }
        for name in present {
            if !followers.contains_key(name) {
                self.follow(followers, name).await;
            }
        }
    }

    /// Starts following a replicator database (again, when it was
    /// deleted and created anew).
    async fn follow(&self, followers: &mut HashMap<String, JoinHandle<()>>, name: &str) {
        if followers.contains_key(name) {
            // Created again after a deletion this manager missed.
            self.unfollow(followers, name).await;
        }
        let db = match self.store.db(name).await {
            Ok(db) => db,
            Err(e) => {
                tracing::debug!(db = %name, error = %e, "replicator database gone before it was followed");
                return;
            }
        };
        tracing::info!(db = %name, "following a replicator database");
        let manager = self.clone();
        followers.insert(
            name.to_string(),
            tokio::spawn(async move { manager.follow_db(db).await }),
        );
    }

    /// A replicator database was deleted: its jobs are cancelled.
    async fn unfollow(&self, followers: &mut HashMap<String, JoinHandle<()>>, name: &str) {
        if let Some(follower) = followers.remove(name) {
            follower.abort();
        }
        let (jobs, held): (Vec<String>, Vec<String>) = {
            let mut docs = self.lock();
            let keys: Vec<(String, String)> =
                docs.keys().filter(|(db, _)| db == name).cloned().collect();
            keys.into_iter()
                .filter_map(|key| {
                    docs.remove(&key)
                        .and_then(|e| e.job_id)
                        .map(|job| (job, key.1))
                })
                .unzip()
        };
        for doc_id in held {
            self.release(name, &doc_id).await;
        }
        // A job the follower added just before it was stopped is not in
        // the map yet: the scheduler knows its owner.
        let mut jobs: std::collections::BTreeSet<String> = jobs.into_iter().collect();
        jobs.extend(self.scheduler.jobs_of_db(name));
        if !jobs.is_empty() {
            tracing::info!(db = %name, jobs = jobs.len(), "replicator database deleted; its jobs are cancelled");
        }
        self.scheduler.forget_db(name);
        for job in jobs {
            self.scheduler.remove(&job).await;
        }
    }

    /// Follows one replicator database's changes for as long as it exists.
    async fn follow_db(self, db: Database) {
        let mut updates = db.subscribe();
        let mut since = 0;
        loop {
            updates.borrow_and_update();
            let query = ChangesQuery {
                since,
                limit: PAGE,
                include_docs: true,
                count_pending: false,
                ..Default::default()
            };
            match db.changes(query).await {
                Ok(page) => {
                    for row in &page.rows {
                        self.handle(
                            &db,
                            &row.id,
                            row.deleted,
                            row.doc.as_ref().and_then(|d| d.to_value().ok()),
                        )
                        .await;
                    }
                    since = page.last_seq;
                    if page.rows.len() == PAGE {
                        continue;
                    }
                }
                Err(e) => {
                    tracing::error!(db = %db.name(), error = %e, "reading a replicator database failed")
                }
            }
            if updates.changed().await.is_err() {
                return;
            }
        }
    }

    /// A one-shot job finished: its document says so (unless it changed meanwhile).
    async fn record_completion(&self, done: DocCompleted) {
        let DocCompleted { db, doc_id, stats } = done;
        let key = (db, doc_id);
        let finished_job = match self.lock().get_mut(&key) {
            Some(entry) => entry.job_id.take(),
            None => None,
        };
        if finished_job.is_none() {
            return;
        }
        let (db, doc_id) = key;
        tracing::info!(db = %db, doc = %doc_id, "replication completed");
        self.release(&db, &doc_id).await;
        let Ok(db) = self.store.db(&db).await else {
            return;
        };
        write_state(
            &db,
            &doc_id,
            "completed",
            json!({"_replication_stats": stats}),
        )
        .await;
    }

    async fn handle(&self, db: &Database, id: &str, deleted: bool, doc: Option<Value>) {
        if id.starts_with("_design/") {
            return;
        }
        let key = (db.name().to_string(), id.to_string());
        let doc = match (deleted, doc) {
            (false, Some(Value::Object(doc))) => doc,
            _ => {
                let entry = self.lock().remove(&key);
                if let Some(job_id) = entry.and_then(|e| e.job_id) {
                    tracing::info!(doc = %id, job = %job_id, "replication document deleted; job cancelled");
                    self.scheduler.remove(&job_id).await;
                    self.release(db.name(), id).await;
                }
                self.scheduler.forget_doc(db.name(), id);
                return;
            }
        };
        let print = fingerprint(&doc);
        if self
            .lock()
            .get(&key)
            .is_some_and(|e| e.fingerprint == print)
        {
            // Our own state write, or an edit of fields that do not matter.
            return;
        }
        let previous = self.lock().remove(&key);
        if let Some(job_id) = previous.and_then(|e| e.job_id) {
            tracing::info!(doc = %id, job = %job_id, "replication document edited; job restarted");
            // Waits for its checkpoint before its successor starts.
            self.scheduler.remove(&job_id).await;
        }
        let scheduled = self.schedule(db, id, &doc).await;
        self.record(db.name(), id, print, scheduled).await;
    }

    /// Turns a document into a job (when this node holds its lease), or
    /// records why it cannot be one.
    async fn schedule(&self, db: &Database, id: &str, doc: &Map<String, Value>) -> Scheduled {
        let recorded = doc.get("_replication_state").and_then(Value::as_str);
        if let Some(state @ ("completed" | "failed")) = recorded {
            // Finished before: CouchDB does not start these again.
            let phase = if state == "completed" {
                DocPhase::Completed(doc.get("_replication_stats").cloned().unwrap_or(json!({})))
            } else {
                DocPhase::Failed(
                    doc.get("_replication_state_reason")
                        .and_then(Value::as_str)
                        .unwrap_or("failed")
                        .to_string(),
                )
            };
            // `_scheduler/docs` still names the peers (without credentials).
            let (source, target) = self
                .scheduler
                .parse_spec(&Value::Object(doc.clone()))
                .map(|spec| (spec.source.to_string(), spec.target.to_string()))
                .ok()
                .unzip();
            self.scheduler.set_doc(db.name(), id, phase, source, target);
            return Scheduled::Nothing;
        }
        // Whoever holds the lease runs the job and writes its final state.
        match self
            .store
            .lease(&lease_key(db.name(), id), &self.node, LEASE_TTL)
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                self.scheduler.forget_doc(db.name(), id);
                return Scheduled::Elsewhere;
            }
            Err(e) => {
                tracing::warn!(doc = %id, error = %e, "cannot take a replication's lease; trying again later");
                return Scheduled::Elsewhere;
            }
        }
        let mut spec = match self.scheduler.parse_spec(&Value::Object(doc.clone())) {
            Ok(spec) => spec,
            Err(e) => {
                tracing::warn!(doc = %id, reason = %e, "invalid replication document");
                self.fail(db, id, e.0, None).await;
                return Scheduled::Nothing;
            }
        };
        // The job has its owner's rights (every write sets `owner` to the
        // writer); a document without one runs with nobody's rights, never
        // an admin's.
        let user =
            access::replication::document_runs_as(doc, |name| (self.roles)(name), &self.nobody)
                .await;
        spec.user = access::replication::job_rights(user);
        let source = spec.source.to_string();
        let target = spec.target.to_string();
        let added = self.scheduler.add(
            spec,
            Owner::Doc {
                db: db.name().into(),
                doc_id: id.into(),
            },
        );
        if !added.new {
            let reason = format!(
                "Replication `{}` specified by document `{id}` already started by another document",
                added.id
            );
            self.fail(db, id, reason, Some((source, target))).await;
            return Scheduled::Nothing;
        }
        self.scheduler.set_doc(
            db.name(),
            id,
            DocPhase::Scheduled(added.id.clone()),
            Some(source),
            Some(target),
        );
        Scheduled::Job(added.id)
    }

    async fn fail(&self, db: &Database, id: &str, reason: String, peers: Option<(String, String)>) {
        let (source, target) = peers.unzip();
        self.scheduler.set_doc(
            db.name(),
            id,
            DocPhase::Failed(reason.clone()),
            source,
            target,
        );
        write_state(
            db,
            id,
            "failed",
            json!({"_replication_state_reason": reason}),
        )
        .await;
    }
}

/// Records a final state in the document (the manager is its only writer).
async fn write_state(db: &Database, id: &str, state: &str, extra: Value) {
    let Ok(current) = db
        .get(id, store::GetOptions::default())
        .await
        .and_then(|d| d.to_value())
    else {
        return;
    };
    let Value::Object(mut doc) = current else {
        return;
    };
    doc.retain(|k, _| !k.starts_with("_replication_"));
    doc.insert("_replication_state".into(), Value::String(state.into()));
    doc.insert("_replication_state_time".into(), Value::String(now_iso()));
    if let Value::Object(extra) = extra {
        doc.extend(extra);
    }
    match DocInput::from_json(Value::Object(doc)) {
        Ok(input) => {
            if let Err(e) = db.bulk_docs(vec![input], true).await {
                tracing::warn!(doc = %id, error = %e, "cannot record the replication state");
            }
        }
        Err(e) => tracing::warn!(doc = %id, error = %e, "cannot record the replication state"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_fields_and_revisions_do_not_change_the_fingerprint() {
        let a = json!({"_id": "r", "_rev": "1-a", "source": "a", "target": "b"});
        let b = json!({"_id": "r", "_rev": "2-b", "target": "b", "source": "a",
                       "_replication_state": "completed", "_replication_stats": {}});
        let c = json!({"_id": "r", "_rev": "3-c", "source": "a", "target": "c"});
        let f = |v: &Value| fingerprint(v.as_object().unwrap());
        assert_eq!(f(&a), f(&b));
        assert_ne!(f(&a), f(&c));
    }

    #[test]
    fn state_times_are_utc_rfc3339() {
        let t = now_iso();
        assert_eq!(t.len(), 20);
        assert!(t.ends_with('Z') && t.as_bytes()[10] == b'T');
    }
}
