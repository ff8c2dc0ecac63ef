//! The replications running in the background (continuous `/_replicate`
//! requests), by job id, so they can be listed, cancelled and stopped at
//! shutdown.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use store::Store;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::job;
use crate::rep_id::job_id;
use crate::spec::ReplicationSpec;

/// A running replication as it may be shown (no credentials).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobInfo {
    pub id: String,
    pub source: String,
    pub target: String,
    pub started: SystemTime,
}

struct Running {
    info: JobInfo,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// The background replications of one server. Cheap to clone.
#[derive(Clone)]
pub struct Replications {
    store: Store,
    jobs: Arc<Mutex<HashMap<String, Running>>>,
}

impl std::fmt::Debug for Replications {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replications")
            .field("running", &self.list().len())
            .finish()
    }
}

impl Replications {
    pub fn new(store: Store) -> Replications {
        Replications {
            store,
            jobs: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Running>> {
        self.jobs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts a replication in the background (unless the same one already
    /// runs) and returns its job id.
    pub fn start(&self, spec: ReplicationSpec) -> String {
        let id = job_id(self.store.server_uuid(), &spec);
        let mut jobs = self.lock();
        if jobs.get(&id).is_some_and(|r| !r.task.is_finished()) {
            return id;
        }
        let (stop, stop_rx) = watch::channel(false);
        let info = JobInfo {
            id: id.clone(),
            source: spec.source.to_string(),
            target: spec.target.to_string(),
            started: SystemTime::now(),
        };
        let store = self.store.clone();
        let registry = self.clone();
        let job = id.clone();
        let task = tokio::spawn(async move {
            tracing::info!(job = %job, source = %spec.source, target = %spec.target, "replication started");
            match job::run(&store, &spec, stop_rx).await {
                Ok(_) => tracing::info!(job = %job, "replication stopped"),
                Err(e) => tracing::warn!(job = %job, error = %e, "replication failed"),
            }
            registry.lock().remove(&job);
        });
        jobs.insert(id.clone(), Running { info, stop, task });
        id
    }

    /// Stops a running replication; false when no such job runs.
    pub fn cancel(&self, id: &str) -> bool {
        match self.lock().remove(id) {
            Some(running) => {
                let _ = running.stop.send(true);
                true
            }
            None => false,
        }
    }

    /// The running replications.
    pub fn list(&self) -> Vec<JobInfo> {
        let mut jobs: Vec<JobInfo> = self.lock().values().map(|r| r.info.clone()).collect();
        jobs.sort_by(|a, b| a.id.cmp(&b.id));
        jobs
    }

    /// Stops every replication and waits for each to write its checkpoint.
    pub async fn stop_all(&self) {
        let running: Vec<Running> = self.lock().drain().map(|(_, r)| r).collect();
        for r in &running {
            let _ = r.stop.send(true);
        }
        for r in running {
            let _ = r.task.await;
        }
    }
}
