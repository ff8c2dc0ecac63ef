//! One connection per node that listens for every node's commits (`NOTIFY`
//! on the channel of the server's uuid, so clusters sharing a PostgreSQL
//! database in schemas of their own never hear each other) and hands each to
//! the open databases it concerns: changes feeds wake within milliseconds
//! of a write on any node, and cached `_security` objects and design
//! generations follow.
//!
//! Payloads: `"<db_id> <update_seq> <design_changed>"` for a commit,
//! `"<db_id> security"` when `_security` was replaced.
//!
//! Without `NOTIFY` (`PostgresOptions::notify` off), the same registrations
//! are served by polling the databases' change counters (`poll`). A node
//! that listens polls too, rarely ([`SAFETY_NET`]): its feeds and caches
//! never depend on a notification alone.

mod poll;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;
use store::StoreError;
use store::backend::{ChangeListener, RemoteChange};

use crate::conn::{Pool, pg};

/// How long the listening thread waits for a notification before it checks
/// whether its store is gone.
const POLL: Duration = Duration::from_secs(1);

/// How often a node that listens also reads the counters, as the polling
/// nodes do: a commit whose notification never came (a node with `NOTIFY`
/// off, while a cluster switches modes) is still seen within this.
const SAFETY_NET: Duration = Duration::from_secs(5);

/// The channel a server's commits are announced on.
pub(crate) fn channel(server_uuid: &str) -> String {
    format!("recliner_{server_uuid}")
}

/// Listeners of open databases, by database row.
#[derive(Clone)]
pub(crate) struct Listener {
    inner: Arc<Listeners>,
    /// Where commits are announced; `None` when nodes poll instead.
    channel: Option<Arc<str>>,
}

#[derive(Default)]
struct Listeners {
    by_db: Mutex<HashMap<i64, Vec<(u64, ChangeListener)>>>,
    next_token: AtomicU64,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener").finish_non_exhaustive()
    }
}

fn lock(listeners: &Listeners) -> MutexGuard<'_, HashMap<i64, Vec<(u64, ChangeListener)>>> {
    listeners
        .by_db
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Listener {
    /// Starts the listening thread; it ends soon after the store is dropped.
    pub(crate) fn start(pool: Pool, server_uuid: &str) -> Result<Listener, StoreError> {
        let channel: Arc<str> = channel(server_uuid).into();
        let listener = Listener {
            inner: Arc::default(),
            channel: Some(channel.clone()),
        };
        let weak = Arc::downgrade(&listener.inner);
        // The first connection is made here, so a store that cannot listen
        // fails to start rather than serving feeds that never wake.
        let client = listen(&pool, &channel)?;
        listener.spawn_poller(pool.clone(), SAFETY_NET)?;
        std::thread::Builder::new()
            .name("pg-listener".into())
            .spawn(move || run(pool, &channel, client, weak))
            .map_err(StoreError::Io)?;
        Ok(listener)
    }

    /// Starts the polling thread (for engines without `NOTIFY`): every
    /// `every`, one query reads the counters of the databases open here.
    pub(crate) fn start_polling(pool: Pool, every: Duration) -> Result<Listener, StoreError> {
        let listener = Listener {
            inner: Arc::default(),
            channel: None,
        };
        listener.spawn_poller(pool, every)?;
        Ok(listener)
    }

    fn spawn_poller(&self, pool: Pool, every: Duration) -> Result<(), StoreError> {
        // As with `LISTEN`: a store that cannot read the counters fails to
        // start rather than serving feeds that never wake.
        poll::check(&pool)?;
        let weak = Arc::downgrade(&self.inner);
        std::thread::Builder::new()
            .name("pg-poller".into())
            .spawn(move || poll::run(pool, every, weak))
            .map_err(StoreError::Io)?;
        Ok(())
    }

    /// The channel this server's commits are announced on, if they are.
    pub(crate) fn channel(&self) -> Option<&str> {
        self.channel.as_deref()
    }

    /// Calls `listener` with each change of database `db_id`; the token
    /// given back stops it.
    pub(crate) fn register(&self, db_id: i64, listener: ChangeListener) -> u64 {
        let token = self.inner.next_token.fetch_add(1, Ordering::Relaxed);
        lock(&self.inner)
            .entry(db_id)
            .or_default()
            .push((token, listener));
        token
    }

    pub(crate) fn unregister(&self, db_id: i64, token: u64) {
        let mut by_db = lock(&self.inner);
        if let Some(listeners) = by_db.get_mut(&db_id) {
            listeners.retain(|(t, _)| *t != token);
            if listeners.is_empty() {
                by_db.remove(&db_id);
            }
        }
    }
}

/// The databases open here (with a listener).
fn open_ids(listeners: &Listeners) -> Vec<i64> {
    lock(listeners).keys().copied().collect()
}

/// Hands `change` to the listeners of `db_id`, outside the lock (a
/// listener may drop the last handle of its database, which unregisters).
fn dispatch(listeners: &Listeners, db_id: i64, change: RemoteChange) {
    let targets: Vec<ChangeListener> = lock(listeners)
        .get(&db_id)
        .map(|list| list.iter().map(|(_, l)| l.clone()).collect())
        .unwrap_or_default();
    for target in targets {
        target(change);
    }
}

fn listen(pool: &Pool, channel: &str) -> Result<postgres::Client, StoreError> {
    let mut client = pool.connect()?;
    client
        .batch_execute(&format!("LISTEN {channel}"))
        .map_err(pg)?;
    Ok(client)
}

fn parse(payload: &str) -> Option<(i64, RemoteChange)> {
    let mut parts = payload.split(' ');
    let db_id = parts.next()?.parse().ok()?;
    let change = match parts.next()? {
        "security" => RemoteChange::Security,
        seq => RemoteChange::Committed {
            update_seq: seq.parse().ok()?,
            design_changed: parts.next() == Some("design"),
        },
    };
    Some((db_id, change))
}

fn run(pool: Pool, channel: &str, mut client: postgres::Client, listeners: Weak<Listeners>) {
    loop {
        let lost = loop {
            // A fresh wait each time: a timeout iterator whose delay has
            // run out stops waiting at all.
            let next = client.notifications().timeout_iter(POLL).next();
            match next {
                Ok(Some(notification)) => {
                    let Some(live) = listeners.upgrade() else {
                        return;
                    };
                    match parse(notification.payload()) {
                        Some((db_id, change)) => dispatch(&live, db_id, change),
                        None => tracing::warn!(
                            payload = notification.payload(),
                            "an unknown commit notification"
                        ),
                    }
                }
                // Quiet for a while: is the store still there?
                Ok(None) => {
                    if listeners.strong_count() == 0 {
                        return;
                    }
                    if client.is_closed() {
                        break "the connection closed".to_string();
                    }
                }
                Err(e) => break e.to_string(),
            }
        };
        tracing::warn!(error = %lost, "the PostgreSQL listener lost its connection; reconnecting");
        client = loop {
            std::thread::sleep(POLL);
            if listeners.strong_count() == 0 {
                return;
            }
            match listen(&pool, channel) {
                Ok(client) => break client,
                Err(e) => tracing::warn!(error = %e, "cannot listen for commits yet"),
            }
        };
        // Whatever was announced meanwhile is lost: every open database
        // rereads what it caches and wakes its feeds.
        if let Some(live) = listeners.upgrade() {
            catch_up(&pool, &live);
        }
    }
}

/// After a reconnection: tells every open database its latest sequence, as
/// if everything had changed.
fn catch_up(pool: &Pool, listeners: &Listeners) {
    let ids = open_ids(listeners);
    let Ok(mut conn) = pool.get() else {
        return;
    };
    for db_id in ids {
        let seq = conn
            .query_opt(
                "SELECT update_seq FROM recliner_dbs WHERE db_id = $1",
                &[&db_id],
            )
            .ok()
            .flatten()
            .and_then(|row| row.get::<i64>(0).ok());
        if let Some(seq) = seq {
            let commit = RemoteChange::Committed {
                update_seq: seq.max(0) as u64,
                design_changed: true,
            };
            dispatch(listeners, db_id, commit);
            dispatch(listeners, db_id, RemoteChange::Security);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_parse_and_unknown_ones_do_not() {
        assert_eq!(
            parse("7 42 design"),
            Some((
                7,
                RemoteChange::Committed {
                    update_seq: 42,
                    design_changed: true
                }
            ))
        );
        assert_eq!(
            parse("7 43 -"),
            Some((
                7,
                RemoteChange::Committed {
                    update_seq: 43,
                    design_changed: false
                }
            ))
        );
        assert_eq!(parse("7 security"), Some((7, RemoteChange::Security)));
        assert_eq!(parse("x 1"), None);
        assert_eq!(parse("7 many"), None);
    }
}
