//! Database events (created, updated, deleted), gathered for the global
//! changes feed (`_db_updates`). Writers and the store report events here
//! cheaply (a set insert per commit, not per document); a recorder task
//! writes them, coalesced, into `_global_changes`, one document per event
//! type and database (`updated:mydb`), as CouchDB's global changes server
//! does. Like CouchDB's, the feed is best effort: an event noted just
//! before a crash may never be recorded.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::{DocInput, GetOptions, Store, StoreError};

/// The database the events are recorded in, as CouchDB's.
pub const GLOBAL_CHANGES_DB: &str = "_global_changes";

/// How long the recorder gathers events before writing them: many
/// commits of one database within it become one event.
const COALESCE: Duration = Duration::from_millis(100);

/// What happened to a database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DbEventType {
    Created,
    Updated,
    Deleted,
}

impl DbEventType {
    pub fn as_str(self) -> &'static str {
        match self {
            DbEventType::Created => "created",
            DbEventType::Updated => "updated",
            DbEventType::Deleted => "deleted",
        }
    }
}

/// One event, as [`Store::subscribe_db_updates`] announces it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbUpdate {
    pub kind: DbEventType,
    pub db: Arc<str>,
}

/// Events not yet recorded, in the order they first happened, each once.
#[derive(Debug)]
pub(crate) struct DbEvents {
    pending: Mutex<Pending>,
    wake: tokio::sync::Notify,
    /// Databases written since automatic compaction last looked.
    written: Mutex<HashSet<String>>,
    /// Every event as it happens, for whoever follows them (the replication
    /// scheduler wakes parked jobs with it, the `_replicator` manager finds
    /// new replicator databases).
    updates: tokio::sync::broadcast::Sender<DbUpdate>,
}

/// Commits a slow follower may fall behind by before it is told it lagged.
const UPDATES_BUFFER: usize = 4096;

impl Default for DbEvents {
    fn default() -> DbEvents {
        DbEvents {
            pending: Mutex::default(),
            wake: tokio::sync::Notify::new(),
            written: Mutex::default(),
            updates: tokio::sync::broadcast::channel(UPDATES_BUFFER).0,
        }
    }
}

#[derive(Debug, Default)]
struct Pending {
    order: Vec<(DbEventType, String)>,
    seen: HashSet<(DbEventType, String)>,
}

impl DbEvents {
    /// Notes an event (the feed's own database is left out: recording
    /// would update it again, for ever).
    pub(crate) fn note(&self, kind: DbEventType, db: &str) {
        if kind == DbEventType::Updated {
            self.written
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .insert(db.to_string());
        }
        if self.updates.receiver_count() > 0 {
            let _ = self.updates.send(DbUpdate {
                kind,
                db: Arc::from(db),
            });
        }
        if db == GLOBAL_CHANGES_DB {
            return;
        }
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let key = (kind, db.to_string());
        if pending.seen.insert(key.clone()) {
            pending.order.push(key);
            drop(pending);
            self.wake.notify_one();
        }
    }

    /// The databases written since the last call, sorted.
    pub(crate) fn take_written(&self) -> Vec<String> {
        let mut names: Vec<String> = std::mem::take(
            &mut *self
                .written
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        )
        .into_iter()
        .collect();
        names.sort();
        names
    }

    fn take(&self) -> Vec<(DbEventType, String)> {
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        pending.seen.clear();
        std::mem::take(&mut pending.order)
    }
}

impl Store {
    /// Each database event as it happens: a creation, a deletion, or a
    /// commit that moved the update sequence. A receiver that falls behind
    /// is told how many it missed (`Lagged`) and should then look at every
    /// database it follows.
    pub fn subscribe_db_updates(&self) -> tokio::sync::broadcast::Receiver<DbUpdate> {
        self.inner.live.events.updates.subscribe()
    }

    /// Records database events into `_global_changes` until the server
    /// stops (`stop` turns true). Events happen while `_global_changes`
    /// exists only; without it (an admin deleted it) they are dropped, as
    /// in CouchDB.
    pub async fn record_db_events(&self, mut stop: tokio::sync::watch::Receiver<bool>) {
        let events = &self.inner.live.events;
        loop {
            let stopping = tokio::select! {
                _ = events.wake.notified() => {
                    tokio::time::sleep(COALESCE).await;
                    false
                }
                _ = async { stop.wait_for(|s| *s).await.is_ok() } => true,
            };
            let batch = events.take();
            if !batch.is_empty()
                && let Err(e) = self.record(batch).await
            {
                tracing::warn!(error = %e, "database events were not recorded");
            }
            if stopping {
                return;
            }
        }
    }

    /// Writes one batch of events: each event's document gets a new
    /// revision, so it moves to the end of the feed.
    async fn record(&self, batch: Vec<(DbEventType, String)>) -> Result<(), StoreError> {
        let db = match self.db(GLOBAL_CHANGES_DB).await {
            Ok(db) => db,
            Err(StoreError::DbNotFound(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut docs = Vec::with_capacity(batch.len());
        for (kind, name) in batch {
            let id = format!("{}:{name}", kind.as_str());
            let mut body = Map::new();
            body.insert("_id".into(), json!(id));
            match db.get(&id, GetOptions::default()).await {
                Ok(doc) => {
                    if let Some(rev) = doc.to_value()?.get("_rev") {
                        body.insert("_rev".into(), rev.clone());
                    }
                }
                Err(StoreError::DocNotFound(_)) => {}
                Err(e) => return Err(e),
            }
            docs.push(DocInput::from_json(Value::Object(body))?);
        }
        for result in db.bulk_docs(docs, true).await? {
            match result.result {
                Ok(_) => {}
                // Another node sharing the store recorded the same event at
                // the same moment: the event is in the feed.
                Err(e) if e.error == crate::ErrorKind::Conflict => {
                    tracing::debug!(event = %result.id, "a database event was recorded by another node")
                }
                Err(e) => {
                    tracing::warn!(event = %result.id, error = ?e, "a database event was not recorded")
                }
            }
        }
        Ok(())
    }
}
