//! A local database as a peer: every call goes to the store, through the
//! shared gates of the `access` crate, so a replication may read and
//! write here exactly what its user could through the HTTP API.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use revtree::RevId;
use serde::Serialize;
use serde_json::{Map, Value, json};
use store::{AttachmentInput, ChangesQuery, DocInput, GetOptions, OpenRev, OpenRevs, Store};
use wire::rows::{DbInfo, RevsDiffRequest};

use super::attachments::{Parts, Prepared, check_length, meta_of, outgoing_of};
use super::fetched::Fetched;
use super::{Change, ChangesBatch, EndpointError, Missing, WriteFailure};
use crate::spec::{ChangesFilter, ReplicationSpec};

/// A database of this server's store, used with a replication's rights.
#[derive(Debug, Clone)]
pub struct LocalPeer {
    store: Store,
    name: String,
    /// Whose rights the replication has here; `None` for a server
    /// admin's (no checks but validation functions).
    user: Option<Arc<auth::UserCtx>>,
    /// The query server: the validation functions writes here obey
    /// (as a target) and the filter functions changes pass (as a source).
    validators: Option<design_functions::Validators>,
}

impl LocalPeer {
    /// The database `name` of `store`, used as `user` (a server admin's
    /// replication runs with no checks but validation functions).
    pub fn new(
        store: &Store,
        name: &str,
        user: Option<&auth::UserCtx>,
        validators: Option<&design_functions::Validators>,
    ) -> LocalPeer {
        LocalPeer {
            store: store.clone(),
            name: name.to_string(),
            user: user
                .filter(|u| !u.is_server_admin())
                .map(|u| Arc::new(u.clone())),
            validators: validators.cloned(),
        }
    }

    /// The database's name: a local peer has no credentials to hide.
    pub fn display(&self) -> String {
        self.name.clone()
    }

    /// Every question is a call to the store, not a request.
    pub fn answers_without_requests(&self) -> bool {
        true
    }

    /// The store keeps attachments as they come, encoded or not.
    pub async fn takes_encoded_attachments(&self) -> bool {
        true
    }

    /// The local database, once the replication's user is found to be one
    /// of its members (checked on every use: a `_security` change applies
    /// to running replications at once).
    async fn local(&self) -> Result<store::Database, EndpointError> {
        Ok(self.local_gate().await?.0)
    }

    /// The local database of a source, once the replication's user is
    /// found to be allowed to read all of it as `_changes` does (in
    /// `_users` and `_replicator`, server admins only).
    async fn local_source(&self) -> Result<store::Database, EndpointError> {
        let (db, gate) = self.local_gate().await?;
        gate.check_read_all()
            .map_err(|refusal| self.refusal_error(refusal))?;
        Ok(db)
    }

    /// The local database and the shared gate that decides, for the
    /// replication's user, what may be read and written there.
    async fn local_gate(&self) -> Result<(store::Database, access::Gate), EndpointError> {
        let (store, name, user, validators) =
            (&self.store, &self.name, &self.user, &self.validators);
        let db = store.db(name).await.map_err(|e| match e {
            store::StoreError::DbNotFound(_) => EndpointError::NotFound(name.clone()),
            other => other.into(),
        })?;
        // A server admin's replication runs as an admin.
        let user = user
            .as_deref()
            .cloned()
            .unwrap_or_else(auth::UserCtx::party_admin);
        // A `_replicator` document replicated here is judged as one
        // written by a request: its replication must be the user's to run.
        let replications =
            access::replication::Replications::new(store.clone(), ReplicationSpec::local_peers);
        let gate = access::Gate::of(
            &db,
            user,
            validators.as_ref(),
            auth::password::DEFAULT_ITERATIONS,
            Some(&replications),
        )
        .await
        .map_err(|refusal| self.refusal_error(refusal))?;
        gate.check_member()
            .map_err(|refusal| self.refusal_error(refusal))?;
        // Every read goes through the handle the gate gives: where each
        // document has its readers, a user replicates only theirs.
        Ok((gate.readable(&db), gate))
    }

    /// A refusal of the shared gate, as this peer's error.
    fn refusal_error(&self, refusal: access::Refusal) -> EndpointError {
        // The gate's one table; a function that failed to run is this
        // peer's 500, as any other failure of a design function.
        let (status, error, reason) = match refusal.answer() {
            access::Answer::Refused {
                status,
                error,
                reason,
            } => (status, error, reason),
            access::Answer::Store(e) => return e.into(),
            access::Answer::Script(e) => (500, "os_process_error", e.to_string()),
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
    async fn refusal(
        &self,
        db: &store::Database,
        gate: &access::Gate,
        input: &mut DocInput,
    ) -> Result<Option<WriteFailure>, EndpointError> {
        let verdict = match gate.check_doc(db, input, false).await {
            Ok(Ok(())) => return Ok(None),
            Ok(Err(failure)) => failure,
            Err(refusal) => match refusal.answer() {
                access::Answer::Store(e) => return Err(e.into()),
                access::Answer::Script(e) => {
                    return Ok(Some(WriteFailure {
                        id: input.id.clone().unwrap_or_default(),
                        error: "os_process_error".into(),
                        reason: e.to_string(),
                    }));
                }
                // A replicated document refused, whatever the status a
                // request would get: a write failure, as CouchDB's
                // replicator counts them.
                access::Answer::Refused { reason, .. } => store::DocFailure {
                    error: store::ErrorKind::Forbidden,
                    reason,
                },
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
    ) -> Result<design_functions::DocFilter, EndpointError> {
        let (validators, user) = (&self.validators, &self.user);
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
        Ok(design_functions::DocFilter {
            engine: validators.engine().clone(),
            ddoc: design_functions::DesignDoc {
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
    fn script_error(&self, e: design_functions::JsError) -> EndpointError {
        let (status, error, reason) = match e {
            design_functions::JsError::Runtime { error, reason } => {
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

    /// `GET /db`: the update sequence and `instance_start_time`.
    pub async fn info(&self) -> Result<DbInfo, EndpointError> {
        let db = self.local().await?;
        Ok(DbInfo {
            db_name: self.name.clone(),
            update_seq: Value::from(db.seq_string(db.update_seq())),
            instance_start_time: db.instance_start_time().to_string(),
            ..DbInfo::default()
        })
    }

    /// Creates the database (an existing one is fine); only a server
    /// admin's replication may.
    pub async fn create(&self, _params: &Map<String, Value>) -> Result<(), EndpointError> {
        // Our store has no shards or replicas to size: `q` and `n` mean
        // nothing here, and partitioned databases are not supported.
        if let Some(user) = &self.user {
            return Err(self.refusal_error(access::denied(user, access::NOT_SERVER_ADMIN)));
        }
        match self.store.create_db(&self.name).await {
            Ok(_) | Err(store::StoreError::DbExists(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// A local (checkpoint) document, `None` when absent.
    pub async fn get_local(&self, id: &str) -> Result<Option<Value>, EndpointError> {
        match self.local().await?.get_local(id).await {
            Ok(doc) => Ok(Some(doc)),
            Err(store::StoreError::DocNotFound(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// A document (its winner), `None` when there is none.
    pub async fn get_doc(&self, id: &str) -> Result<Option<Value>, EndpointError> {
        match self
            .local_source()
            .await?
            .get(id, store::GetOptions::default())
            .await
        {
            Ok(doc) => Ok(Some(doc.to_value()?)),
            Err(store::StoreError::DocNotFound(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes a local (checkpoint) document; returns its new `_rev`.
    /// Where each document has its readers, the checkpoint is judged by
    /// the write gate as any write and names the replication's user.
    pub async fn put_local(&self, id: &str, doc: &impl Serialize) -> Result<String, EndpointError> {
        let mut doc =
            serde_json::to_value(doc).map_err(|e| self.malformed(format!("encoding {id}: {e}")))?;
        let (db, gate) = self.local_gate().await?;
        if db.has_doc_access() {
            let mut checked = doc.clone();
            checked["_id"] = Value::String(id.to_string());
            let mut input = DocInput::from_json(checked)?;
            match gate.check_doc(&db, &mut input, true).await {
                Ok(Ok(())) => {}
                Ok(Err(failure)) => {
                    return Err(EndpointError::Http {
                        url: self.display(),
                        status: 403,
                        error: failure.error.as_str().into(),
                        reason: failure.reason,
                    });
                }
                Err(refusal) => return Err(self.refusal_error(refusal)),
            }
            if let (Some(access), Value::Object(map)) =
                (input.body.get(store::doc_access::ACCESS_FIELD), &mut doc)
            {
                map.insert(store::doc_access::ACCESS_FIELD.into(), access.clone());
            }
        }
        Ok(db.put_local(id, doc).await?)
    }

    /// One page of changes after `since`, every leaf of each document,
    /// passed through the replication's filter here.
    pub async fn changes(
        &self,
        since: &Value,
        limit: u64,
        filter: &ChangesFilter,
        count_pending: bool,
    ) -> Result<ChangesBatch, EndpointError> {
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
        let design_only = matches!(filter, ChangesFilter::Named { name, .. } if name == "_design");
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
                    .is_none_or(|s| design_functions::selector_passes(s, row))
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

    /// Waits on the database's update channel until it may have changes
    /// after `since`, at most `timeout`; returns early on `stop`.
    pub async fn wait_for_changes(
        &self,
        since: &Value,
        timeout: Duration,
        stop: &mut tokio::sync::watch::Receiver<bool>,
    ) -> Result<(), EndpointError> {
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

    /// Whether the database has changes after `since`: answered at once,
    /// with no wait.
    pub async fn changes_after(
        &self,
        since: &Value,
        _wait: Duration,
    ) -> Result<bool, EndpointError> {
        let db = self.local_source().await?;
        Ok(db.update_seq() > local_seq(&db, since).unwrap_or(0))
    }

    /// `_revs_diff`: which of these revisions the database lacks.
    pub async fn revs_diff(&self, asked: RevsDiffRequest) -> Result<Vec<Missing>, EndpointError> {
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

    /// The missing revisions of one document with their history and
    /// attachment stubs.
    pub async fn fetch(&self, missing: &Missing) -> Result<Vec<Value>, EndpointError> {
        let mut fetched = Fetched::new(self.display(), missing.revs.len());
        fetched.document(missing.id.clone())?;
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
                OpenRev::Missing(rev) => fetched.take(wire::rows::FetchedRev::Missing(rev)),
            }
        }
        fetched.finish()
    }

    /// The missing revisions of many documents, in one read (whether or
    /// not the replication uses `_bulk_get`, a peer's request).
    pub async fn fetch_many(
        &self,
        missing: &[Missing],
        _use_bulk_get: bool,
    ) -> Result<Vec<Value>, EndpointError> {
        let db = self.local_source().await?;
        let requests: Vec<store::RevisionsRequest> = missing
            .iter()
            .flat_map(|m| {
                m.revs.iter().map(move |rev| store::RevisionsRequest {
                    id: m.id.clone(),
                    rev: Some(rev.clone()),
                    atts_since: Vec::new(),
                })
            })
            .collect();
        let mut fetched = Fetched::new(self.display(), requests.len());
        for result in db.bulk_get(requests, true, true, false).await? {
            fetched.document(result.id)?;
            for doc in result.docs {
                match doc {
                    Ok(doc) => fetched.docs.push(doc.to_value()?),
                    Err(e) => fetched.take(wire::rows::FetchedRev::Error(e)),
                }
            }
        }
        fetched.finish()
    }

    /// Writes replicated revisions (`new_edits=false`) through the gate;
    /// returns the documents refused.
    pub async fn write(&self, docs: Vec<Value>) -> Result<Vec<WriteFailure>, EndpointError> {
        if docs.is_empty() {
            return Ok(Vec::new());
        }
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

    /// Everything written is durable.
    pub async fn ensure_full_commit(&self) -> Result<(), EndpointError> {
        Ok(self.local().await?.ensure_full_commit().await?)
    }

    /// Reads a revision and readies its attachments `names` to be streamed
    /// from the store, with their stored (maybe encoded) bytes (the names
    /// already say what the target's ancestors hold).
    pub(crate) async fn read_with_attachments(
        &self,
        doc: Value,
        names: &[String],
        _possible_ancestors: &[RevId],
    ) -> Result<Prepared, EndpointError> {
        let shown = self.display();
        let (id, rev) = {
            let meta = meta_of(&doc, &shown)?;
            (meta.id.to_string(), meta.rev)
        };
        let db = self.local_source().await?;
        let mut doc = doc;
        let mut readers = VecDeque::new();
        if let Some(Value::Object(atts)) = doc.get_mut("_attachments") {
            // In the document's order: the order the parts are sent in.
            for (name, att) in atts.iter_mut() {
                let Value::Object(att) = att else { continue };
                if !names.contains(name) {
                    continue;
                }
                let (meta, reader) = db.attachment(&id, name, Some(rev.clone())).await?;
                att.remove("stub");
                att.remove("data");
                att.insert("follows".into(), Value::Bool(true));
                // The reader gives the stored bytes: say how they are
                // encoded, as CouchDB's `att_encoding_info` does.
                if let (Some(encoding), Some(encoded_length)) =
                    (&meta.encoding, meta.encoded_length)
                {
                    att.insert("encoding".into(), Value::from(encoding.as_str()));
                    att.insert("encoded_length".into(), Value::from(encoded_length));
                    att.insert("length".into(), Value::from(meta.length));
                }
                readers.push_back(reader);
            }
        }
        let outgoing = outgoing_of(&doc, &shown)?;
        Ok(Prepared {
            id,
            doc,
            outgoing,
            parts: Parts::Store {
                readers,
                current: None,
            },
        })
    }

    /// Writes a prepared revision (`new_edits=false`) through the gate,
    /// its attachments streamed into the store's chunked upload.
    pub(crate) async fn write_with_attachments(
        &self,
        prepared: Prepared,
    ) -> Result<Option<WriteFailure>, EndpointError> {
        let Prepared {
            doc,
            outgoing,
            mut parts,
            ..
        } = prepared;
        let (db, gate) = self.local_gate().await?;
        let mut input = DocInput::from_json(doc)?;
        if let Some(refusal) = self.refusal(&db, &gate, &mut input).await? {
            return Ok(Some(refusal));
        }
        for out in &outgoing {
            // Content sent as it is, of a type CouchDB compresses, is
            // gzipped on the way in, as a CouchDB target would store it.
            let sent_plain = input.attachments.iter().any(|(n, att)| {
                n == &out.name && matches!(att, AttachmentInput::Follows { encoding: None, .. })
            });
            let mut upload = if sent_plain {
                db.begin_attachment_of(&out.name, &out.content_type)
            } else {
                db.begin_attachment(&out.name)
            };
            while let Some(chunk) = parts.next_chunk().await? {
                upload.write(&chunk).await?;
            }
            let staged = upload.finish().await?;
            check_length(&self.name, out, staged.length)?;
            if let Some((_, att)) = input.attachments.iter_mut().find(|(n, _)| n == &out.name) {
                *att = att.clone().staged(staged);
            }
        }
        let results = db.bulk_docs(vec![input], false).await?;
        Ok(results.into_iter().find_map(|row| {
            row.result.err().map(|f| WriteFailure {
                id: row.id,
                error: f.error.into(),
                reason: f.reason,
            })
        }))
    }
}

/// A sequence of a local database, as its own feed gave it (`N-token`),
/// as a checkpoint from before sequences were strings holds it (a
/// number), or as a user wrote it (`since_seq`).
fn local_seq(db: &store::Database, seq: &Value) -> Result<u64, store::MalformedSeq> {
    match seq {
        Value::Number(n) => n.as_u64().ok_or(store::MalformedSeq),
        Value::String(s) => db.parse_seq(s),
        Value::Null => Ok(0),
        _ => Err(store::MalformedSeq),
    }
}
