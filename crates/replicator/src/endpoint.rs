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
    },
}

impl Endpoint {
    /// An endpoint for a peer; `timeout` bounds every remote request.
    pub fn new(peer: &Peer, store: &Store, timeout: Duration) -> Result<Endpoint, EndpointError> {
        match peer {
            Peer::Local(name) => Ok(Endpoint::Local {
                store: store.clone(),
                name: name.clone(),
            }),
            Peer::Remote(db) => {
                let client = crate::http_client_builder()
                    .timeout(timeout)
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
                })
            }
        }
    }

    /// The endpoint as it may be shown: never with credentials.
    pub fn display(&self) -> String {
        match self {
            Endpoint::Local { name, .. } => name.clone(),
            Endpoint::Remote { db, .. } => db.url.to_string(),
        }
    }

    async fn local(&self) -> Result<store::Database, EndpointError> {
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

    /// One HTTP request to a remote peer, JSON in and out.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(StatusCode, Value), EndpointError> {
        let Endpoint::Remote { client, db } = self else {
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
        let mut request = client
            .request(method, url)
            .header("accept", "application/json");
        for (k, v) in &db.headers {
            request = request.header(k, v);
        }
        if let Some(auth) = &db.auth {
            request = request.basic_auth(&auth.username, Some(&auth.password));
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        let response = request.send().await.map_err(|e| EndpointError::Transport {
            url: shown.clone(),
            detail: e.without_url().to_string(),
        })?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| EndpointError::Transport {
                url: shown.clone(),
                detail: e.without_url().to_string(),
            })?;
        let value: Value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).map_err(|e| EndpointError::Protocol {
                url: shown.clone(),
                detail: format!("invalid JSON: {e}"),
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
                        count_pending: false,
                        ..Default::default()
                    })
                    .await?;
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
                Ok(ChangesBatch { changes, last_seq })
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

    /// The missing revisions of one document with their history, and
    /// attachment bytes inline except those the target already has
    /// (`atts_since` = its possible ancestors).
    pub async fn fetch(&self, missing: &Missing) -> Result<Vec<Value>, EndpointError> {
        let revs: Vec<revtree::RevId> = missing
            .revs
            .iter()
            .filter_map(|r| revtree::RevId::parse(r).ok())
            .collect();
        let since: Vec<revtree::RevId> = missing
            .possible_ancestors
            .iter()
            .filter_map(|r| revtree::RevId::parse(r).ok())
            .collect();
        match self {
            Endpoint::Local { .. } => {
                let db = self.local().await?;
                let opts = GetOptions {
                    revs: true,
                    latest: true,
                    attachments: true,
                    atts_since: since,
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
                let mut path = format!(
                    "{}?revs=true&latest=true&attachments=true&open_revs={}",
                    encode_doc_id(&missing.id),
                    form_encode(&list)
                );
                if !missing.possible_ancestors.is_empty() {
                    let since =
                        serde_json::to_string(&missing.possible_ancestors).unwrap_or_default();
                    path.push_str(&format!("&atts_since={}", form_encode(&since)));
                }
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
                let body = json!({"docs": docs, "new_edits": false});
                let (_, answer) = self.call(Method::POST, "_bulk_docs", Some(&body)).await?;
                let rows = answer.as_array().cloned().unwrap_or_default();
                Ok(rows
                    .iter()
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
                    .collect())
            }
        }
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

fn form_encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// A document id as a URL path: `_design/x` keeps its slash, as CouchDB expects.
fn encode_doc_id(id: &str) -> String {
    match id.strip_prefix("_design/") {
        Some(rest) => format!("_design/{}", form_encode(rest)),
        None => form_encode(id),
    }
}
