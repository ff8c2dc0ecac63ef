//! A remote database as a peer, over HTTP: the only place of the crate
//! that speaks HTTP (as CouchDB's `couch_replicator_httpc`). Each protocol
//! call is one or a few requests ([`request`] builds, sends, retries and
//! decodes them; [`session`] logs in), their paths and bodies are built in
//! [`paths`], and revisions with attachments travel as `multipart/related`
//! ([`attachments`]).

mod attachments;
mod paths;
pub(crate) mod remote_feed;
mod request;
pub mod session;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use bytes::Bytes;
use reqwest::Method;
use serde::Serialize;
use serde::de::IgnoredAny;
use serde_json::{Map, Value, json};
use tokio::sync::Semaphore;
use wire::doc::DocMeta;
use wire::rows::{
    BulkDocsRow, BulkGetAnswer, BulkGetItem, BulkGetRequest, ChangesPage, DbInfo, DocWritten,
    FetchedRev, RevsDiffAnswer, RevsDiffRequest,
};

use self::paths::{
    MAX_WRITE_BYTES, bulk_docs_body, chunk_by_bytes, create_query, encode_doc_id, form_encode,
    longpoll_path,
};
use self::session::Session;
use super::fetched::Fetched;
use super::{Change, ChangesBatch, EndpointError, Missing, WriteFailure};
use crate::spec::{ChangesFilter, RemoteDb, ReplicationSpec};

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

/// A remote database, called over HTTP.
#[derive(Debug, Clone)]
pub struct HttpPeer {
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
}

/// `_bulk_get` support (and encoded attachments): not yet known, supported, or not.
const BULK_GET_UNKNOWN: u8 = 0;
const BULK_GET_YES: u8 = 1;
const BULK_GET_NO: u8 = 2;

impl HttpPeer {
    /// A peer for a remote database, called with `options`.
    pub fn new(db: &RemoteDb, options: HttpOptions) -> Result<HttpPeer, EndpointError> {
        let connections = options.http_connections.clamp(1, Semaphore::MAX_PERMITS);
        let client = request::shared_client(options.timeout, connections).map_err(|e| {
            EndpointError::Request {
                url: db.url.to_string(),
                detail: format!("the HTTP client cannot be built: {e}"),
            }
        })?;
        Ok(HttpPeer {
            client,
            db: db.clone(),
            timeout: options.timeout,
            retries: options.retries,
            bulk_get: Arc::new(AtomicU8::new(BULK_GET_UNKNOWN)),
            encoded_attachments: Arc::new(AtomicU8::new(BULK_GET_UNKNOWN)),
            permits: Arc::new(Semaphore::new(connections)),
            session: session::shared(&db.url, db.auth.as_ref()),
            max_answer: options.max_answer,
        })
    }

    /// The database's URL, never with credentials.
    pub fn display(&self) -> String {
        self.db.url.to_string()
    }

    /// Every question is a request to the peer.
    pub fn answers_without_requests(&self) -> bool {
        false
    }

    /// A protocol error naming this peer.
    fn malformed(&self, detail: impl Into<String>) -> EndpointError {
        EndpointError::Protocol {
            url: self.display(),
            detail: detail.into(),
        }
    }

    /// Whether attachments stored gzip-encoded may go to this peer as they
    /// are (with `encoding` in the document): CouchDB and Recliner take
    /// them; other servers (PouchDB Server) get their content. A peer
    /// whose welcome cannot be read gets the content, which every peer takes.
    pub async fn takes_encoded_attachments(&self) -> bool {
        match self.encoded_attachments.load(Ordering::Relaxed) {
            BULK_GET_YES => return true,
            BULK_GET_NO => return false,
            _ => {}
        }
        // The server's welcome sits beside the database.
        let welcome: Result<Value, _> = self.call(Method::GET, "../", None).await;
        let takes = welcome.is_ok_and(|w| w.get("couchdb").is_some());
        self.encoded_attachments.store(
            if takes { BULK_GET_YES } else { BULK_GET_NO },
            Ordering::Relaxed,
        );
        takes
    }

    /// `GET /db`: the update sequence and `instance_start_time`.
    pub async fn info(&self) -> Result<DbInfo, EndpointError> {
        match self.call(Method::GET, "", None).await {
            Err(EndpointError::Http { status: 404, .. }) => {
                Err(EndpointError::NotFound(self.display()))
            }
            other => other,
        }
    }

    /// Creates the database (an existing one is fine), with `params`
    /// (`create_target_params`) as the creation's query.
    pub async fn create(&self, params: &Map<String, Value>) -> Result<(), EndpointError> {
        let path = create_query(params);
        match self.call::<IgnoredAny>(Method::PUT, &path, None).await {
            Ok(_) | Err(EndpointError::Http { status: 412, .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// A local (checkpoint) document, `None` when absent.
    pub async fn get_local(&self, id: &str) -> Result<Option<Value>, EndpointError> {
        match self.call(Method::GET, id, None).await {
            Ok(doc) => Ok(Some(doc)),
            Err(EndpointError::Http { status: 404, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A document (its winner), `None` when there is none.
    pub async fn get_doc(&self, id: &str) -> Result<Option<Value>, EndpointError> {
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

    /// Writes a local (checkpoint) document; returns its new `_rev`.
    pub async fn put_local(&self, id: &str, doc: &impl Serialize) -> Result<String, EndpointError> {
        let body =
            ejson::to_vec_of(doc).map_err(|e| self.malformed(format!("encoding {id}: {e}")))?;
        let answer: DocWritten = self.call(Method::PUT, id, Some(body.into())).await?;
        Ok(answer.rev)
    }

    /// One page of changes after `since`, every leaf of each document,
    /// filtered by the peer (which says, when it does, how many are left:
    /// it is not asked to count them).
    pub async fn changes(
        &self,
        since: &Value,
        limit: u64,
        filter: &ChangesFilter,
        _count_pending: bool,
    ) -> Result<ChangesBatch, EndpointError> {
        let since_text = match since {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let since_param: String = form_encode(&since_text);
        let mut path =
            format!("_changes?feed=normal&style=all_docs&since={since_param}&limit={limit}");
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

    /// Waits on a longpoll feed until the peer may have changes after
    /// `since`, at most `timeout`; returns early on `stop`.
    pub async fn wait_for_changes(
        &self,
        since: &Value,
        timeout: Duration,
        stop: &mut tokio::sync::watch::Receiver<bool>,
    ) -> Result<(), EndpointError> {
        let path = longpoll_path(since, timeout, self.timeout);
        // Retried like any request: a source restarting drops the
        // feed. What it lists is read by the next page of changes.
        tokio::select! {
            answer = self.call::<IgnoredAny>(Method::GET, &path, None) => answer.map(|_| ()),
            _ = stop.changed() => Ok(()),
        }
    }

    /// Whether the peer has changes after `since`, asked with a longpoll
    /// feed that waits up to `timeout` for the first change.
    pub async fn changes_after(
        &self,
        since: &Value,
        timeout: Duration,
    ) -> Result<bool, EndpointError> {
        let path = longpoll_path(since, timeout, self.timeout);
        let answer: Value = self.call(Method::GET, &path, None).await?;
        Ok(answer["results"].as_array().is_some_and(|r| !r.is_empty()))
    }

    /// `_revs_diff`: which of these revisions the database lacks.
    pub async fn revs_diff(&self, asked: RevsDiffRequest) -> Result<Vec<Missing>, EndpointError> {
        let body = ejson::to_vec_of(&asked).map_err(|e| self.malformed(e.to_string()))?;
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

    /// The missing revisions of one document with their history and
    /// attachment stubs: one `open_revs` request.
    pub async fn fetch(&self, missing: &Missing) -> Result<Vec<Value>, EndpointError> {
        let mut fetched = Fetched::new(self.display(), missing.revs.len());
        fetched.document(missing.id.clone())?;
        let list = ejson::to_string_of(&missing.revs).map_err(|e| self.malformed(e.to_string()))?;
        let path = format!(
            "{}?revs=true&latest=true&open_revs={}",
            encode_doc_id(&missing.id),
            form_encode(&list)
        );
        let answer: Vec<FetchedRev> = self.call(Method::GET, &path, None).await?;
        for rev in answer {
            fetched.take(rev);
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
        if use_bulk_get && self.bulk_get.load(Ordering::Relaxed) != BULK_GET_NO {
            let request = BulkGetRequest {
                docs: missing
                    .iter()
                    .flat_map(|m| m.revs.iter().map(|rev| BulkGetItem { id: &m.id, rev }))
                    .collect(),
            };
            let body = ejson::to_vec_of(&request).map_err(|e| self.malformed(e.to_string()))?;
            match self
                .call_limited::<BulkGetAnswer>(
                    Method::POST,
                    "_bulk_get?revs=true&latest=true",
                    Some(body.into()),
                    self.max_answer,
                )
                .await
            {
                Ok(answer) => {
                    self.bulk_get.store(BULK_GET_YES, Ordering::Relaxed);
                    let mut fetched = Fetched::new(self.display(), request.docs.len());
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
                    self.bulk_get.store(BULK_GET_NO, Ordering::Relaxed);
                }
            }
        }
        let mut docs = Vec::new();
        for m in missing {
            docs.extend(self.fetch(m).await?);
        }
        Ok(docs)
    }

    /// Writes replicated revisions (`new_edits=false`) with `_bulk_docs`;
    /// returns the documents the peer refused.
    pub async fn write(&self, docs: Vec<Value>) -> Result<Vec<WriteFailure>, EndpointError> {
        if docs.is_empty() {
            return Ok(Vec::new());
        }
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
                self.write_some(&docs[range.clone()], &encoded[range])
                    .await?,
            );
        }
        Ok(failures)
    }

    /// One `_bulk_docs` request of `docs` (`encoded` is their JSON); a 413
    /// splits the batch and retries the halves, down to a single document
    /// the target then refuses.
    fn write_some<'a>(
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
                    let mut failures = self.write_some(&docs[..half], &encoded[..half]).await?;
                    failures.extend(self.write_some(&docs[half..], &encoded[half..]).await?);
                    Ok(failures)
                }
                Err(e) => Err(e),
            }
        })
    }

    /// `_ensure_full_commit`: everything written is durable.
    pub async fn ensure_full_commit(&self) -> Result<(), EndpointError> {
        self.call::<IgnoredAny>(
            Method::POST,
            "_ensure_full_commit",
            Some(Bytes::from_static(b"{}")),
        )
        .await
        .map(|_| ())
    }
}
