//! The two kinds of peer behind one set of protocol calls: a local database
//! (the store, called directly) and a remote one (HTTP). The replication job
//! only ever talks to an [`Endpoint`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use bytes::Bytes;
use reqwest::{Method, StatusCode};
use revtree::RevId;
use serde::Serialize;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde_json::{Map, Value, json};
use store::{ChangesQuery, DocInput, GetOptions, OpenRev, OpenRevs, Store};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wire::doc::DocMeta;
use wire::rows::{
    BulkDocsRow, BulkGetAnswer, BulkGetItem, BulkGetRequest, ChangesPage, DbInfo, DocWritten,
    ErrorBody, FetchedRev, RevsDiffAnswer, RevsDiffRequest,
};

use crate::session::{Credential, Session};
use crate::spec::{ChangesFilter, Peer, RemoteDb, ReplicationSpec};

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
    /// The request could not even be built (a header no HTTP request can
    /// carry, a URL it cannot go to): the replication's own settings are
    /// wrong, and no retry mends them.
    #[error("a request to {url} cannot be made: {detail}")]
    Request { url: String, detail: String },
    /// The answer was not what the protocol says.
    #[error("unexpected answer from {url}: {detail}")]
    Protocol { url: String, detail: String },
    /// The peer's answer went past what one answer may hold: it is cut
    /// off, never buffered further (a peer that never stops talking).
    #[error("the answer from {url} is larger than {limit} bytes; a peer's answer may not be")]
    TooLarge { url: String, limit: usize },
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
    /// Every leaf revision (`style=all_docs`), the winner first.
    pub revs: Vec<RevId>,
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
    pub revs: Vec<RevId>,
    pub possible_ancestors: Vec<RevId>,
}

/// The outcome of writing one replicated document.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteFailure {
    pub id: String,
    pub error: String,
    pub reason: String,
}

/// How a remote peer is called: the replication's `connection_timeout`,
/// `retries_per_request` and `http_connections`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpOptions {
    /// Total time allowed for one JSON request; also bounds connecting and
    /// every read of a streamed answer.
    pub timeout: Duration,
    /// Retries of a request that failed transiently.
    pub retries: u64,
    /// Requests in flight to the peer at once, and idle connections kept
    /// for it (CouchDB's `http_connections`, per endpoint as in CouchDB).
    pub http_connections: usize,
    /// The most one JSON answer may hold (see
    /// [`crate::spec::defaults::MAX_ANSWER_BYTES`]).
    pub max_answer: usize,
}

impl HttpOptions {
    pub fn of(spec: &ReplicationSpec) -> HttpOptions {
        HttpOptions {
            timeout: Duration::from_millis(spec.connection_timeout),
            retries: spec.retries_per_request,
            http_connections: usize::try_from(spec.http_connections).unwrap_or(usize::MAX),
            max_answer: usize::try_from(spec.max_answer_bytes).unwrap_or(usize::MAX),
        }
    }
}

/// A database a replication reads from or writes to.
#[derive(Debug, Clone)]
pub enum Endpoint {
    Local {
        store: Store,
        name: String,
        /// Whose rights the replication has here; `None` for a server
        /// admin's (no checks but validation functions).
        user: Option<Arc<auth::UserCtx>>,
        /// The query server: the validation functions writes here obey
        /// (as a target) and the filter functions changes pass (as a source).
        validators: Option<query_server::Validators>,
    },
    Remote {
        client: reqwest::Client,
        db: RemoteDb,
        /// Total time allowed for one JSON request.
        timeout: Duration,
        /// Retries of a request that failed transiently.
        retries: u64,
        /// Whether the peer answers `_bulk_get` (learned on first use).
        bulk_get: Arc<AtomicU8>,
        /// Whether the peer takes gzip-encoded attachments (learned on
        /// first use, from its welcome).
        encoded_attachments: Arc<AtomicU8>,
        /// One permit per request in flight (`http_connections`): the
        /// writes, attachment copies and reads of one job share the peer's
        /// connections instead of opening one each.
        permits: Arc<Semaphore>,
        /// The cookie login, when the spec has credentials.
        session: Arc<Session>,
        /// The most one JSON answer may hold.
        max_answer: usize,
    },
}

/// `_bulk_get` support (and encoded attachments): not yet known, supported, or not.
const BULK_GET_UNKNOWN: u8 = 0;
const BULK_GET_YES: u8 = 1;
const BULK_GET_NO: u8 = 2;

/// The most an error answer (or the answer to a write) may hold.
pub(crate) const MAX_SMALL_ANSWER_BYTES: usize = 64 << 10;

/// The most an answer without documents may hold (database info, a page
/// of changes, `_revs_diff`): a page of 500 changes is a few hundred KiB,
/// and one parsed whole stays well within 100 MiB.
const MAX_LISTING_BYTES: usize = 16 << 20;

/// Reads an answer's body, up to `limit` bytes: a longer one (declared
/// or sent) is [`EndpointError::TooLarge`], read no further.
pub(crate) async fn read_bounded(
    mut response: reqwest::Response,
    limit: usize,
    shown: &str,
) -> Result<Bytes, EndpointError> {
    let too_large = || EndpointError::TooLarge {
        url: shown.to_string(),
        limit,
    };
    if response.content_length().unwrap_or(0) > limit as u64 {
        return Err(too_large());
    }
    // The chunks are kept as they come and joined once at the end: no
    // buffer doubles (and is copied) on the way to the bound.
    let mut chunks = Vec::new();
    let mut length = 0;
    while let Some(chunk) = response.chunk().await.map_err(transport(shown))? {
        length += chunk.len();
        if length > limit {
            return Err(too_large());
        }
        chunks.push(chunk);
    }
    if chunks.len() == 1 {
        return Ok(chunks.pop().unwrap_or_default());
    }
    let mut body = bytes::BytesMut::with_capacity(length);
    for chunk in chunks {
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// Maps a reqwest failure to an error naming `url` (never with
/// credentials: reqwest's own URL is left out): a request that could not
/// be built is [`EndpointError::Request`], never retried; anything else is
/// a transport failure.
pub(crate) fn transport(url: &str) -> impl Fn(reqwest::Error) -> EndpointError + '_ {
    move |e| {
        let e = e.without_url();
        if e.is_builder() {
            // reqwest's own text ("builder error") says little; its source says what.
            let detail = match std::error::Error::source(&e) {
                Some(source) => format!("{e}: {source}"),
                None => e.to_string(),
            };
            EndpointError::Request {
                url: url.to_string(),
                detail,
            }
        } else {
            EndpointError::Transport {
                url: url.to_string(),
                detail: e.to_string(),
            }
        }
    }
}

/// Decodes a peer's JSON answer. Text that is not JSON, or stops short, is
/// a transport failure (a body cut short looks exactly like that, and is
/// worth another try); JSON of the wrong shape is the peer breaking the
/// protocol, which no retry mends.
pub(crate) fn decode<T: DeserializeOwned>(url: &str, bytes: &[u8]) -> Result<T, EndpointError> {
    serde_json::from_slice(bytes).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => EndpointError::Protocol {
            url: url.to_string(),
            detail: format!("malformed answer: {e}"),
        },
        _ => EndpointError::Transport {
            url: url.to_string(),
            detail: format!("truncated or invalid JSON: {e}"),
        },
    })
}

/// Decodes a document a peer sent, as CouchDB reads documents (`ejson`:
/// its numbers, duplicate keys and depth). Text that is not JSON is a
/// transport failure, as in [`decode`]; a document CouchDB could not hold
/// is the peer's fault.
pub(crate) fn decode_doc(url: &str, bytes: &[u8]) -> Result<Value, EndpointError> {
    ejson::from_slice(bytes).map_err(|e| match e {
        ejson::JsonError::Syntax { .. } => EndpointError::Transport {
            url: url.to_string(),
            detail: format!("truncated or invalid JSON: {e}"),
        },
        _ => EndpointError::Protocol {
            url: url.to_string(),
            detail: format!("a document CouchDB could not hold: {e}"),
        },
    })
}

/// The error an unsuccessful answer carries: CouchDB's `{error, reason}`,
/// or, from something else (a proxy's page), the status and the start of
/// the text.
fn http_error(url: String, status: StatusCode, body: &[u8]) -> EndpointError {
    let (error, reason) = match serde_json::from_slice::<ErrorBody>(body) {
        Ok(body) => (body.error, body.reason),
        // Redirects are never followed (`http_client_builder`): say so.
        Err(_) if status.is_redirection() => (
            status
                .canonical_reason()
                .unwrap_or("redirect")
                .to_ascii_lowercase()
                .replace(' ', "_"),
            "the peer answered with a redirect, which replications do not follow: \
             give the address it redirects to"
                .to_string(),
        ),
        Err(_) => {
            let start = String::from_utf8_lossy(&body[..body.len().min(200)])
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect::<String>();
            (
                status
                    .canonical_reason()
                    .unwrap_or("unknown")
                    .to_ascii_lowercase()
                    .replace(' ', "_"),
                start.trim().to_string(),
            )
        }
    };
    EndpointError::Http {
        url,
        status: status.as_u16(),
        error,
        reason,
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

/// An answer read as a stream (attachments), with the permit of its
/// request: the connection stays busy until the answer is read to its end.
#[derive(Debug)]
pub(crate) struct Streamed {
    pub response: reqwest::Response,
    pub permit: Option<OwnedSemaphorePermit>,
}

/// One HTTP client per timeout and pool size for the whole process: jobs
/// that stop and start again (parked ones, at every change) keep their
/// pooled connections instead of opening new ones.
fn shared_client(timeout: Duration, connections: usize) -> Result<reqwest::Client, reqwest::Error> {
    static CLIENTS: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashMap<(Duration, usize), reqwest::Client>>,
    > = std::sync::OnceLock::new();
    let mut clients = CLIENTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(client) = clients.get(&(timeout, connections)) {
        return Ok(client.clone());
    }
    // No total timeout on the client: attachment transfers may take
    // long. JSON calls set one per request; every read has one.
    let client = crate::http_client_builder()
        .read_timeout(timeout)
        .connect_timeout(timeout)
        .pool_max_idle_per_host(connections)
        .build()?;
    clients.insert((timeout, connections), client.clone());
    Ok(client)
}

impl Endpoint {
    /// An endpoint for a peer; a remote one is called with `options`.
    pub fn new(
        peer: &Peer,
        store: &Store,
        options: HttpOptions,
        user: Option<&auth::UserCtx>,
        validators: Option<&query_server::Validators>,
    ) -> Result<Endpoint, EndpointError> {
        match peer {
            Peer::Local(name) => Ok(Endpoint::Local {
                store: store.clone(),
                name: name.clone(),
                user: user
                    .filter(|u| !u.is_server_admin())
                    .map(|u| Arc::new(u.clone())),
                validators: validators.cloned(),
            }),
            Peer::Remote(db) => Endpoint::remote(db, options),
        }
    }

    /// An endpoint for a remote database, called with `options`.
    pub fn remote(db: &RemoteDb, options: HttpOptions) -> Result<Endpoint, EndpointError> {
        let connections = options.http_connections.clamp(1, Semaphore::MAX_PERMITS);
        let client =
            shared_client(options.timeout, connections).map_err(|e| EndpointError::Request {
                url: db.url.to_string(),
                detail: format!("the HTTP client cannot be built: {e}"),
            })?;
        Ok(Endpoint::Remote {
            client,
            db: db.clone(),
            timeout: options.timeout,
            retries: options.retries,
            bulk_get: Arc::new(AtomicU8::new(BULK_GET_UNKNOWN)),
            encoded_attachments: Arc::new(AtomicU8::new(BULK_GET_UNKNOWN)),
            permits: Arc::new(Semaphore::new(connections)),
            session: crate::session::shared(&db.url, db.auth.as_ref()),
            max_answer: options.max_answer,
        })
    }

    /// Whether attachments stored gzip-encoded may go to this peer as they
    /// are (with `encoding` in the document): a local database, CouchDB
    /// and Recliner take them; other servers (PouchDB Server) get their
    /// content. A peer whose welcome cannot be read gets the content,
    /// which every peer takes.
    pub async fn takes_encoded_attachments(&self) -> bool {
        let Endpoint::Remote {
            encoded_attachments,
            ..
        } = self
        else {
            return true;
        };
        match encoded_attachments.load(Ordering::Relaxed) {
            BULK_GET_YES => return true,
            BULK_GET_NO => return false,
            _ => {}
        }
        // The server's welcome sits beside the database.
        let welcome: Result<Value, _> = self.call(Method::GET, "../", None).await;
        let takes = welcome.is_ok_and(|w| w.get("couchdb").is_some());
        encoded_attachments.store(
            if takes { BULK_GET_YES } else { BULK_GET_NO },
            Ordering::Relaxed,
        );
        takes
    }

    /// The most one JSON answer of this peer may hold.
    pub(crate) fn max_answer(&self) -> usize {
        match self {
            Endpoint::Remote { max_answer, .. } => *max_answer,
            Endpoint::Local { .. } => usize::MAX,
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

    /// The local database, once the replication's user is found to be one
    /// of its members (checked on every use: a `_security` change applies
    /// to running replications at once).
    pub(crate) async fn local(&self) -> Result<store::Database, EndpointError> {
        Ok(self.local_gate().await?.0)
    }

    /// The local database of a source, once the replication's user is
    /// found to be allowed to read all of it as `_changes` does (in
    /// `_users` and `_replicator`, server admins only).
    pub(crate) async fn local_source(&self) -> Result<store::Database, EndpointError> {
        let (db, gate) = self.local_gate().await?;
        gate.check_read_all()
            .map_err(|refusal| self.refusal_error(refusal))?;
        Ok(db)
    }

    /// The local database and the shared gate that decides, for the
    /// replication's user, what may be read and written there.
    pub(crate) async fn local_gate(
        &self,
    ) -> Result<(store::Database, access::Gate), EndpointError> {
        let Endpoint::Local {
            store,
            name,
            user,
            validators,
        } = self
        else {
            return Err(EndpointError::Protocol {
                url: self.display(),
                detail: "not local".into(),
            });
        };
        let db = store.db(name).await.map_err(|e| match e {
            store::StoreError::DbNotFound(_) => EndpointError::NotFound(name.clone()),
            other => other.into(),
        })?;
        // A server admin's replication runs as an admin.
        let user = user
            .as_deref()
            .cloned()
            .unwrap_or_else(auth::UserCtx::party_admin);
        let gate = access::Gate::of(
            &db,
            user,
            validators.as_ref(),
            auth::password::DEFAULT_ITERATIONS,
        )
        .await
        .map_err(|refusal| self.refusal_error(refusal))?;
        gate.check_member()
            .map_err(|refusal| self.refusal_error(refusal))?;
        Ok((db, gate))
    }

    /// A refusal of the shared gate, as this peer's error.
    fn refusal_error(&self, refusal: access::Refusal) -> EndpointError {
        let (status, error, reason) = match refusal {
            access::Refusal::Unauthorized(reason) => (401, "unauthorized", reason),
            access::Refusal::Forbidden(reason) => (403, "forbidden", reason),
            access::Refusal::NotFound(reason) => (404, "not_found", reason),
            access::Refusal::Store(e) => return e.into(),
            access::Refusal::Script(e) => (500, "os_process_error", e.to_string()),
        };
        EndpointError::Http {
            url: self.display(),
            status,
            error: error.into(),
            reason,
        }
    }

    /// Why this local target refuses a replicated document, through the
    /// same gate as every write (design documents for database admins,
    /// the special databases' rules, validation functions): a write
    /// failure, as CouchDB's replicator counts them. The document may be
    /// prepared on the way (an owner set, a password hashed).
    pub(crate) async fn refusal(
        &self,
        db: &store::Database,
        gate: &access::Gate,
        input: &mut DocInput,
    ) -> Result<Option<WriteFailure>, EndpointError> {
        let verdict = match gate.check_doc(db, input, false).await {
            Ok(Ok(())) => return Ok(None),
            Ok(Err(failure)) => failure,
            Err(access::Refusal::Store(e)) => return Err(e.into()),
            Err(access::Refusal::Script(e)) => {
                return Ok(Some(WriteFailure {
                    id: input.id.clone().unwrap_or_default(),
                    error: "os_process_error".into(),
                    reason: e.to_string(),
                }));
            }
            Err(
                access::Refusal::Forbidden(reason)
                | access::Refusal::Unauthorized(reason)
                | access::Refusal::NotFound(reason),
            ) => store::DocFailure {
                error: store::ErrorKind::Forbidden,
                reason,
            },
        };
        Ok(Some(WriteFailure {
            id: input.id.clone().unwrap_or_default(),
            error: verdict.error.into(),
            reason: verdict.reason,
        }))
    }

    /// A local source's filter function (`ddoc/name`, or `_view` with a
    /// `view` query parameter), ready to run on pages of changes.
    async fn local_filter(
        &self,
        db: &store::Database,
        name: &str,
        query_params: &serde_json::Map<String, Value>,
    ) -> Result<query_server::DocFilter, EndpointError> {
        let Endpoint::Local {
            validators, user, ..
        } = self
        else {
            return Err(self.malformed("a filter of a local source on a remote endpoint"));
        };
        let Some(validators) = validators else {
            return Err(EndpointError::Http {
                url: self.display(),
                status: 501,
                error: "not_implemented".into(),
                reason: format!("no query server runs filter functions ({name}) here"),
            });
        };
        let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
        let (path, view) = if name == "_view" {
            let view = query_params.get("view").map(text).unwrap_or_default();
            (view, true)
        } else {
            (name.to_string(), false)
        };
        let not_found = |reason: String| EndpointError::Http {
            url: self.display(),
            status: 404,
            error: "not_found".into(),
            reason,
        };
        let Some((ddoc_name, function)) = path.split_once('/') else {
            return Err(EndpointError::Http {
                url: self.display(),
                status: 400,
                error: "bad_request".into(),
                reason: format!("`{path}` is not of the form designname/functionname"),
            });
        };
        let ddoc_id = format!("_design/{ddoc_name}");
        let ddoc = match db.get(&ddoc_id, store::GetOptions::default()).await {
            Ok(doc) => doc.to_value()?,
            Err(store::StoreError::DocNotFound(_)) => return Err(not_found("missing".into())),
            Err(e) => return Err(e.into()),
        };
        let section = if view { "views" } else { "filters" };
        if ddoc.get(section).and_then(|s| s.get(function)).is_none() {
            return Err(not_found(format!("missing json key: {function}")));
        }
        let query: serde_json::Map<String, Value> = query_params
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(text(v))))
            .collect();
        let user_ctx = match user {
            Some(user) => json!({"db": db.name(), "name": user.name, "roles": user.roles}),
            None => json!({"db": db.name(), "name": null, "roles": ["_admin"]}),
        };
        let req = json!({
            "info": {"db_name": db.name()},
            "id": null,
            "method": "GET",
            "path": [db.name(), "_changes"],
            "requested_path": [db.name(), "_changes"],
            "query": query,
            "headers": {},
            "body": "undefined",
            "peer": "127.0.0.1",
            "form": {},
            "cookie": {},
            "userCtx": user_ctx,
            "secObj": *db.security().await?,
        });
        Ok(query_server::DocFilter {
            engine: validators.engine().clone(),
            ddoc: query_server::DesignDoc {
                db: db.name().to_string(),
                id: ddoc_id,
                rev: ddoc.get("_rev").map(text).unwrap_or_default(),
                json: ejson::to_string(&ddoc).into(),
            },
            name: function.to_string(),
            req: (!view).then(|| ejson::to_string(&req)),
        })
    }

    /// A filter function's failure, as the peer's error.
    fn script_error(&self, e: query_server::JsError) -> EndpointError {
        let (status, error, reason) = match e {
            query_server::JsError::Runtime { error, reason } => {
                let status = if error == "not_found" { 404 } else { 500 };
                (status, error, reason)
            }
            other => (500, "os_process_error".to_string(), other.to_string()),
        };
        EndpointError::Http {
            url: self.display(),
            status,
            error,
            reason,
        }
    }

    /// A protocol error naming this peer.
    fn malformed(&self, detail: impl Into<String>) -> EndpointError {
        EndpointError::Protocol {
            url: self.display(),
            detail: detail.into(),
        }
    }

    /// Waits for a free connection to a remote peer (none for a local one).
    async fn permit(&self) -> Result<Option<OwnedSemaphorePermit>, EndpointError> {
        match self {
            Endpoint::Remote { permits, .. } => permits
                .clone()
                .acquire_owned()
                .await
                .map(Some)
                .map_err(|_| self.malformed("the connection pool is closed")),
            Endpoint::Local { .. } => Ok(None),
        }
    }

    /// One HTTP request to a remote peer, JSON in and out, its answer
    /// decoded as `T`; retried with exponential backoff while it fails
    /// transiently (connection errors, timeouts, truncated bodies, 408, 429, 5xx).
    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<T, EndpointError> {
        let limit = self.max_answer().min(MAX_LISTING_BYTES);
        self.call_limited(method, path, body, limit).await
    }

    /// [`Endpoint::call`] for an answer of at most `limit` bytes.
    async fn call_limited<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        limit: usize,
    ) -> Result<T, EndpointError> {
        with_retries(self.retries(), "a request", || async {
            let (shown, bytes) = self
                .call_once(method.clone(), path, body.clone(), limit)
                .await?;
            decode(&shown, &bytes)
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

    /// One attempt: the URL as it may be shown and the successful answer's bytes.
    async fn call_once(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        limit: usize,
    ) -> Result<(String, Bytes), EndpointError> {
        let credential = self.credential().await;
        let (mut request, shown) =
            self.request(method, path, "application/json", credential.as_ref())?;
        if let Endpoint::Remote { timeout, .. } = self {
            request = request.timeout(*timeout);
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body);
        }
        let _permit = self.permit().await?;
        let response = request.send().await.map_err(transport(&shown))?;
        self.observe(credential.as_ref(), &response, &shown)?;
        let status = response.status();
        if !status.is_success() {
            return Err(Endpoint::error_of(response, shown).await);
        }
        let bytes = read_bounded(response, limit, &shown).await?;
        Ok((shown, bytes))
    }

    /// How the next request to a remote peer with credentials logs in
    /// (see [`Session`]); `None` without credentials.
    async fn credential(&self) -> Option<Credential> {
        match self {
            Endpoint::Remote {
                client,
                db,
                timeout,
                session,
                ..
            } => match &db.auth {
                Some(auth) => Some(session.credential(client, &db.url, auth, *timeout).await),
                None => None,
            },
            Endpoint::Local { .. } => None,
        }
    }

    /// Lets the session see an answer: a renewed cookie is kept; a refused
    /// one is a transient failure, retried after logging in again.
    fn observe(
        &self,
        used: Option<&Credential>,
        response: &reqwest::Response,
        shown: &str,
    ) -> Result<(), EndpointError> {
        let (Endpoint::Remote { session, .. }, Some(used)) = (self, used) else {
            return Ok(());
        };
        let status = response.status().as_u16();
        session.observe(used, status, response.headers());
        if status == 401 && matches!(used, Credential::Cookie(_)) {
            return Err(EndpointError::Transport {
                url: shown.to_string(),
                detail: "the session cookie was refused; logging in again".into(),
            });
        }
        Ok(())
    }

    /// A request to a remote peer with its headers and credentials (the
    /// session cookie, or basic auth), and the URL as it may be shown.
    fn request(
        &self,
        method: Method,
        path: &str,
        accept: &str,
        credential: Option<&Credential>,
    ) -> Result<(reqwest::RequestBuilder, String), EndpointError> {
        let Endpoint::Remote { client, db, .. } = self else {
            return Err(self.malformed("not remote"));
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
        match (credential, &db.auth) {
            (Some(Credential::Cookie(cookie)), _) => {
                request = request.header("cookie", format!("AuthSession={cookie}"));
            }
            (_, Some(auth)) => {
                request = request.basic_auth(&auth.username, Some(&auth.password));
            }
            (_, None) => {}
        }
        Ok((request, shown))
    }

    /// Turns an unsuccessful answer into its CouchDB error.
    async fn error_of(response: reqwest::Response, shown: String) -> EndpointError {
        let status = response.status();
        let body = read_bounded(response, MAX_SMALL_ANSWER_BYTES, &shown)
            .await
            .unwrap_or_default();
        http_error(shown, status, &body)
    }

    /// A request whose answer is read as a stream (attachments), retried
    /// while it fails transiently before the answer starts. The answer
    /// keeps its connection permit until it is dropped.
    pub(crate) async fn send_with_retries(
        &self,
        method: Method,
        path: &str,
        accept: &str,
    ) -> Result<Streamed, EndpointError> {
        with_retries(self.retries(), "a request", || async {
            let credential = self.credential().await;
            let (request, shown) =
                self.request(method.clone(), path, accept, credential.as_ref())?;
            let permit = self.permit().await?;
            let response = request.send().await.map_err(transport(&shown))?;
            self.observe(credential.as_ref(), &response, &shown)?;
            if response.status().is_success() {
                Ok(Streamed { response, permit })
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
    ) -> Result<(), EndpointError> {
        let credential = self.credential().await;
        let (request, shown) =
            self.request(method, path, "application/json", credential.as_ref())?;
        let _permit = self.permit().await?;
        let response = request
            .header("content-type", content_type)
            .header("content-length", length)
            .body(body)
            .send()
            .await
            .map_err(transport(&shown))?;
        self.observe(credential.as_ref(), &response, &shown)?;
        if !response.status().is_success() {
            return Err(Endpoint::error_of(response, shown).await);
        }
        let bytes = read_bounded(response, MAX_SMALL_ANSWER_BYTES, &shown).await?;
        decode::<IgnoredAny>(&shown, &bytes).map(|_| ())
    }

    /// The `_db_updates` feed of a remote database's server, from now on,
    /// continuous, with a heartbeat: read as a stream of event lines.
    pub(crate) async fn db_updates_feed(
        &self,
        heartbeat: Duration,
    ) -> Result<Streamed, EndpointError> {
        let path = format!(
            "../_db_updates?feed=continuous&since=now&heartbeat={}",
            heartbeat.as_millis()
        );
        // A 401 is the answer for credentials that are no server admin's:
        // a refused session cookie is tried once more after a new login,
        // then the refusal stands (not retried as a lost session would be).
        for fresh_login in [false, true] {
            let credential = self.credential().await;
            let (request, shown) =
                self.request(Method::GET, &path, "application/json", credential.as_ref())?;
            let response = request.send().await.map_err(transport(&shown))?;
            let status = response.status();
            if let (Endpoint::Remote { session, .. }, Some(used)) = (self, credential.as_ref()) {
                session.observe(used, status.as_u16(), response.headers());
            }
            if status.is_success() {
                return Ok(Streamed {
                    response,
                    permit: None,
                });
            }
            let cookie = matches!(credential, Some(Credential::Cookie(_)));
            if status == StatusCode::UNAUTHORIZED && cookie && !fresh_login {
                continue;
            }
            return Err(Endpoint::error_of(response, shown).await);
        }
        Err(self.malformed("no answer"))
    }

    /// `GET /db`: the update sequence and `instance_start_time`.
    pub async fn info(&self) -> Result<DbInfo, EndpointError> {
        match self {
            Endpoint::Local { .. } => {
                let db = self.local().await?;
                Ok(DbInfo {
                    update_seq: Value::from(db.seq_string(db.update_seq())),
                    instance_start_time: db.instance_start_time().to_string(),
                })
            }
            Endpoint::Remote { .. } => match self.call(Method::GET, "", None).await {
                Err(EndpointError::Http { status: 404, .. }) => {
                    Err(EndpointError::NotFound(self.display()))
                }
                other => other,
            },
        }
    }

    /// Creates the database (an existing one is fine). A remote peer gets
    /// `params` (`create_target_params`) as the creation's query.
    pub async fn create(&self, params: &Map<String, Value>) -> Result<(), EndpointError> {
        match self {
            // Our store has no shards or replicas to size: `q` and `n` mean
            // nothing here, and partitioned databases are not supported.
            Endpoint::Local {
                user: Some(user), ..
            } => Err(self.refusal_error(access::denied(user, access::NOT_SERVER_ADMIN))),
            Endpoint::Local { store, name, .. } => match store.create_db(name).await {
                Ok(_) | Err(store::StoreError::DbExists(_)) => Ok(()),
                Err(e) => Err(e.into()),
            },
            Endpoint::Remote { .. } => {
                let path = create_query(params);
                match self.call::<IgnoredAny>(Method::PUT, &path, None).await {
                    Ok(_) | Err(EndpointError::Http { status: 412, .. }) => Ok(()),
                    Err(e) => Err(e),
                }
            }
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
                Ok(doc) => Ok(Some(doc)),
                Err(EndpointError::Http { status: 404, .. }) => Ok(None),
                Err(e) => Err(e),
            },
        }
    }

    /// A document (its winner), `None` when there is none.
    pub async fn get_doc(&self, id: &str) -> Result<Option<Value>, EndpointError> {
        match self {
            Endpoint::Local { .. } => match self
                .local_source()
                .await?
                .get(id, store::GetOptions::default())
                .await
            {
                Ok(doc) => Ok(Some(doc.to_value()?)),
                Err(store::StoreError::DocNotFound(_)) => Ok(None),
                Err(e) => Err(e.into()),
            },
            Endpoint::Remote { .. } => {
                // `_design/name` keeps its slash; the name is encoded.
                let path = match id.strip_prefix("_design/") {
                    Some(name) => format!("_design/{}", form_encode(name)),
                    None => form_encode(id),
                };
                match self.call(Method::GET, &path, None).await {
                    Ok(doc) => Ok(Some(doc)),
                    Err(EndpointError::Http { status: 404, .. }) => Ok(None),
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// Writes a local (checkpoint) document; returns its new `_rev`.
    pub async fn put_local(&self, id: &str, doc: &impl Serialize) -> Result<String, EndpointError> {
        let encoding = |e: serde_json::Error| self.malformed(format!("encoding {id}: {e}"));
        match self {
            Endpoint::Local { .. } => {
                let doc = serde_json::to_value(doc).map_err(encoding)?;
                Ok(self.local().await?.put_local(id, doc).await?)
            }
            Endpoint::Remote { .. } => {
                let body = serde_json::to_vec(doc).map_err(encoding)?;
                let answer: DocWritten = self.call(Method::PUT, id, Some(body.into())).await?;
                Ok(answer.rev)
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
                let db = self.local_source().await?;
                let since_num = local_seq(&db, since).map_err(|e| self.malformed(e.to_string()))?;
                let doc_ids = match filter {
                    ChangesFilter::DocIds(ids) => Some(ids.clone()),
                    _ => None,
                };
                let selector = match filter {
                    ChangesFilter::Selector(sel) => Some(sel.parsed.clone()),
                    _ => None,
                };
                let design_only =
                    matches!(filter, ChangesFilter::Named { name, .. } if name == "_design");
                let script = match filter {
                    ChangesFilter::Named { name, query_params } if !design_only => {
                        Some(self.local_filter(&db, name, query_params).await?)
                    }
                    _ => None,
                };
                let page = db
                    .changes(ChangesQuery {
                        since: since_num,
                        limit: limit as usize,
                        all_leaves: true,
                        include_docs: selector.is_some() || script.is_some(),
                        doc_ids,
                        count_pending,
                        ..Default::default()
                    })
                    .await?;
                let pending = count_pending.then_some(page.pending);
                let verdicts = match &script {
                    Some(script) if !page.rows.is_empty() => Some(
                        script
                            .passes_rows(&page.rows)
                            .await
                            .map_err(|e| self.script_error(e))?,
                    ),
                    _ => None,
                };
                let changes = page
                    .rows
                    .into_iter()
                    .enumerate()
                    .filter(|(i, row)| {
                        if let Some(verdicts) = &verdicts {
                            return verdicts.get(*i).copied().unwrap_or(false);
                        }
                        if design_only {
                            return row.id.starts_with("_design/");
                        }
                        selector
                            .as_ref()
                            .is_none_or(|s| query_server::selector_passes(s, row))
                    })
                    .map(|(_, row)| row)
                    .map(|row| Change {
                        seq: Value::from(db.seq_string(row.seq)),
                        id: row.id,
                        revs: row.changes,
                    })
                    .collect();
                Ok(ChangesBatch {
                    changes,
                    last_seq: Value::from(db.seq_string(page.last_seq)),
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
                let encode = |body: &Value| {
                    ejson::to_vec_of(body)
                        .map(Bytes::from)
                        .map_err(|e| self.malformed(e.to_string()))
                };
                let (method, body) = match filter {
                    ChangesFilter::All => (Method::GET, None),
                    ChangesFilter::DocIds(ids) => {
                        path.push_str("&filter=_doc_ids");
                        (Method::POST, Some(encode(&json!({"doc_ids": ids}))?))
                    }
                    ChangesFilter::Selector(sel) => {
                        path.push_str("&filter=_selector");
                        (Method::POST, Some(encode(&json!({"selector": sel.json}))?))
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
                let page: ChangesPage = self.call(method, &path, body).await?;
                let changes = page
                    .results
                    .into_iter()
                    .map(|row| Change {
                        seq: row.seq,
                        id: row.id,
                        revs: row.changes.into_iter().map(|c| c.rev).collect(),
                    })
                    .collect();
                Ok(ChangesBatch {
                    changes,
                    last_seq: page.last_seq,
                    pending: page.pending,
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
                let db = self.local_source().await?;
                let mut rx = db.subscribe();
                if *rx.borrow_and_update() > local_seq(&db, since).unwrap_or(0) {
                    return Ok(());
                }
                tokio::select! {
                    _ = rx.changed() => {}
                    _ = stop.changed() => {}
                    _ = tokio::time::sleep(timeout) => {}
                }
                Ok(())
            }
            Endpoint::Remote { timeout: t, .. } => {
                let path = longpoll_path(since, timeout, *t);
                // Retried like any request: a source restarting drops the
                // feed. What it lists is read by the next page of changes.
                tokio::select! {
                    answer = self.call::<IgnoredAny>(Method::GET, &path, None) => answer.map(|_| ()),
                    _ = stop.changed() => Ok(()),
                }
            }
        }
    }

    /// Whether the source has changes after `since`: a local database
    /// answers at once; a remote one is asked with a longpoll feed that
    /// waits up to `timeout` for the first change.
    pub async fn changes_after(
        &self,
        since: &Value,
        timeout: Duration,
    ) -> Result<bool, EndpointError> {
        match self {
            Endpoint::Local { .. } => {
                let db = self.local_source().await?;
                Ok(db.update_seq() > local_seq(&db, since).unwrap_or(0))
            }
            Endpoint::Remote { timeout: t, .. } => {
                let path = longpoll_path(since, timeout, *t);
                let answer: Value = self.call(Method::GET, &path, None).await?;
                Ok(answer["results"].as_array().is_some_and(|r| !r.is_empty()))
            }
        }
    }

    /// `_revs_diff`: which of these revisions the database lacks.
    pub async fn revs_diff(&self, asked: RevsDiffRequest) -> Result<Vec<Missing>, EndpointError> {
        match self {
            Endpoint::Local { .. } => {
                let db = self.local().await?;
                Ok(db
                    .revs_diff(asked.0)
                    .await?
                    .into_iter()
                    .map(|(id, diff)| Missing {
                        id,
                        revs: diff.missing,
                        possible_ancestors: diff.possible_ancestors,
                    })
                    .collect())
            }
            Endpoint::Remote { .. } => {
                let body = serde_json::to_vec(&asked).map_err(|e| self.malformed(e.to_string()))?;
                let diff: RevsDiffAnswer = self
                    .call(Method::POST, "_revs_diff", Some(body.into()))
                    .await?;
                Ok(diff
                    .0
                    .into_iter()
                    .map(|(id, entry)| Missing {
                        id,
                        revs: entry.missing,
                        possible_ancestors: entry.possible_ancestors,
                    })
                    .collect())
            }
        }
    }

    /// The missing revisions of one document with their history and
    /// attachment stubs (bytes travel separately: see `transfer`).
    pub async fn fetch(&self, missing: &Missing) -> Result<Vec<Value>, EndpointError> {
        let mut fetched = Fetched::new(self, missing.revs.len());
        fetched.document(missing.id.clone())?;
        match self {
            Endpoint::Local { .. } => {
                let db = self.local_source().await?;
                let opts = GetOptions {
                    revs: true,
                    latest: true,
                    ..Default::default()
                };
                let found = db
                    .open_revs(
                        &missing.id,
                        OpenRevs::List(missing.revs.clone()),
                        opts,
                        false,
                    )
                    .await?;
                for rev in found {
                    match rev {
                        OpenRev::Ok(doc) => fetched.docs.push(doc.to_value()?),
                        OpenRev::Missing(rev) => fetched.take(FetchedRev::Missing(rev)),
                    }
                }
            }
            Endpoint::Remote { .. } => {
                let list = serde_json::to_string(&missing.revs)
                    .map_err(|e| self.malformed(e.to_string()))?;
                let path = format!(
                    "{}?revs=true&latest=true&open_revs={}",
                    encode_doc_id(&missing.id),
                    form_encode(&list)
                );
                let answer: Vec<FetchedRev> = self.call(Method::GET, &path, None).await?;
                for rev in answer {
                    fetched.take(rev);
                }
            }
        }
        fetched.finish()
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
            && bulk_get.load(Ordering::Relaxed) != BULK_GET_NO
        {
            let request = BulkGetRequest {
                docs: missing
                    .iter()
                    .flat_map(|m| m.revs.iter().map(|rev| BulkGetItem { id: &m.id, rev }))
                    .collect(),
            };
            let body = serde_json::to_vec(&request).map_err(|e| self.malformed(e.to_string()))?;
            match self
                .call_limited::<BulkGetAnswer>(
                    Method::POST,
                    "_bulk_get?revs=true&latest=true",
                    Some(body.into()),
                    self.max_answer(),
                )
                .await
            {
                Ok(answer) => {
                    bulk_get.store(BULK_GET_YES, Ordering::Relaxed);
                    let mut fetched = Fetched::new(self, request.docs.len());
                    for result in answer.results {
                        fetched.document(result.id)?;
                        for rev in result.docs {
                            fetched.take(rev);
                        }
                    }
                    return fetched.finish();
                }
                // A malformed answer is the peer failing, not lacking
                // `_bulk_get`; a request that cannot be built fails alike
                // one by one.
                // A batch too large to take at once is fetched document
                // by document (each answer bounded alike).
                Err(EndpointError::TooLarge { .. }) => {
                    let mut docs = Vec::new();
                    for m in missing {
                        docs.extend(self.fetch(m).await?);
                    }
                    return Ok(docs);
                }
                Err(e @ (EndpointError::Protocol { .. } | EndpointError::Request { .. })) => {
                    return Err(e);
                }
                Err(e) if e.is_transient() => return Err(e),
                Err(e) => {
                    tracing::info!(peer = %self.display(), error = %e, "_bulk_get unavailable; fetching documents one by one");
                    bulk_get.store(BULK_GET_NO, Ordering::Relaxed);
                }
            }
        }
        if let Endpoint::Local { .. } = self {
            // One read for the whole batch.
            let db = self.local_source().await?;
            let requests: Vec<store::BulkGetRequest> = missing
                .iter()
                .flat_map(|m| {
                    m.revs.iter().map(move |rev| store::BulkGetRequest {
                        id: m.id.clone(),
                        rev: Some(rev.clone()),
                        atts_since: Vec::new(),
                    })
                })
                .collect();
            let mut fetched = Fetched::new(self, requests.len());
            for result in db.bulk_get(requests, true, true, false).await? {
                fetched.document(result.id)?;
                for doc in result.docs {
                    match doc {
                        Ok(doc) => fetched.docs.push(doc.to_value()?),
                        Err(e) => {
                            fetched.unreadable(&e.rev.unwrap_or_default(), e.error, &e.reason)
                        }
                    }
                }
            }
            return fetched.finish();
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
                let (db, gate) = self.local_gate().await?;
                let mut failures = Vec::new();
                let mut inputs = Vec::with_capacity(docs.len());
                for doc in docs {
                    let mut input = DocInput::from_json(doc)?;
                    match self.refusal(&db, &gate, &mut input).await? {
                        Some(refusal) => failures.push(refusal),
                        None => inputs.push(input),
                    }
                }
                let results = db.bulk_docs(inputs, false).await?;
                failures.extend(results.into_iter().filter_map(|r| {
                    r.result.err().map(|f| WriteFailure {
                        id: r.id,
                        error: f.error.into(),
                        reason: f.reason,
                    })
                }));
                Ok(failures)
            }
            Endpoint::Remote { .. } => {
                // Each document is encoded once: its length decides the
                // requests it goes in, its bytes are spliced into them.
                let encoded = docs
                    .iter()
                    .map(ejson::to_vec_of)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| self.malformed(e.to_string()))?;
                let mut failures = Vec::new();
                for range in chunk_by_bytes(&encoded, MAX_WRITE_BYTES) {
                    failures.extend(
                        self.write_remote(&docs[range.clone()], &encoded[range])
                            .await?,
                    );
                }
                Ok(failures)
            }
        }
    }

    /// One `_bulk_docs` request of `docs` (`encoded` is their JSON); a 413
    /// splits the batch and retries the halves, down to a single document
    /// the target then refuses.
    fn write_remote<'a>(
        &'a self,
        docs: &'a [Value],
        encoded: &'a [Vec<u8>],
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Vec<WriteFailure>, EndpointError>> + Send + 'a>,
    > {
        Box::pin(async move {
            let body = bulk_docs_body(encoded);
            match self
                .call::<Vec<BulkDocsRow>>(Method::POST, "_bulk_docs", Some(body))
                .await
            {
                Ok(rows) => Ok(rows
                    .into_iter()
                    .filter_map(|row| {
                        Some(WriteFailure {
                            error: row.error?,
                            id: row.id.unwrap_or_default(),
                            reason: row.reason.unwrap_or_default(),
                        })
                    })
                    .collect()),
                Err(EndpointError::Http {
                    status: 413,
                    error,
                    reason,
                    ..
                }) => {
                    if docs.len() <= 1 {
                        let id = docs
                            .first()
                            .and_then(|doc| DocMeta::of(doc).ok())
                            .map(|meta| meta.id.to_string())
                            .unwrap_or_default();
                        return Ok(vec![WriteFailure { id, error, reason }]);
                    }
                    let half = docs.len() / 2;
                    let mut failures = self.write_remote(&docs[..half], &encoded[..half]).await?;
                    failures.extend(self.write_remote(&docs[half..], &encoded[half..]).await?);
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
                .call::<IgnoredAny>(
                    Method::POST,
                    "_ensure_full_commit",
                    Some(Bytes::from_static(b"{}")),
                )
                .await
                .map(|_| ()),
        }
    }
}

/// Fetched revisions, gathered document by document (a document's are
/// adjacent in every answer, in the order asked), each document's repeated
/// leaves dropped.
struct Fetched<'e> {
    endpoint: &'e Endpoint,
    docs: Vec<Value>,
    /// The document being gathered, and where its revisions start.
    id: Option<String>,
    start: usize,
}

impl<'e> Fetched<'e> {
    fn new(endpoint: &'e Endpoint, capacity: usize) -> Fetched<'e> {
        Fetched {
            endpoint,
            docs: Vec::with_capacity(capacity),
            id: None,
            start: 0,
        }
    }

    /// The next revisions are `id`'s.
    fn document(&mut self, id: String) -> Result<(), EndpointError> {
        if self.id.as_deref() != Some(id.as_str()) {
            self.dedup()?;
            self.start = self.docs.len();
            self.id = Some(id);
        }
        Ok(())
    }

    /// Keeps a fetched revision, or says why there is none.
    fn take(&mut self, fetched: FetchedRev) {
        match fetched {
            FetchedRev::Ok(doc) => self.docs.push(doc),
            FetchedRev::Missing(rev) => self.unreadable(&rev.to_string(), "not_found", "missing"),
            FetchedRev::Error(e) => {
                let rev = e.rev.map(|r| r.to_string()).unwrap_or_default();
                self.unreadable(&rev, &e.error, &e.reason);
            }
        }
    }

    /// A revision the source listed but could not read (compacted or purged
    /// since): there is nothing to copy, as for CouchDB's replicator, but
    /// it is said.
    fn unreadable(&self, rev: &str, error: &str, reason: &str) {
        let id = self.id.as_deref().unwrap_or_default();
        tracing::warn!(peer = %self.endpoint.display(), id, rev, error, reason, "the source could not read a revision it listed");
    }

    /// Drops the current document's repeated revisions: with `latest=true`
    /// two asked revisions may lead to the same leaf. Only a document with
    /// several fetched revisions has its metadata read.
    fn dedup(&mut self) -> Result<(), EndpointError> {
        let from = self.start;
        if self.docs.len() <= from + 1 {
            return Ok(());
        }
        let mut seen: Vec<RevId> = Vec::with_capacity(self.docs.len() - from);
        let mut keep = vec![true; from];
        for doc in &self.docs[from..] {
            let rev = DocMeta::of(doc)
                .map_err(|e| self.endpoint.malformed(format!("fetched document: {e}")))?
                .rev;
            keep.push(!seen.contains(&rev));
            seen.push(rev);
        }
        let mut keep = keep.into_iter();
        self.docs.retain(|_| keep.next().unwrap_or(true));
        Ok(())
    }

    fn finish(mut self) -> Result<Vec<Value>, EndpointError> {
        self.dedup()?;
        Ok(self.docs)
    }
}

/// The query of the target's creation `PUT` from `create_target_params`:
/// CouchDB reads the shard count `q`, the replica count `n` and
/// `partitioned` there. Other keys mean nothing to a database creation and
/// are not sent.
fn create_query(params: &Map<String, Value>) -> String {
    let mut query = String::new();
    for key in ["q", "n", "partitioned"] {
        let text = match params.get(key) {
            None | Some(Value::Null) => continue,
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        query.push(if query.is_empty() { '?' } else { '&' });
        query.push_str(key);
        query.push('=');
        query.push_str(&form_encode(&text));
    }
    query
}

/// A `_bulk_docs` body with `new_edits=false` around documents already
/// encoded by the JSON writer (so the splice is valid JSON).
fn bulk_docs_body(encoded: &[Vec<u8>]) -> Bytes {
    const HEAD: &[u8] = b"{\"new_edits\":false,\"docs\":[";
    let size = HEAD.len() + 2 + encoded.iter().map(|d| d.len() + 1).sum::<usize>();
    let mut body = Vec::with_capacity(size);
    body.extend_from_slice(HEAD);
    for (i, doc) in encoded.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(doc);
    }
    body.extend_from_slice(b"]}");
    Bytes::from(body)
}

/// The most JSON one `_bulk_docs` request carries, as CouchDB's replicator
/// flushes: large enough to amortize requests, small enough for any peer.
const MAX_WRITE_BYTES: usize = 4 << 20;

/// Splits encoded documents into runs whose JSON stays under `limit` bytes
/// (a lone larger document still gets a run of its own).
fn chunk_by_bytes(encoded: &[Vec<u8>], limit: usize) -> Vec<std::ops::Range<usize>> {
    let mut chunks = Vec::new();
    let mut start = 0;
    let mut size = 0;
    for (i, doc) in encoded.iter().enumerate() {
        if i > start && size + doc.len() > limit {
            chunks.push(start..i);
            start = i;
            size = 0;
        }
        size += doc.len();
    }
    if start < encoded.len() {
        chunks.push(start..encoded.len());
    }
    chunks
}

/// A sequence of a local database, as its own feed gave it (`N-token`),
/// as a checkpoint from before sequences were strings holds it (a
/// number), or as a user wrote it (`since_seq`).
/// A longpoll changes feed from `since` that waits up to `wait` for the
/// first change, and answers before the request's own `timeout`.
fn longpoll_path(since: &Value, wait: Duration, timeout: Duration) -> String {
    let since_text = match since {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    format!(
        "_changes?feed=longpoll&limit=1&since={}&timeout={}",
        form_encode(&since_text),
        wait.min(timeout * 3 / 4).as_millis()
    )
}

fn local_seq(db: &store::Database, seq: &Value) -> Result<u64, store::MalformedSeq> {
    match seq {
        Value::Number(n) => n.as_u64().ok_or(store::MalformedSeq),
        Value::String(s) => db.parse_seq(s),
        Value::Null => Ok(0),
        _ => Err(store::MalformedSeq),
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
        let doc =
            |n: usize| serde_json::to_vec(&json!({"_id": "x", "pad": "p".repeat(n)})).unwrap();
        let encoded = vec![doc(10), doc(10), doc(100), doc(10)];
        let chunks = chunk_by_bytes(&encoded, 80);
        assert_eq!(chunks, [0..2, 2..3, 3..4]);
        assert!(chunk_by_bytes(&[], 80).is_empty());
        let body: Value = serde_json::from_slice(&bulk_docs_body(&encoded[..2])).unwrap();
        assert_eq!(body["new_edits"], false);
        assert_eq!(body["docs"].as_array().map(Vec::len), Some(2));
        let body: Value = serde_json::from_slice(&bulk_docs_body(&[])).unwrap();
        assert_eq!(body["docs"], json!([]));
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
        assert!(
            !EndpointError::Request {
                url: String::new(),
                detail: String::new()
            }
            .is_transient()
        );
    }

    /// A peer on a loopback port that answers each request with what
    /// `answer` gives for its request line, after `delay`, counting the
    /// requests in flight (the most at once) and keeping the request lines.
    struct FakePeer {
        url: String,
        most_in_flight: Arc<std::sync::atomic::AtomicUsize>,
        requests: Arc<std::sync::Mutex<Vec<String>>>,
    }

    async fn fake_peer(delay: Duration, answer: fn(&str) -> (u16, String)) -> FakePeer {
        use std::sync::atomic::AtomicUsize;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/db/", listener.local_addr().unwrap());
        let in_flight = Arc::new(AtomicUsize::new(0));
        let most_in_flight = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (most, lines) = (most_in_flight.clone(), requests.clone());
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let (in_flight, most, lines) = (in_flight.clone(), most.clone(), lines.clone());
                tokio::spawn(async move {
                    let mut buffer = Vec::new();
                    loop {
                        // One request: headers, then a body of Content-Length bytes.
                        let end = loop {
                            if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                                break at + 4;
                            }
                            let mut chunk = [0u8; 4096];
                            match socket.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                            }
                        };
                        let head = String::from_utf8_lossy(&buffer[..end]).to_string();
                        let length: usize = head
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length")
                                    .then(|| v.trim().parse().ok())?
                            })
                            .unwrap_or(0);
                        while buffer.len() < end + length {
                            let mut chunk = [0u8; 4096];
                            match socket.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                            }
                        }
                        buffer.drain(..end + length);
                        let line = head.lines().next().unwrap_or("").to_string();
                        lines.lock().unwrap().push(line.clone());
                        let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        tokio::time::sleep(delay).await;
                        in_flight.fetch_sub(1, Ordering::SeqCst);
                        let (status, body) = answer(&line);
                        let reply = format!(
                            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if socket.write_all(reply.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        FakePeer {
            url,
            most_in_flight,
            requests,
        }
    }

    fn remote(url: &str, http_connections: usize) -> Endpoint {
        let db = RemoteDb {
            url: url.parse().unwrap(),
            headers: Vec::new(),
            auth: None,
        };
        let options = HttpOptions {
            max_answer: crate::spec::defaults::MAX_ANSWER_BYTES as usize,
            timeout: Duration::from_secs(10),
            retries: 0,
            http_connections,
        };
        Endpoint::remote(&db, options).unwrap()
    }

    fn ok(_: &str) -> (u16, String) {
        (200, r#"{"ok":true}"#.to_string())
    }

    #[tokio::test]
    async fn requests_in_flight_to_a_peer_never_exceed_http_connections() {
        for (connections, expected) in [(2, 2), (1, 1), (8, 8)] {
            let peer = fake_peer(Duration::from_millis(100), ok).await;
            let endpoint = remote(&peer.url, connections);
            let calls = (0..8).map(|_| endpoint.ensure_full_commit());
            for result in futures_util::future::join_all(calls).await {
                result.unwrap();
            }
            assert_eq!(
                peer.most_in_flight.load(Ordering::SeqCst),
                expected,
                "with http_connections = {connections}"
            );
        }
    }

    #[tokio::test]
    async fn a_request_that_cannot_be_built_fails_at_once_and_is_never_retried() {
        let peer = fake_peer(Duration::ZERO, ok).await;
        // Headers the spec would refuse, put here directly: whatever slips
        // past it still fails on the first try, not after retries.
        let db = RemoteDb {
            url: peer.url.parse().unwrap(),
            headers: vec![("X-Bad".into(), "a\r\nInjected: yes".into())],
            auth: None,
        };
        let options = HttpOptions {
            max_answer: crate::spec::defaults::MAX_ANSWER_BYTES as usize,
            timeout: Duration::from_secs(10),
            retries: 5,
            http_connections: 2,
        };
        let endpoint = Endpoint::remote(&db, options).unwrap();
        let started = std::time::Instant::now();
        let calls = [
            endpoint.info().await.map(|_| ()),
            endpoint.ensure_full_commit().await,
            endpoint
                .send_with_retries(Method::GET, "doc", "application/json")
                .await
                .map(|_| ()),
            endpoint
                .send_streaming(Method::PUT, "doc", "text/plain", "x".into(), 1)
                .await,
        ];
        for result in calls {
            let e = result.unwrap_err();
            assert!(
                matches!(&e, EndpointError::Request { url, detail } if url.starts_with(&peer.url) && detail.contains("header")),
                "{e:?}"
            );
            assert!(!e.is_transient(), "{e}");
        }
        // The first retry would have waited 250 ms.
        assert!(started.elapsed() < RETRY_START, "{:?}", started.elapsed());
        assert!(peer.requests.lock().unwrap().is_empty(), "nothing was sent");
        // _bulk_get is not given up for it: the error is the request's own.
        let missing = Missing {
            id: "d".into(),
            revs: vec!["1-a".parse().unwrap()],
            possible_ancestors: Vec::new(),
        };
        assert!(matches!(
            endpoint.fetch_many(&[missing], true).await,
            Err(EndpointError::Request { .. })
        ));
        let Endpoint::Remote { bulk_get, .. } = &endpoint else {
            panic!("remote")
        };
        assert_eq!(bulk_get.load(Ordering::Relaxed), BULK_GET_UNKNOWN);
    }

    #[tokio::test]
    async fn the_target_is_created_with_q_n_and_partitioned() {
        fn created(line: &str) -> (u16, String) {
            if line.starts_with("PUT /db/?q=8") {
                (412, r#"{"error":"file_exists","reason":"exists"}"#.into())
            } else {
                (201, r#"{"ok":true}"#.into())
            }
        }
        let peer = fake_peer(Duration::ZERO, created).await;
        let endpoint = remote(&peer.url, 2);
        let params = json!({"q": 8, "n": "1", "partitioned": true, "placement": "x"});
        let Value::Object(params) = params else {
            unreachable!()
        };
        // An existing database (412) is fine.
        endpoint.create(&params).await.unwrap();
        endpoint.create(&Map::new()).await.unwrap();
        assert_eq!(
            *peer.requests.lock().unwrap(),
            [
                "PUT /db/?q=8&n=1&partitioned=true HTTP/1.1",
                "PUT /db/ HTTP/1.1"
            ]
        );
    }

    #[tokio::test]
    async fn a_malformed_answer_is_an_error_of_the_call_not_a_dropped_revision() {
        fn broken(line: &str) -> (u16, String) {
            let body = if line.starts_with("POST /db/_revs_diff") {
                r#"{"a":{"missing":["1-a","not a revision"]}}"#
            } else if line.starts_with("GET /db/_changes") {
                r#"{"results":[{"seq":1,"id":"a","changes":[{"rev":"x"}]}],"last_seq":1}"#
            } else if line.starts_with("POST /db/_bulk_get") {
                r#"{"results":[{"id":"a","docs":[{"ok":{"_id":"a","_rev":"1-a"}},{"ok":{"_id":"a"}}]}]}"#
            } else if line.starts_with("POST /db/_bulk_docs") {
                r#"[{"id":"a","error":"conflict","rev":7}]"#
            } else {
                r#"{"db_name":"db"}"#
            };
            (200, body.into())
        }
        let peer = fake_peer(Duration::ZERO, broken).await;
        let endpoint = remote(&peer.url, 2);
        let rev = RevId::parse("1-a").unwrap();
        let asked = wire::rows::Entries(vec![("a".to_string(), vec![rev.clone()])]);
        let missing = Missing {
            id: "a".into(),
            revs: vec![rev.clone(), RevId::parse("2-b").unwrap()],
            possible_ancestors: Vec::new(),
        };
        let errors = [
            endpoint.revs_diff(asked).await.unwrap_err(),
            endpoint
                .changes(&json!(0), 10, &ChangesFilter::All, false)
                .await
                .unwrap_err(),
            endpoint.fetch_many(&[missing], true).await.unwrap_err(),
            endpoint
                .write(vec![json!({"_id": "a", "_rev": "1-a"})])
                .await
                .unwrap_err(),
            endpoint.info().await.unwrap_err(),
        ];
        for e in errors {
            assert!(
                matches!(&e, EndpointError::Protocol { detail, .. } if detail.starts_with("malformed answer") || detail.starts_with("fetched document")),
                "{e}"
            );
            assert!(!e.is_transient(), "{e}");
        }
    }

    #[tokio::test]
    async fn errors_are_read_from_couchdb_bodies_and_from_anything_else() {
        fn refuse(line: &str) -> (u16, String) {
            if line.starts_with("GET /db/_local") {
                (403, r#"{"error":"forbidden","reason":{"why":"no"}}"#.into())
            } else {
                (502, "<html>\r\nbad gateway</html>".into())
            }
        }
        let peer = fake_peer(Duration::ZERO, refuse).await;
        let endpoint = remote(&peer.url, 2);
        match endpoint.get_local("_local/x").await {
            Err(EndpointError::Http {
                status: 403,
                error,
                reason,
                ..
            }) => assert_eq!(
                (error.as_str(), reason.as_str()),
                ("forbidden", r#"{"why":"no"}"#)
            ),
            other => panic!("{other:?}"),
        }
        match endpoint.ensure_full_commit().await {
            Err(EndpointError::Http {
                status: 502,
                error,
                reason,
                ..
            }) => assert_eq!(
                (error.as_str(), reason.as_str()),
                ("bad_gateway", "<html>  bad gateway</html>")
            ),
            other => panic!("{other:?}"),
        }
    }
}
