//! The two kinds of peer behind one set of protocol calls: a local database
//! (the store, called directly) and a remote one (HTTP). The replication job
//! only ever talks to an [`Endpoint`].

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Map, Value, json};
use store::{ChangesQuery, DocInput, GetOptions, OpenRev, OpenRevs, Store};

use crate::spec::{ChangesFilter, Peer, RemoteDb};

/// Why a protocol call failed.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// The database does not exist (CouchDB's `db_not_found`).
    #[error("could not open {0}")]
    NotFound(String),
    /// The peer answered with a CouchDB error.
    #[error("{url} answered {status}: {error}: {reason}")]
    Http {
        url: String,
        status: u16,
        error: String,
        reason: String,
    },
    /// The request did not complete (refused, reset, timed out, truncated).
    #[error("request to {url} failed: {detail}")]
    Transport { url: String, detail: String },
    /// The answer was not what the protocol says.
    #[error("unexpected answer from {url}: {detail}")]
    Protocol { url: String, detail: String },
    #[error(transparent)]
    Store(#[from] store::StoreError),
}

impl EndpointError {
    /// Whether retrying the same request may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            EndpointError::Transport { .. } => true,
            EndpointError::Http { status, .. } => {
                *status == 408 || *status == 429 || *status >= 500
            }
            _ => false,
        }
    }
}

/// One change of the source's feed, as the replicator needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// Opaque: compared only by arrival order.
    pub seq: Value,
    pub id: String,
    /// Every leaf revision (`style=all_docs`).
    pub revs: Vec<String>,
}

/// A page of changes.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangesBatch {
    pub changes: Vec<Change>,
    pub last_seq: Value,
    /// Changes left after this page, when the source said (or was asked).
    pub pending: Option<u64>,
}

/// What a target lacks of one document.
#[derive(Debug, Clone, PartialEq)]
pub struct Missing {
    pub id: String,
    pub revs: Vec<String>,
    pub possible_ancestors: Vec<String>,
}

/// The outcome of writing one replicated document.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteFailure {
    pub id: String,
    pub error: String,
    pub reason: String,
}

/// A database a replication reads from or writes to.
#[derive(Debug, Clone)]
pub enum Endpoint {
    Local {
        store: Store,
        name: String,
    },
    Remote {
        client: reqwest::Client,
        db: RemoteDb,
        /// Total time allowed for one JSON request.
        timeout: Duration,
        /// Retries of a request that failed transiently.
        retries: u64,
        /// Whether the peer answers `_bulk_get` (learned on first use).
        bulk_get: std::sync::Arc<std::sync::atomic::AtomicU8>,
    },
}

/// `_bulk_get` support: not yet known, supported, or not.
const BULK_GET_UNKNOWN: u8 = 0;
const BULK_GET_YES: u8 = 1;
const BULK_GET_NO: u8 = 2;

/// Maps a reqwest failure to a transport error naming `url` (never with
/// credentials: reqwest's own URL is left out).
pub(crate) fn transport(url: &str) -> impl Fn(reqwest::Error) -> EndpointError + '_ {
    move |e| EndpointError::Transport {
        url: url.to_string(),
        detail: e.without_url().to_string(),
    }
}

/// Runs `attempt` again after transient failures (connection errors,
/// timeouts, truncated bodies, 408, 429, 5xx), at most `retries` times,
/// waiting 250 ms, then twice as long each time up to 10 s.
pub(crate) async fn with_retries<T, F, Fut>(
    retries: u64,
    what: &str,
    mut attempt: F,
) -> Result<T, EndpointError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, EndpointError>>,
{
    let mut wait = RETRY_START;
    let mut tries = 0;
    loop {
        match attempt().await {
            Err(e) if e.is_transient() && tries < retries => {
                tries += 1;
                tracing::warn!(error = %e, attempt = tries, "retrying {what}");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(RETRY_MAX);
            }
            other => return other,
        }
    }
}

/// First wait before retrying a transient failure; doubles each attempt.
const RETRY_START: Duration = Duration::from_millis(250);
/// Longest wait between retries.
const RETRY_MAX: Duration = Duration::from_secs(10);

impl Endpoint {
    /// An endpoint for a peer; `timeout` bounds every remote request, and
    /// transient failures are retried `retries` times with backoff.
    pub fn new(
        peer: &Peer,
        store: &Store,
        timeout: Duration,
        retries: u64,
    ) -> Result<Endpoint, EndpointError> {
        match peer {
            Peer::Local(name) => Ok(Endpoint::Local {
                store: store.clone(),
                name: name.clone(),
            }),
            Peer::Remote(db) => {
                // No total timeout on the client: attachment transfers may
                // take long. JSON calls set one per request; every read has one.
                let client = crate::http_client_builder()
                    .read_timeout(timeout)
                    .connect_timeout(timeout)
                    .pool_max_idle_per_host(32)
                    .build()
                    .map_err(|e| EndpointError::Transport {
                        url: db.url.to_string(),
                        detail: e.to_string(),
                    })?;
                Ok(Endpoint::Remote {
                    client,
                    db: db.clone(),
                    timeout,
                    retries,
                    bulk_get: std::sync::Arc::new(std::sync::atomic::AtomicU8::new(
                        BULK_GET_UNKNOWN,
                    )),
                })
            }
        }
    }

    pub fn is_local(&self) -> bool {
        matches!(self, Endpoint::Local { .. })
    }

    /// The endpoint as it may be shown: never with credentials.
    pub fn display(&self) -> String {
        match self {
            Endpoint::Local { name, .. } => name.clone(),
            Endpoint::Remote { db, .. } => db.url.to_string(),
        }
    }

    pub(crate) async fn local(&self) -> Result<store::Database, EndpointError> {
        match self {
            Endpoint::Local { store, name } => store.db(name).await.map_err(|e| match e {
                store::StoreError::DbNotFound(_) => EndpointError::NotFound(name.clone()),
                other => other.into(),
            }),
            Endpoint::Remote { .. } => Err(EndpointError::Protocol {
                url: self.display(),
                detail: "not local".into(),
            }),
        }
    }

    /// One HTTP request to a remote peer, JSON in and out, retried with
    /// exponential backoff while it fails transiently (connection errors,
    /// timeouts, truncated bodies, 408, 429, 5xx).
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(StatusCode, Value), EndpointError> {
        with_retries(self.retries(), "a request", || {
            self.call_once(method.clone(), path, body)
        })
        .await
    }

    /// How many times a transiently failed request to this peer is retried.
    fn retries(&self) -> u64 {
        match self {
            Endpoint::Remote { retries, .. } => *retries,
            Endpoint::Local { .. } => 0,
        }
    }

    async fn call_once(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(StatusCode, Value), EndpointError> {
        let (request, shown) = self.request(method, path, "application/json")?;
        let mut request = request;
        if let Endpoint::Remote { timeout, .. } = self {
            request = request.timeout(*timeout);
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        let response = request.send().await.map_err(transport(&shown))?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(transport(&shown))?;
        let value: Value = if bytes.is_empty() {
            Value::Null
        } else {
            // A body cut short looks like invalid JSON: worth another try.
            serde_json::from_slice(&bytes).map_err(|e| EndpointError::Transport {
                url: shown.clone(),
                detail: format!("truncated or invalid JSON: {e}"),
            })?
        };
        if status.is_success() || status == StatusCode::NOT_MODIFIED {
            return Ok((status, value));
        }
        let text = |k: &str| {
            value
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        Err(EndpointError::Http {
            url: shown,
            status: status.as_u16(),
            error: text("error"),
            reason: text("reason"),
        })
    }

    /// A request to a remote peer with its headers and credentials, and the
    /// URL as it may be shown.
    fn request(
        &self,
        method: Method,
        path: &str,
        accept: &str,
    ) -> Result<(reqwest::RequestBuilder, String), EndpointError> {
        let Endpoint::Remote { client, db, .. } = self else {
            return Err(EndpointError::Protocol {
                url: self.display(),
                detail: "not remote".into(),
            });
        };
        let url = db.url.join(path).map_err(|e| EndpointError::Protocol {
            url: db.url.to_string(),
            detail: e.to_string(),
        })?;
        let shown = url.to_string();
        let mut request = client.request(method, url).header("accept", accept);
        for (k, v) in &db.headers {
            request = request.header(k, v);
        }
        if let Some(auth) = &db.auth {
            request = request.basic_auth(&auth.username, Some(&auth.password));
        }
        Ok((request, shown))
    }

    /// Turns an unsuccessful answer into its CouchDB error.
    async fn error_of(response: reqwest::Response, shown: String) -> EndpointError {
        let status = response.status().as_u16();
        let value: Value = response.json().await.unwrap_or(Value::Null);
        let text = |k: &str| {
            value
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        EndpointError::Http {
            url: shown,
            status,
            error: text("error"),
            reason: text("reason"),
        }
    }

    /// A request whose answer is read as a stream (attachments), retried
    /// while it fails transiently before the answer starts.
    pub(crate) async fn send_with_retries(
        &self,
        method: Method,
        path: &str,
        accept: &str,
        body: Option<&Value>,
    ) -> Result<reqwest::Response, EndpointError> {
        with_retries(self.retries(), "a request", || async {
            let (mut request, shown) = self.request(method.clone(), path, accept)?;
            if let Some(body) = body {
                request = request
                    .header("content-type", "application/json")
                    .body(body.to_string());
            }
            let response = request.send().await.map_err(transport(&shown))?;
            if response.status().is_success() {
                Ok(response)
            } else {
                Err(Endpoint::error_of(response, shown).await)
            }
        })
        .await
    }

    /// One request with a streamed body of `length` bytes (not retried: the
    /// caller starts the whole transfer again).
    pub(crate) async fn send_streaming(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: reqwest::Body,
        length: u64,
    ) -> Result<Value, EndpointError> {
        let (request, shown) = self.request(method, path, "application/json")?;
        let response = request
            .header("content-type", content_type)
            .header("content-length", length)
            .body(body)
            .send()
            .await
            .map_err(transport(&shown))?;
        if !response.status().is_success() {
            return Err(Endpoint::error_of(response, shown).await);
        }
        response.json().await.map_err(transport(&shown))
    }

    /// `GET /db`: the update sequence and `instance_start_time`.
    pub async fn info(&self) -> Result<(Value, String), EndpointError> {
        match self {
            Endpoint::Local { .. } => {
                let db = self.local().await?;
                Ok((
                    Value::from(db.update_seq()),
                    db.instance_start_time().to_string(),
                ))
            }
            Endpoint::Remote { .. } => match self.call(Method::GET, "", None).await {
                Ok((_, info)) => Ok((
                    info.get("update_seq").cloned().unwrap_or(Value::from(0)),
                    info.get("instance_start_time")
                        .and_then(Value::as_str)
                        .unwrap_or("0")
                        .to_string(),
                )),
                Err(EndpointError::Http { status: 404, .. }) => {
                    Err(EndpointError::NotFound(self.display()))
                }
                Err(e) => Err(e),
            },
        }
    }

    /// Creates the database (an existing one is fine).
    pub async fn create(&self) -> Result<(), EndpointError> {
        match self {
            Endpoint::Local { store, name } => match store.create_db(name).await {
                Ok(_) | Err(store::StoreError::DbExists(_)) => Ok(()),
                Err(e) => Err(e.into()),
            },
            Endpoint::Remote { .. } => match self.call(Method::PUT, "", None).await {
                Ok(_) | Err(EndpointError::Http { status: 412, .. }) => Ok(()),
                Err(e) => Err(e),
            },
        }
    }

    /// A local (checkpoint) document, `None` when absent.
    pub async fn get_local(&self, id: &str) -> Result<Option<Value>, EndpointError> {
        match self {
            Endpoint::Local { .. } => match self.local().await?.get_local(id).await {
                Ok(doc) => Ok(Some(doc)),
                Err(store::StoreError::DocNotFound(_)) => Ok(None),
                Err(e) => Err(e.into()),
            },
            Endpoint::Remote { .. } => match self.call(Method::GET, id, None).await {
                Ok((_, doc)) => Ok(Some(doc)),
                Err(EndpointError::Http { status: 404, .. }) => Ok(None),
                Err(e) => Err(e),
            },
        }
    }

    /// Writes a local (checkpoint) document; returns its new `_rev` when the peer says.
    pub async fn put_local(&self, id: &str, doc: &Value) -> Result<Option<String>, EndpointError> {
        match self {
            Endpoint::Local { .. } => {
                Ok(Some(self.local().await?.put_local(id, doc.clone()).await?))
            }
            Endpoint::Remote { .. } => {
                let (_, answer) = self.call(Method::PUT, id, Some(doc)).await?;
                Ok(answer
                    .get("rev")
                    .and_then(Value::as_str)
                    .map(str::to_string))
            }
        }
    }

    /// One page of changes after `since`, every leaf of each document.
    pub async fn changes(
        &self,
        since: &Value,
        limit: u64,
        filter: &ChangesFilter,
        count_pending: bool,
    ) -> Result<ChangesBatch, EndpointError> {
        match self {
            Endpoint::Local { .. } => {
                let db = self.local().await?;
                let since_num = seq_number(since);
                let doc_ids = match filter {
                    ChangesFilter::DocIds(ids) => Some(ids.clone()),
                    _ => None,
                };
                let selector = match filter {
                    ChangesFilter::Selector(sel) => {
                        Some(store::selector::Selector::parse(sel).map_err(|e| {
                            EndpointError::Protocol {
                                url: self.display(),
                                detail: e.to_string(),
                            }
                        })?)
                    }
                    _ => None,
                };
                if let ChangesFilter::Named { name, .. } = filter {
                    return Err(EndpointError::Http {
                        url: self.display(),
                        status: 501,
                        error: "not_implemented".into(),
                        reason: format!("filter functions ({name}) are not supported"),
                    });
                }
                let page = db
                    .changes(ChangesQuery {
                        since: since_num,
                        limit: limit as usize,
                        all_leaves: true,
                        include_docs: selector.is_some(),
                        doc_ids,
                        count_pending,
                        ..Default::default()
                    })
                    .await?;
                let pending = count_pending.then_some(page.pending);
                let changes = page
                    .rows
                    .into_iter()
                    .filter(|row| {
                        selector.as_ref().is_none_or(|s| {
                            row.doc
                                .as_ref()
                                .and_then(|d| d.to_value().ok())
                                .is_some_and(|d| s.matches(&d))
                        })
                    })
                    .map(|row| Change {
                        seq: Value::from(row.seq),
                        id: row.id,
                        revs: row.changes.iter().map(ToString::to_string).collect(),
                    })
                    .collect();
                Ok(ChangesBatch {
                    changes,
                    last_seq: Value::from(page.last_seq),
                    pending,
                })
            }
            Endpoint::Remote { .. } => {
                let since_text = match since {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let since_param: String = form_encode(&since_text);
                let mut path = format!(
                    "_changes?feed=normal&style=all_docs&since={since_param}&limit={limit}"
                );
                let (method, body) = match filter {
                    ChangesFilter::All => (Method::GET, None),
                    ChangesFilter::DocIds(ids) => {
                        path.push_str("&filter=_doc_ids");
                        (Method::POST, Some(json!({"doc_ids": ids})))
                    }
                    ChangesFilter::Selector(sel) => {
                        path.push_str("&filter=_selector");
                        (Method::POST, Some(json!({"selector": sel})))
                    }
                    ChangesFilter::Named { name, query_params } => {
                        path.push_str(&format!("&filter={}", form_encode(name)));
                        for (k, v) in query_params {
                            let v = v
                                .as_str()
                                .map(str::to_string)
                                .unwrap_or_else(|| v.to_string());
                            path.push_str(&format!("&{}={}", form_encode(k), form_encode(&v)));
                        }
                        (Method::GET, None)
                    }
                };
                let (_, page) = self.call(method, &path, body.as_ref()).await?;
                let url = self.display();
                let rows = page
                    .get("results")
                    .and_then(Value::as_array)
                    .ok_or_else(|| EndpointError::Protocol {
                        url: url.clone(),
                        detail: "_changes without results".into(),
                    })?;
                let changes = rows
                    .iter()
                    .filter_map(|row| {
                        // Rows without an id (CouchDB's markers) are skipped.
                        let id = row.get("id")?.as_str()?.to_string();
                        let revs = row
                            .get("changes")?
                            .as_array()?
                            .iter()
                            .filter_map(|c| {
                                c.get("rev").and_then(Value::as_str).map(str::to_string)
                            })
                            .collect();
                        Some(Change {
                            seq: row.get("seq").cloned().unwrap_or(Value::Null),
                            id,
                            revs,
                        })
                    })
                    .collect();
                let last_seq = page
                    .get("last_seq")
                    .cloned()
                    .unwrap_or_else(|| since.clone());
                let pending = page.get("pending").and_then(Value::as_u64);
                Ok(ChangesBatch {
                    changes,
                    last_seq,
                    pending,
                })
            }
        }
    }

    /// Waits until the source may have changes after `since`, at most
    /// `timeout`: a local database's update channel, or a remote longpoll
    /// feed. Returns early on `stop`.
    pub async fn wait_for_changes(
        &self,
        since: &Value,
        timeout: Duration,
        stop: &mut tokio::sync::watch::Receiver<bool>,
    ) -> Result<(), EndpointError> {
        match self {
            Endpoint::Local { .. } => {
                let db = self.local().await?;
                let mut rx = db.subscribe();
                if *rx.borrow_and_update() > seq_number(since) {
                    return Ok(());
                }
                tokio::select! {
                    _ = rx.changed() => {}
                    _ = stop.changed() => {}
                    _ = tokio::time::sleep(timeout) => {}
                }
                Ok(())
            }
            Endpoint::Remote { .. } => {
                let since_text = match since {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                // The feed must answer before the request's own timeout.
                let limit = match self {
                    Endpoint::Remote { timeout: t, .. } => *t * 3 / 4,
                    Endpoint::Local { .. } => timeout,
                };
                let path = format!(
                    "_changes?feed=longpoll&limit=1&since={}&timeout={}",
                    form_encode(&since_text),
                    timeout.min(limit).as_millis()
                );
                // Retried like any request: a source restarting drops the feed.
                tokio::select! {
                    answer = self.call(Method::GET, &path, None) => answer.map(|_| ()),
                    _ = stop.changed() => Ok(()),
                }
            }
        }
    }

    /// `_revs_diff`: which of these revisions the database lacks.
    pub async fn revs_diff(
        &self,
        asked: &[(String, Vec<String>)],
    ) -> Result<Vec<Missing>, EndpointError> {
        match self {
            Endpoint::Local { .. } => {
                let db = self.local().await?;
                let request = asked
                    .iter()
                    .map(|(id, revs)| {
                        (
                            id.clone(),
                            revs.iter()
                                .filter_map(|r| revtree::RevId::parse(r).ok())
                                .collect(),
                        )
                    })
                    .collect();
                Ok(db
                    .revs_diff(request)
                    .await?
                    .into_iter()
                    .map(|(id, diff)| Missing {
                        id,
                        revs: diff.missing.iter().map(ToString::to_string).collect(),
                        possible_ancestors: diff
                            .possible_ancestors
                            .iter()
                            .map(ToString::to_string)
                            .collect(),
                    })
                    .collect())
            }
            Endpoint::Remote { .. } => {
                let body: Map<String, Value> = asked
                    .iter()
                    .map(|(id, revs)| (id.clone(), json!(revs)))
                    .collect();
                let (_, diff) = self
                    .call(Method::POST, "_revs_diff", Some(&Value::Object(body)))
                    .await?;
                let Value::Object(diff) = diff else {
                    return Err(EndpointError::Protocol {
                        url: self.display(),
                        detail: "_revs_diff is not an object".into(),
                    });
                };
                let strings = |v: Option<&Value>| -> Vec<String> {
                    v.and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(Value::as_str)
                                .map(str::to_string)
                                .collect()
                        })
                        .unwrap_or_default()
                };
                Ok(diff
                    .into_iter()
                    .map(|(id, entry)| Missing {
                        id,
                        revs: strings(entry.get("missing")),
                        possible_ancestors: strings(entry.get("possible_ancestors")),
                    })
                    .collect())
            }
        }
    }

    /// The missing revisions of one document with their history and
    /// attachment stubs (bytes travel separately: see `transfer`).
    pub async fn fetch(&self, missing: &Missing) -> Result<Vec<Value>, EndpointError> {
        let revs: Vec<revtree::RevId> = missing
            .revs
            .iter()
            .filter_map(|r| revtree::RevId::parse(r).ok())
            .collect();
        match self {
            Endpoint::Local { .. } => {
                let db = self.local().await?;
                let opts = GetOptions {
                    revs: true,
                    latest: true,
                    ..Default::default()
                };
                let found = db
                    .open_revs(&missing.id, OpenRevs::List(revs), opts, false)
                    .await?;
                found
                    .into_iter()
                    .filter_map(|r| match r {
                        OpenRev::Ok(doc) => Some(doc.to_value().map_err(EndpointError::from)),
                        OpenRev::Missing(_) => None,
                    })
                    .collect()
            }
            Endpoint::Remote { .. } => {
                let list = serde_json::to_string(&missing.revs).unwrap_or_default();
                let path = format!(
                    "{}?revs=true&latest=true&open_revs={}",
                    encode_doc_id(&missing.id),
                    form_encode(&list)
                );
                let (_, answer) = self.call(Method::GET, &path, None).await?;
                let items = answer.as_array().ok_or_else(|| EndpointError::Protocol {
                    url: self.display(),
                    detail: "open_revs is not an array".into(),
                })?;
                Ok(items
                    .iter()
                    .filter_map(|item| item.get("ok").cloned())
                    .collect())
            }
        }
    }

    /// The missing revisions of many documents: one `_bulk_get` request
    /// when the peer supports it (learned on first use: any error means no,
    /// as PouchDB decides), else one `open_revs` request per document.
    pub async fn fetch_many(
        &self,
        missing: &[Missing],
        use_bulk_get: bool,
    ) -> Result<Vec<Value>, EndpointError> {
        if let Endpoint::Remote { bulk_get, .. } = self
            && use_bulk_get
            && bulk_get.load(std::sync::atomic::Ordering::Relaxed) != BULK_GET_NO
        {
            let requests: Vec<Value> = missing
                .iter()
                .flat_map(|m| {
                    m.revs
                        .iter()
                        .map(move |rev| json!({"id": m.id, "rev": rev}))
                })
                .collect();
            let body = json!({"docs": requests});
            match self
                .call(Method::POST, "_bulk_get?revs=true&latest=true", Some(&body))
                .await
            {
                Ok((_, answer)) => {
                    bulk_get.store(BULK_GET_YES, std::sync::atomic::Ordering::Relaxed);
                    let mut seen = std::collections::HashSet::new();
                    let mut docs = Vec::new();
                    for result in answer
                        .get("results")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        for doc in result
                            .get("docs")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                        {
                            let Some(ok) = doc.get("ok") else { continue };
                            let key = (ok.get("_id").cloned(), ok.get("_rev").cloned());
                            if seen.insert(key) {
                                docs.push(ok.clone());
                            }
                        }
                    }
                    return Ok(docs);
                }
                Err(e) if e.is_transient() => return Err(e),
                Err(e) => {
                    tracing::info!(peer = %self.display(), error = %e, "_bulk_get unavailable; fetching documents one by one");
                    bulk_get.store(BULK_GET_NO, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }
        if let Endpoint::Local { .. } = self {
            // One read for the whole batch.
            let db = self.local().await?;
            let requests = missing
                .iter()
                .flat_map(|m| {
                    m.revs
                        .iter()
                        .filter_map(|r| revtree::RevId::parse(r).ok())
                        .map(move |rev| store::BulkGetRequest {
                            id: m.id.clone(),
                            rev: Some(rev),
                            atts_since: Vec::new(),
                        })
                })
                .collect();
            let mut seen = std::collections::HashSet::new();
            let mut docs = Vec::new();
            for result in db.bulk_get(requests, true, true, false).await? {
                for doc in result.docs.into_iter().flatten() {
                    let value = doc.to_value()?;
                    if seen.insert((value.get("_id").cloned(), value.get("_rev").cloned())) {
                        docs.push(value);
                    }
                }
            }
            return Ok(docs);
        }
        let mut docs = Vec::new();
        for m in missing {
            docs.extend(self.fetch(m).await?);
        }
        Ok(docs)
    }

    /// Writes replicated revisions (`new_edits=false`); returns the
    /// documents the target refused.
    pub async fn write(&self, docs: Vec<Value>) -> Result<Vec<WriteFailure>, EndpointError> {
        if docs.is_empty() {
            return Ok(Vec::new());
        }
        match self {
            Endpoint::Local { .. } => {
                let db = self.local().await?;
                let inputs = docs
                    .into_iter()
                    .map(DocInput::from_json)
                    .collect::<Result<Vec<_>, _>>()?;
                let results = db.bulk_docs(inputs, false).await?;
                Ok(results
                    .into_iter()
                    .filter_map(|r| {
                        r.result.err().map(|f| WriteFailure {
                            id: r.id,
                            error: f.error.into(),
                            reason: f.reason,
                        })
                    })
                    .collect())
            }
            Endpoint::Remote { .. } => {
                let mut failures = Vec::new();
                for chunk in chunk_by_bytes(docs, MAX_WRITE_BYTES) {
                    failures.extend(self.write_remote(chunk).await?);
                }
                Ok(failures)
            }
        }
    }

    /// One `_bulk_docs` request; a 413 splits the batch and retries the
    /// halves, down to a single document the target then refuses.
    fn write_remote(
        &self,
        docs: Vec<Value>,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Vec<WriteFailure>, EndpointError>> + Send + '_>,
    > {
        Box::pin(async move {
            let body = json!({"docs": docs, "new_edits": false});
            match self.call(Method::POST, "_bulk_docs", Some(&body)).await {
                Ok((_, answer)) => Ok(answer
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|row| row.get("error").is_some())
                    .map(|row| {
                        let text =
                            |k: &str| row.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                        WriteFailure {
                            id: text("id"),
                            error: text("error"),
                            reason: text("reason"),
                        }
                    })
                    .collect()),
                Err(EndpointError::Http {
                    status: 413,
                    error,
                    reason,
                    ..
                }) => {
                    let Value::Object(mut body) = body else {
                        return Ok(Vec::new());
                    };
                    let Some(Value::Array(mut docs)) = body.remove("docs") else {
                        return Ok(Vec::new());
                    };
                    if docs.len() <= 1 {
                        let id = docs
                            .first()
                            .and_then(|d| d.get("_id"))
                            .and_then(Value::as_str)
                            .unwrap_or("");
                        return Ok(vec![WriteFailure {
                            id: id.to_string(),
                            error,
                            reason,
                        }]);
                    }
                    let second = docs.split_off(docs.len() / 2);
                    let mut failures = self.write_remote(docs).await?;
                    failures.extend(self.write_remote(second).await?);
                    Ok(failures)
                }
                Err(e) => Err(e),
            }
        })
    }

    /// `_ensure_full_commit`: everything written is durable.
    pub async fn ensure_full_commit(&self) -> Result<(), EndpointError> {
        match self {
            Endpoint::Local { .. } => Ok(self.local().await?.ensure_full_commit().await?),
            Endpoint::Remote { .. } => self
                .call(Method::POST, "_ensure_full_commit", Some(&json!({})))
                .await
                .map(|_| ()),
        }
    }
}

/// The most JSON one `_bulk_docs` request carries, as CouchDB's replicator
/// flushes: large enough to amortize requests, small enough for any peer.
const MAX_WRITE_BYTES: usize = 4 << 20;

/// Splits documents into runs whose JSON stays under `limit` bytes (a lone
/// larger document still gets a run of its own).
fn chunk_by_bytes(docs: Vec<Value>, limit: usize) -> Vec<Vec<Value>> {
    let mut chunks = Vec::new();
    let mut current = Vec::new();
    let mut size = 0;
    for doc in docs {
        let len = serde_json::to_vec(&doc).map(|v| v.len()).unwrap_or(0);
        if !current.is_empty() && size + len > limit {
            chunks.push(std::mem::take(&mut current));
            size = 0;
        }
        size += len;
        current.push(doc);
    }
    if !current.is_empty() {
        chunks.push(current);
    }
    chunks
}

/// Our own sequences are integers; a peer's opaque `N-...` strings start with theirs.
fn seq_number(seq: &Value) -> u64 {
    match seq {
        Value::Number(n) => n.as_u64().unwrap_or(0),
        Value::String(s) => s
            .split('-')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0),
        _ => 0,
    }
}

pub(crate) fn form_encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// A document id as a URL path: `_design/x` keeps its slash, as CouchDB expects.
pub(crate) fn encode_doc_id(id: &str) -> String {
    match id.strip_prefix("_design/") {
        Some(rest) => format!("_design/{}", form_encode(rest)),
        None => form_encode(id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_split_by_size_and_a_large_document_goes_alone() {
        let doc = |n: usize| json!({"_id": "x", "pad": "p".repeat(n)});
        let chunks = chunk_by_bytes(vec![doc(10), doc(10), doc(100), doc(10)], 80);
        let sizes: Vec<usize> = chunks.iter().map(Vec::len).collect();
        assert_eq!(sizes, [2, 1, 1]);
        assert!(chunk_by_bytes(Vec::new(), 80).is_empty());
    }

    #[test]
    fn only_transport_errors_and_server_trouble_are_retried() {
        let http = |status| EndpointError::Http {
            url: String::new(),
            status,
            error: String::new(),
            reason: String::new(),
        };
        assert!(
            http(500).is_transient()
                && http(503).is_transient()
                && http(429).is_transient()
                && http(408).is_transient()
        );
        for status in [400, 401, 403, 404, 409, 412] {
            assert!(!http(status).is_transient(), "{status}");
        }
        assert!(
            EndpointError::Transport {
                url: String::new(),
                detail: String::new()
            }
            .is_transient()
        );
        assert!(!EndpointError::NotFound(String::new()).is_transient());
    }

    #[test]
    fn sequences_from_peers_start_with_their_number() {
        assert_eq!(seq_number(&json!(12)), 12);
        assert_eq!(seq_number(&json!("34-g1AAAA")), 34);
        assert_eq!(seq_number(&json!(null)), 0);
    }
}
