//! Waking parked jobs whose source is on a remote server: one
//! `_db_updates` feed per server (and credentials) serves every job
//! parked on its databases, instead of a longpoll changes feed per job.
//! CouchDB and Recliner show that feed to server admins only: where the
//! credentials do not allow it (or the server has no such feed, as
//! PouchDB Server), the jobs fall back to a longpoll each.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use md5::Digest as _;
use serde_json::Value;

use super::{HttpOptions, HttpPeer};
use crate::peer::EndpointError;
use crate::spec::RemoteDb;

/// A server as seen with one set of credentials and headers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ServerKey {
    /// The server's root (the database URL without its last segment).
    root: String,
    user: Option<String>,
    password: Option<[u8; 16]>,
    headers: Vec<(String, String)>,
}

impl ServerKey {
    fn of(db: &RemoteDb) -> Option<ServerKey> {
        let root = db.url.join("..").ok()?;
        Some(ServerKey {
            root: root.to_string(),
            user: db.auth.as_ref().map(|a| a.username.clone()),
            password: db
                .auth
                .as_ref()
                .map(|a| md5::Md5::digest(a.password.as_bytes()).into()),
            headers: db.headers.clone(),
        })
    }
}

/// The database name a remote database URL names (its last segment).
fn db_name(db: &RemoteDb) -> Option<String> {
    let segment = db.url.path_segments()?.rev().find(|s| !s.is_empty())?;
    Some(
        percent_encoding::percent_decode_str(segment)
            .decode_utf8_lossy()
            .into_owned(),
    )
}

/// A job parked on a remote database.
struct Parked {
    db: String,
    since: Value,
    endpoint: HttpPeer,
}

/// One server's feed and the jobs it serves.
struct Server {
    /// The feed answers: new jobs need only one look of their own (for
    /// changes between their last run and their registration).
    following: bool,
    jobs: HashMap<String, Parked>,
    by_db: HashMap<String, HashSet<String>>,
}

/// What the feeds call back: wake a job, or give it a longpoll of its own.
pub(crate) trait Waker: Clone + Send + Sync + 'static {
    fn wake(&self, job: &str);
    /// The server has no feed for these credentials: each job follows its
    /// own source.
    fn watch_alone(&self, job: &str);
}

/// Every remote server's feed. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct RemoteFeeds {
    servers: Arc<Mutex<HashMap<ServerKey, Server>>>,
    /// Servers (with credentials) known to refuse `_db_updates`.
    refused: Arc<Mutex<HashSet<ServerKey>>>,
}

/// How long the feed may stay silent: it asks for a heartbeat at a third.
const HEARTBEAT: Duration = Duration::from_secs(10);
/// The longest line of the feed read (events are small).
const MAX_LINE: usize = 64 * 1024;
/// The wait before reconnecting a broken feed.
const RECONNECT: Duration = Duration::from_secs(2);

impl RemoteFeeds {
    fn servers(&self) -> std::sync::MutexGuard<'_, HashMap<ServerKey, Server>> {
        self.servers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Parks `job` on its remote source's server feed. False when that
    /// server refuses the feed to these credentials: the caller follows
    /// the job's source alone.
    pub fn park(
        &self,
        waker: &impl Waker,
        job: &str,
        db: &RemoteDb,
        options: HttpOptions,
        since: Value,
    ) -> bool {
        let (Some(key), Some(name)) = (ServerKey::of(db), db_name(db)) else {
            return false;
        };
        if self
            .refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&key)
        {
            return false;
        }
        let Ok(endpoint) = HttpPeer::new(db, options) else {
            return false;
        };
        let mut servers = self.servers();
        let start = !servers.contains_key(&key);
        let server = servers.entry(key.clone()).or_insert_with(|| Server {
            following: false,
            jobs: HashMap::new(),
            by_db: HashMap::new(),
        });
        server
            .by_db
            .entry(name.clone())
            .or_default()
            .insert(job.to_string());
        server.jobs.insert(
            job.to_string(),
            Parked {
                db: name,
                since: since.clone(),
                endpoint: endpoint.clone(),
            },
        );
        let following = server.following;
        drop(servers);
        if start {
            let feeds = self.clone();
            let waker = waker.clone();
            let feed_endpoint = HttpPeer::new(db, options);
            tokio::spawn(async move {
                if let Ok(endpoint) = feed_endpoint {
                    feeds.follow(&key, endpoint, &waker).await;
                }
            });
        } else if following {
            // Changes between the job's last look and now came before it
            // was listed: look once.
            look_once(waker.clone(), job.to_string(), endpoint, since);
        }
        true
    }

    /// A job that runs again (or is gone) no longer waits on its server.
    pub fn unpark(&self, job: &str, db: &RemoteDb) {
        let Some(key) = ServerKey::of(db) else {
            return;
        };
        let mut servers = self.servers();
        let Some(server) = servers.get_mut(&key) else {
            return;
        };
        if let Some(parked) = server.jobs.remove(job)
            && let Some(ids) = server.by_db.get_mut(&parked.db)
        {
            ids.remove(job);
            if ids.is_empty() {
                server.by_db.remove(&parked.db);
            }
        }
    }

    /// Forgets a server no job waits on (in one look, so a job parking
    /// meanwhile finds either this feed or none and starts its own).
    fn end_if_unused(&self, key: &ServerKey) -> bool {
        let mut servers = self.servers();
        if servers.get(key).is_none_or(|s| s.jobs.is_empty()) {
            servers.remove(key);
            return true;
        }
        false
    }

    /// Follows one server's `_db_updates` while jobs wait on it; each
    /// (re)connection looks once at every waiting job's source.
    async fn follow(&self, key: &ServerKey, endpoint: HttpPeer, waker: &impl Waker) {
        loop {
            if self.end_if_unused(key) {
                return;
            }
            match endpoint.db_updates_feed(HEARTBEAT).await {
                Ok(mut feed) => {
                    let waiting: Vec<(String, HttpPeer, Value)> = {
                        let mut servers = self.servers();
                        let Some(server) = servers.get_mut(key) else {
                            return;
                        };
                        server.following = true;
                        server
                            .jobs
                            .iter()
                            .map(|(id, p)| (id.clone(), p.endpoint.clone(), p.since.clone()))
                            .collect()
                    };
                    for (id, endpoint, since) in waiting {
                        look_once(waker.clone(), id, endpoint, since);
                    }
                    self.read_events(key, &mut feed.response, waker).await;
                    if let Some(server) = self.servers().get_mut(key) {
                        server.following = false;
                    }
                }
                Err(EndpointError::Http { status, .. }) if (400..500).contains(&status) => {
                    tracing::info!(server = %key.root, status, "no _db_updates feed for these credentials; parked jobs poll their sources");
                    self.refused
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(key.clone());
                    let jobs: Vec<String> = self
                        .servers()
                        .remove(key)
                        .map(|s| s.jobs.into_keys().collect())
                        .unwrap_or_default();
                    for job in jobs {
                        waker.watch_alone(&job);
                    }
                    return;
                }
                Err(e) => {
                    tracing::debug!(server = %key.root, error = %e, "the _db_updates feed failed; reconnecting");
                }
            }
            tokio::time::sleep(RECONNECT).await;
        }
    }

    /// Reads the feed's events until it ends, waking the jobs parked on
    /// each database named (every event: an update, a deletion or a
    /// re-creation all need the job to look).
    async fn read_events(
        &self,
        key: &ServerKey,
        response: &mut reqwest::Response,
        waker: &impl Waker,
    ) {
        let mut line = Vec::new();
        loop {
            let chunk = match response.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) | Err(_) => return,
            };
            for &byte in chunk.iter() {
                if byte != b'\n' {
                    if line.len() < MAX_LINE {
                        line.push(byte);
                    }
                    continue;
                }
                let event: Option<Value> = serde_json::from_slice(&line).ok();
                line.clear();
                if let Some(db) = event.as_ref().and_then(|e| e["db_name"].as_str()) {
                    let woken: Vec<String> = {
                        let mut servers = self.servers();
                        let Some(server) = servers.get_mut(key) else {
                            return;
                        };
                        let ids = server.by_db.remove(db).unwrap_or_default();
                        for id in &ids {
                            server.jobs.remove(id);
                        }
                        ids.into_iter().collect()
                    };
                    for id in woken {
                        waker.wake(&id);
                    }
                }
                // At each event or heartbeat: the feed ends once no job waits.
                if self.end_if_unused(key) {
                    return;
                }
            }
        }
    }
}

/// Looks once whether a job's source has changes after `since`; wakes it
/// if so, or if the source cannot be read (its run says why).
fn look_once(waker: impl Waker, job: String, endpoint: HttpPeer, since: Value) {
    tokio::spawn(async move {
        if endpoint
            .changes_after(&since, Duration::ZERO)
            .await
            .unwrap_or(true)
        {
            waker.wake(&job);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(url: &str) -> RemoteDb {
        RemoteDb {
            url: reqwest::Url::parse(url).unwrap(),
            headers: Vec::new(),
            auth: None,
        }
    }

    #[test]
    fn a_database_url_names_its_server_and_database() {
        let db = remote("http://h:5984/a%2Fb/");
        assert_eq!(db_name(&db).as_deref(), Some("a/b"));
        assert_eq!(ServerKey::of(&db).unwrap().root, "http://h:5984/");
        let behind_proxy = remote("https://h/couch/users/");
        assert_eq!(
            ServerKey::of(&behind_proxy).unwrap().root,
            "https://h/couch/"
        );
        assert_eq!(db_name(&behind_proxy).as_deref(), Some("users"));
    }
}
