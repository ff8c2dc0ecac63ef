//! Where a backup is read from or written to: a database URL (any
//! CouchDB-compatible server) or a database of the local data folder.

use serde_json::{Value, json};

/// Documents asked for at once.
pub(crate) const BATCH: usize = 500;

pub(crate) enum Peer {
    Local {
        store: store::Store,
        db: store::Database,
        /// Held while the database is open: no server writes it meanwhile
        /// (SQLite only).
        _lock: Option<store::DataDirLock>,
    },
    Remote {
        http: reqwest::Client,
        /// The database URL without credentials, ending in `/`.
        url: reqwest::Url,
        auth: Option<(String, String)>,
    },
}

/// One page of the changes feed: the documents' ids and where it ended.
pub(crate) struct Changes {
    pub ids: Vec<String>,
    pub last_seq: String,
}

fn redact(url: &reqwest::Url) -> String {
    let mut shown = url.clone();
    if shown.password().is_some() {
        let _ = shown.set_password(Some("*****"));
    }
    shown.to_string()
}

impl Peer {
    /// Opens `spec`: a URL, or a database name in the configured store (on
    /// SQLite, refused while a server uses the data folder). `create` makes
    /// a missing database.
    pub(crate) async fn open(
        spec: &str,
        config: &crate::config::Config,
        create: bool,
    ) -> Result<Peer, String> {
        if spec.starts_with("http://") || spec.starts_with("https://") {
            return Peer::remote(spec, create).await;
        }
        // PostgreSQL takes writes from many processes: no folder to lock.
        let lock = if config.store.is_empty() {
            Some(store::DataDirLock::acquire(&config.data_dir).map_err(|e| {
                format!(
                    "{e}: give the database's URL (http://host:5984/{spec}) instead of its name"
                )
            })?)
        } else {
            None
        };
        let store = config.open_store().map_err(|e| e.to_string())?;
        let db = match store.db(spec).await {
            Ok(db) => db,
            Err(store::StoreError::DbNotFound(_)) if create => {
                store.create_db(spec).await.map_err(|e| e.to_string())?
            }
            Err(e) => return Err(format!("database {spec:?}: {e}")),
        };
        Ok(Peer::Local {
            store,
            db,
            _lock: lock,
        })
    }

    async fn remote(spec: &str, create: bool) -> Result<Peer, String> {
        let mut url = reqwest::Url::parse(spec).map_err(|e| format!("{spec:?}: {e}"))?;
        let auth = (!url.username().is_empty()).then(|| {
            let decode = |s: &str| {
                percent_encoding::percent_decode_str(s)
                    .decode_utf8_lossy()
                    .into_owned()
            };
            (decode(url.username()), decode(url.password().unwrap_or("")))
        });
        let shown = redact(&url);
        let _ = url.set_username("");
        let _ = url.set_password(None);
        if !url.path().ends_with('/') {
            url.set_path(&format!("{}/", url.path()));
        }
        let http = replicator::http_client_builder()
            .build()
            .map_err(|e| e.to_string())?;
        let peer = Peer::Remote { http, url, auth };
        let exists = peer.call(reqwest::Method::GET, "", None).await;
        match exists {
            Ok(_) => Ok(peer),
            Err((404, _)) if create => match peer.call(reqwest::Method::PUT, "", None).await {
                Ok(_) | Err((412, _)) => Ok(peer),
                Err((_, e)) => Err(format!("cannot create {shown}: {e}")),
            },
            Err((_, e)) => Err(format!("{shown}: {e}")),
        }
    }

    /// The database's name or URL, without a password.
    pub(crate) fn display(&self) -> String {
        match self {
            Peer::Local { db, .. } => db.name().to_string(),
            Peer::Remote { url, .. } => redact(url),
        }
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, (u16, String)> {
        let Peer::Remote { http, url, auth } = self else {
            return Err((0, "not a remote database".into()));
        };
        let target = url.join(path).map_err(|e| (0, e.to_string()))?;
        let mut request = http
            .request(method, target)
            .header("accept", "application/json");
        if let Some((name, password)) = auth {
            request = request.basic_auth(name, Some(password));
        }
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(ejson::to_vec(&body));
        }
        let response = request.send().await.map_err(|e| (0, e.to_string()))?;
        let status = response.status().as_u16();
        let text = response.text().await.map_err(|e| (status, e.to_string()))?;
        if !(200..300).contains(&status) {
            return Err((status, format!("{status} {text}")));
        }
        ejson::from_str(&text).map_err(|e| (status, format!("not JSON: {e}")))
    }

    /// Documents in the database (live and deleted), for progress.
    pub(crate) async fn doc_total(&self) -> Result<u64, String> {
        match self {
            Peer::Local { db, .. } => {
                let info = db.info().await.map_err(|e| e.to_string())?;
                Ok(info.doc_count + info.doc_del_count)
            }
            Peer::Remote { .. } => {
                let info = self
                    .call(reqwest::Method::GET, "", None)
                    .await
                    .map_err(|(_, e)| e)?;
                let count = |k: &str| info[k].as_u64().unwrap_or(0);
                Ok(count("doc_count") + count("doc_del_count"))
            }
        }
    }

    /// The next page of changes after `since` (`None`: from the start).
    pub(crate) async fn changes(&self, since: Option<&str>) -> Result<Changes, String> {
        match self {
            Peer::Local { db, .. } => {
                let since = match since {
                    Some(text) => db.parse_seq(text).map_err(|e| e.to_string())?,
                    None => 0,
                };
                let page = db
                    .changes(store::ChangesQuery {
                        since,
                        limit: BATCH,
                        count_pending: false,
                        ..Default::default()
                    })
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(Changes {
                    ids: page.rows.into_iter().map(|r| r.id).collect(),
                    last_seq: db.seq_string(page.last_seq),
                })
            }
            Peer::Remote { .. } => {
                let mut path = format!("_changes?limit={BATCH}");
                if let Some(since) = since {
                    path.push_str("&since=");
                    path.push_str(
                        &percent_encoding::utf8_percent_encode(
                            since,
                            percent_encoding::NON_ALPHANUMERIC,
                        )
                        .to_string(),
                    );
                }
                let page = self
                    .call(reqwest::Method::GET, &path, None)
                    .await
                    .map_err(|(_, e)| e)?;
                let ids = page["results"]
                    .as_array()
                    .ok_or("the changes feed has no results")?
                    .iter()
                    .filter_map(|row| row["id"].as_str().map(str::to_string))
                    .collect();
                let last_seq = match &page["last_seq"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                Ok(Changes { ids, last_seq })
            }
        }
    }

    /// Every leaf revision of these documents (conflicts and deleted ones
    /// too), with `_revisions` and attachments inline.
    pub(crate) async fn leaves(&self, ids: Vec<String>) -> Result<Vec<Value>, String> {
        match self {
            Peer::Local { db, .. } => {
                let requests = ids
                    .into_iter()
                    .map(|id| store::RevisionsRequest {
                        id,
                        rev: None,
                        atts_since: Vec::new(),
                    })
                    .collect();
                let mut docs = Vec::new();
                for result in db
                    .bulk_get(requests, true, false, true)
                    .await
                    .map_err(|e| e.to_string())?
                {
                    for doc in result.docs.into_iter().flatten() {
                        docs.push(doc.to_value().map_err(|e| e.to_string())?);
                    }
                }
                Ok(docs)
            }
            Peer::Remote { .. } => {
                let body =
                    json!({"docs": ids.iter().map(|id| json!({"id": id})).collect::<Vec<_>>()});
                let answer = self
                    .call(
                        reqwest::Method::POST,
                        "_bulk_get?revs=true&attachments=true",
                        Some(body),
                    )
                    .await
                    .map_err(|(_, e)| e)?;
                let mut docs = Vec::new();
                for result in answer["results"]
                    .as_array()
                    .ok_or("_bulk_get has no results")?
                {
                    for doc in result["docs"].as_array().into_iter().flatten() {
                        if let Some(ok) = doc.get("ok") {
                            docs.push(ok.clone());
                        }
                    }
                }
                Ok(docs)
            }
        }
    }

    /// Writes documents as they are (`new_edits: false` when they carry
    /// revisions); returns how many were refused, with the first reason.
    pub(crate) async fn write(&self, docs: Vec<Value>) -> Result<(usize, Option<String>), String> {
        let new_edits = !docs.iter().any(|d| d.get("_rev").is_some());
        match self {
            Peer::Local { db, .. } => {
                // A load writes as a server admin, through the same gate
                // as every write: passwords loaded into `_users` are
                // hashed, and `_replicator` documents keep their owners.
                // No query server runs in this command: validation
                // functions do not judge what it loads.
                let gate = access::Gate::of(
                    db,
                    auth::UserCtx::party_admin(),
                    None,
                    auth::password::DEFAULT_ITERATIONS,
                    None,
                )
                .await
                .map_err(|e| format!("{e:?}"))?;
                let mut inputs = Vec::with_capacity(docs.len());
                let mut refused = Vec::new();
                for doc in docs {
                    let mut input = store::DocInput::from_json(doc).map_err(|e| e.to_string())?;
                    match gate.check_doc(db, &mut input, new_edits).await {
                        Ok(Ok(())) => inputs.push(input),
                        Ok(Err(failure)) => {
                            refused.push(format!("{}: {:?}", input.id.unwrap_or_default(), failure))
                        }
                        Err(e) => return Err(format!("{e:?}")),
                    }
                }
                let results = db
                    .bulk_docs(inputs, new_edits)
                    .await
                    .map_err(|e| e.to_string())?;
                refused.extend(
                    results
                        .into_iter()
                        .filter_map(|r| r.result.err().map(|e| format!("{}: {e:?}", r.id))),
                );
                Ok((refused.len(), refused.into_iter().next()))
            }
            Peer::Remote { .. } => {
                let answer = self
                    .call(
                        reqwest::Method::POST,
                        "_bulk_docs",
                        Some(json!({"docs": docs, "new_edits": new_edits})),
                    )
                    .await
                    .map_err(|(_, e)| e)?;
                let refused: Vec<String> = answer
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|row| row.get("error").is_some())
                    .map(|row| format!("{}: {} {}", row["id"], row["error"], row["reason"]))
                    .collect();
                Ok((refused.len(), refused.into_iter().next()))
            }
        }
    }

    /// Makes the writes durable before the command reports success.
    pub(crate) async fn close(self) {
        if let Peer::Local { store, .. } = &self {
            store.close_all().await;
        }
    }
}
