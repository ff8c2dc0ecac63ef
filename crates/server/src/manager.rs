//! The `_replicator` database manager: follows the database's changes and
//! turns each document into a replication job. A new document starts a job,
//! an edited one restarts it, a deleted one cancels it; a document that is
//! not a valid spec is marked `failed` with the reason. Only final states are
//! written back (`_replication_state` `completed` or `failed`, with its time
//! and stats or reason), and the manager's own writes never retrigger a job.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use replicator::{ReplicationSpec, Replications, Tracked};
use serde_json::{Map, Value, json};
use store::{ChangesQuery, Database, DocInput, Store};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The database CouchDB's users write replication documents into.
pub const REPLICATOR_DB: &str = "_replicator";

/// Changes read per page while following `_replicator`.
const PAGE: usize = 500;

/// First wait before restarting a job that failed; doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(30);
const MAX_BACKOFF: Duration = Duration::from_secs(8 * 60);

/// A job started from a document.
struct DocJob {
    /// The document's spec fields, to tell a user's edit from our own state writes.
    fingerprint: String,
    /// Its id in the server's registry of replications (how it is stopped).
    job_id: String,
    task: JoinHandle<()>,
}

/// Runs the `_replicator` documents of one server.
#[derive(Clone)]
pub struct ReplicatorManager {
    store: Store,
    replications: Replications,
    jobs: Arc<Mutex<HashMap<String, DocJob>>>,
}

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
    pub fn new(store: Store, replications: Replications) -> ReplicatorManager {
        ReplicatorManager {
            store,
            replications,
            jobs: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, DocJob>> {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Follows `_replicator` until `shutdown` turns true, then stops every job.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let db = match self.store.ensure_db(REPLICATOR_DB).await {
            Ok(db) => db,
            Err(e) => {
                tracing::error!(error = %e, "cannot open the _replicator database");
                return;
            }
        };
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
                Err(e) => tracing::error!(error = %e, "reading _replicator failed"),
            }
            tokio::select! {
                changed = updates.changed() => if changed.is_err() { break },
                _ = shutdown.changed() => break,
            }
        }
        self.stop_all().await;
    }

    async fn handle(&self, db: &Database, id: &str, deleted: bool, doc: Option<Value>) {
        if id.starts_with("_design/") {
            return;
        }
        let doc = match (deleted, doc) {
            (false, Some(Value::Object(doc))) => doc,
            _ => {
                if let Some(job) = self.lock().remove(id) {
                    tracing::info!(doc = %id, "replication document deleted; job cancelled");
                    self.replications.cancel(&job.job_id);
                }
                return;
            }
        };
        let print = fingerprint(&doc);
        if let Some(job) = self.lock().get(id)
            && job.fingerprint == print
        {
            // Our own state write, or an edit of fields that do not matter.
            return;
        }
        let previous = self.lock().remove(id);
        if let Some(old) = previous {
            tracing::info!(doc = %id, "replication document edited; job restarted");
            self.replications.cancel(&old.job_id);
            // Let it checkpoint and leave the registry before its successor starts.
            let _ = old.task.await;
        }
        if matches!(
            doc.get("_replication_state").and_then(Value::as_str),
            Some("completed" | "failed")
        ) {
            // Finished before: CouchDB does not start these again.
            return;
        }
        let spec = match ReplicationSpec::parse(&Value::Object(doc.clone())) {
            Ok(spec) => spec,
            Err(e) => {
                tracing::warn!(doc = %id, reason = %e, "invalid replication document");
                write_state(db, id, "failed", json!({"_replication_state_reason": e.0})).await;
                return;
            }
        };
        let Some(tracked) = self.replications.track(&spec, id) else {
            let rep_id = replicator::job_id(self.store.server_uuid(), &spec);
            let reason = format!(
                "Replication `{rep_id}` specified by document `{id}` already started by another document"
            );
            write_state(
                db,
                id,
                "failed",
                json!({"_replication_state_reason": reason}),
            )
            .await;
            return;
        };
        let job_id = tracked.id.clone();
        let task = tokio::spawn(run_job(
            self.store.clone(),
            db.clone(),
            id.to_string(),
            spec,
            tracked,
        ));
        self.lock().insert(
            id.to_string(),
            DocJob {
                fingerprint: print,
                job_id,
                task,
            },
        );
    }

    async fn stop_all(&self) {
        let jobs: Vec<DocJob> = self.lock().drain().map(|(_, j)| j).collect();
        for job in &jobs {
            self.replications.cancel(&job.job_id);
        }
        for job in jobs {
            let _ = job.task.await;
        }
    }
}

/// One document's job: run it, restart it with backoff after failures,
/// and record a one-shot's completion in its document.
async fn run_job(store: Store, db: Database, id: String, spec: ReplicationSpec, tracked: Tracked) {
    let mut backoff = FIRST_BACKOFF;
    let mut stop = tracked.stop.clone();
    loop {
        tracing::info!(doc = %id, job = %tracked.id, source = %spec.source, target = %spec.target, "replication started");
        match replicator::run(&store, &spec, stop.clone(), &tracked.progress).await {
            Ok(log) => {
                if *stop.borrow() || spec.continuous {
                    return;
                }
                let stats = log["history"].get(0).map(|h| {
                    json!({
                        "revisions_checked": h["missing_checked"],
                        "missing_revisions_found": h["missing_found"],
                        "docs_read": h["docs_read"],
                        "docs_written": h["docs_written"],
                        "doc_write_failures": h["doc_write_failures"],
                        "checkpointed_source_seq": log["source_last_seq"],
                    })
                });
                tracing::info!(doc = %id, "replication completed");
                write_state(
                    &db,
                    &id,
                    "completed",
                    json!({"_replication_stats": stats.unwrap_or(json!({}))}),
                )
                .await;
                return;
            }
            Err(e) => {
                tracing::warn!(doc = %id, error = %e, retry_in = ?backoff, "replication crashed");
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = stop.changed() => return,
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
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
