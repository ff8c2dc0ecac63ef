//! The replications running on this server, by job id: background
//! `/_replicate` jobs it runs itself, and jobs others run but register here
//! (the `_replicator` manager's), so that all of them can be listed with
//! their progress (`_active_tasks`, `_scheduler/jobs`), cancelled, and
//! stopped at shutdown.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use store::Store;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::job::{self, Progress, ProgressSnapshot};
use crate::rep_id::job_id;
use crate::spec::ReplicationSpec;

/// A running replication as it may be shown (no credentials).
#[derive(Debug, Clone, PartialEq)]
pub struct JobInfo {
    pub id: String,
    /// The `_replicator` document that describes it, if any.
    pub doc_id: Option<String>,
    pub source: String,
    pub target: String,
    pub continuous: bool,
    pub started: SystemTime,
    pub progress: ProgressSnapshot,
}

struct Running {
    id: String,
    doc_id: Option<String>,
    source: String,
    target: String,
    continuous: bool,
    started: SystemTime,
    progress: Arc<Progress>,
    stop: watch::Sender<bool>,
    /// Present for jobs this registry runs itself.
    task: Option<JoinHandle<()>>,
}

/// A registration of a job run elsewhere; dropping it removes the entry.
#[derive(Debug)]
pub struct Tracked {
    pub id: String,
    pub stop: watch::Receiver<bool>,
    pub progress: Arc<Progress>,
    registry: Replications,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.registry.lock().remove(&self.id);
    }
}

/// The replications of one server. Cheap to clone.
#[derive(Clone)]
pub struct Replications {
    store: Store,
    jobs: Arc<Mutex<HashMap<String, Running>>>,
}

impl std::fmt::Debug for Replications {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replications")
            .field("running", &self.lock().len())
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

    fn entry(
        &self,
        spec: &ReplicationSpec,
        doc_id: Option<String>,
    ) -> (Running, watch::Receiver<bool>) {
        let (stop, stop_rx) = watch::channel(false);
        let running = Running {
            id: job_id(self.store.server_uuid(), spec),
            doc_id,
            source: spec.source.to_string(),
            target: spec.target.to_string(),
            continuous: spec.continuous,
            started: SystemTime::now(),
            progress: Arc::new(Progress::default()),
            stop,
            task: None,
        };
        (running, stop_rx)
    }

    /// Starts a replication in the background (unless the same one already
    /// runs) and returns its job id.
    pub fn start(&self, spec: ReplicationSpec) -> String {
        let (mut running, stop_rx) = self.entry(&spec, None);
        let id = running.id.clone();
        let mut jobs = self.lock();
        if jobs.contains_key(&id) {
            return id;
        }
        let store = self.store.clone();
        let registry = self.clone();
        let progress = running.progress.clone();
        let job = id.clone();
        running.task = Some(tokio::spawn(async move {
            tracing::info!(job = %job, source = %spec.source, target = %spec.target, "replication started");
            match job::run(&store, &spec, stop_rx, &progress).await {
                Ok(_) => tracing::info!(job = %job, "replication stopped"),
                Err(e) => tracing::warn!(job = %job, error = %e, "replication failed"),
            }
            registry.lock().remove(&job);
        }));
        jobs.insert(id.clone(), running);
        id
    }

    /// Registers a job its caller runs (the `_replicator` manager's); `None`
    /// when the same replication already runs (a duplicate).
    pub fn track(&self, spec: &ReplicationSpec, doc_id: &str) -> Option<Tracked> {
        let (running, stop) = self.entry(spec, Some(doc_id.to_string()));
        let mut jobs = self.lock();
        if jobs.contains_key(&running.id) {
            return None;
        }
        let tracked = Tracked {
            id: running.id.clone(),
            stop,
            progress: running.progress.clone(),
            registry: self.clone(),
        };
        jobs.insert(running.id.clone(), running);
        Some(tracked)
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

    /// The running replications, by id.
    pub fn list(&self) -> Vec<JobInfo> {
        let mut jobs: Vec<JobInfo> = self
            .lock()
            .values()
            .map(|r| JobInfo {
                id: r.id.clone(),
                doc_id: r.doc_id.clone(),
                source: r.source.clone(),
                target: r.target.clone(),
                continuous: r.continuous,
                started: r.started,
                progress: r.progress.snapshot(),
            })
            .collect();
        jobs.sort_by(|a, b| a.id.cmp(&b.id));
        jobs
    }

    /// Stops every replication this registry runs and waits for each to
    /// write its checkpoint (tracked jobs are stopped by their runner).
    pub async fn stop_all(&self) {
        let running: Vec<Running> = {
            let mut jobs = self.lock();
            let ids: Vec<String> = jobs
                .iter()
                .filter(|(_, r)| r.task.is_some())
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter().filter_map(|id| jobs.remove(id)).collect()
        };
        for r in &running {
            let _ = r.stop.send(true);
        }
        for r in running {
            if let Some(task) = r.task {
                let _ = task.await;
            }
        }
    }
}
