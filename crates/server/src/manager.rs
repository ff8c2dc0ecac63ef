//! The replicator databases' manager: follows the changes of `_replicator`
//! and of every database named `*/_replicator`, and turns each document
//! into a replication job. A new document starts a job, an edited one
//! restarts it, a deleted one cancels it; a document that is not a valid
//! spec is marked `failed` with the reason. Only final states are written
//! back (`_replication_state` `completed` or `failed`, with its time and
//! stats or reason), and the manager's own writes never retrigger a job.
//! A replicator database created while the server runs is followed at
//! once; a deleted one's jobs are cancelled.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

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

/// What the manager remembers of a document it has seen.
struct DocEntry {
    /// The document's spec fields, to tell a user's edit from our own state writes.
    fingerprint: String,
    /// Its job in the scheduler, while it has one.
    job_id: Option<String>,
}

/// Runs the replication documents of one server: hands their jobs to the
/// scheduler and records their final states.
#[derive(Clone)]
pub struct ReplicatorManager {
    store: Store,
    scheduler: Scheduler,
    /// By replicator database and document id.
    docs: Arc<Mutex<HashMap<(String, String), DocEntry>>>,
    /// Finds a document owner's roles, so its jobs run with its rights.
    roles: RolesLookup,
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
    pub fn new(store: Store, scheduler: Scheduler, roles: RolesLookup) -> ReplicatorManager {
        ReplicatorManager {
            store,
            scheduler,
            docs: Arc::new(Mutex::new(HashMap::new())),
            roles,
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
        loop {
            tokio::select! {
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
        let jobs: Vec<String> = {
            let mut docs = self.lock();
            let keys: Vec<(String, String)> =
                docs.keys().filter(|(db, _)| db == name).cloned().collect();
            keys.into_iter()
                .filter_map(|key| docs.remove(&key).and_then(|e| e.job_id))
                .collect()
        };
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
        let job_id = self.schedule(db, id, &doc).await;
        self.lock().insert(
            key,
            DocEntry {
                fingerprint: print,
                job_id,
            },
        );
    }

    /// Turns a document into a job, or records why it cannot be one.
    async fn schedule(&self, db: &Database, id: &str, doc: &Map<String, Value>) -> Option<String> {
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
            return None;
        }
        let mut spec = match self.scheduler.parse_spec(&Value::Object(doc.clone())) {
            Ok(spec) => spec,
            Err(e) => {
                tracing::warn!(doc = %id, reason = %e, "invalid replication document");
                self.fail(db, id, e.0, None).await;
                return None;
            }
        };
        // The job has its owner's rights (the server set `owner` when the
        // document was written); a document without one is an admin's.
        if let Some(Value::String(owner)) = doc.get("owner") {
            let roles = (self.roles)(owner.clone()).await.unwrap_or_default();
            let user = auth::UserCtx {
                name: Some(owner.clone()),
                roles,
                handler: None,
            };
            spec.user = (!user.is_server_admin()).then_some(user);
        }
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
            return None;
        }
        self.scheduler.set_doc(
            db.name(),
            id,
            DocPhase::Scheduled(added.id.clone()),
            Some(source),
            Some(target),
        );
        Some(added.id)
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
