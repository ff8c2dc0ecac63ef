//! Parked jobs: a continuous job that caught up gives up its slot until
//! its source changes, woken by the store (a local source), by its
//! server's `_db_updates` feed, or by a longpoll of its own (a remote one).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use store::Store;
use tokio::task::JoinHandle;

use super::{Job, Parked, Scheduler, Table};
use crate::peer::http::remote_feed::RemoteFeeds;
use crate::peer::{Endpoint, HttpOptions};
use crate::spec::ReplicationSpec;

impl Scheduler {
    /// Parks a job that caught up: it waits for its source's next change
    /// with no slot, task or open database. A local source is followed
    /// through the store's commits; a remote one by a longpoll feed of its
    /// own. A change that landed while the job was ending wakes it at once.
    pub(super) fn park(&self, table: &mut Table, id: &str, generation: u64, since: Value) {
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
pub(super) fn unpark(table: &mut Table, job: &mut Job, feeds: &RemoteFeeds) {
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

/// The longest wait of a parked job's longpoll on a remote source.
const REMOTE_WAIT: Duration = Duration::from_secs(60);
