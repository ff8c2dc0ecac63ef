//! `GET|POST /{db}/_design/{ddoc}/_view/{view}`: map/reduce views, with
//! CouchDB's query parameters (the index is `design_functions::views`).

use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use design_functions::views::{
    Reduced, ViewError, ViewGroup, ViewHead, ViewPage, ViewQuery, ViewReader,
};
use serde_json::{Map, Value, json};
use store::{Database, GetOptions, IndexEntry};

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::params::{Query, query_parse_error};
use crate::base::response::json_response;
use crate::base::streamed::{BodyWriter, Stop};

/// # GET|POST /{db}/_design/{ddoc}/_view/{view}
pub(crate) async fn view(
    state: AppState,
    database: Database,
    ddoc: String,
    name: String,
    query: Query,
    request: Request,
) -> Result<Response, ApiError> {
    view_in(state, database, ddoc, name, query, request, None).await
}

/// A view of the whole database, or of one partition
/// (`/{db}/_partition/{p}/_design/{ddoc}/_view/{view}`).
pub(crate) async fn view_in(
    state: AppState,
    database: Database,
    ddoc: String,
    name: String,
    query: Query,
    request: Request,
    partition: Option<String>,
) -> Result<Response, ApiError> {
    let method = request.method().clone();
    if method != Method::GET && method != Method::HEAD && method != Method::POST {
        return Err(ApiError::MethodNotAllowed("GET,HEAD,POST"));
    }
    let body = if method == Method::POST {
        crate::base::json_body::read_json_object(request.into_body(), &state.config).await?
    } else {
        Map::new()
    };
    let doc = crate::design::load(&database, &ddoc).await?;
    let group = ViewGroup::of(&database, &doc).map_err(view_error)?;
    if !group.has_view(&name) {
        return Err(ApiError::not_found("missing_named_view"));
    }
    let index = open_index(&state, &database, &group, &query).await?;
    let asked = Asked {
        query: &query,
        body: &body,
        partition: partition.as_deref(),
    };
    let opened = open_query(&state, &database, &group, &index, &name, asked).await?;
    let (mut writer, body) = BodyWriter::channel();
    tokio::spawn(async move {
        let written = async {
            write_query(&mut writer, &database, opened).await?;
            writer.write(b"\n").await?;
            Ok(())
        }
        .await;
        writer.close(written).await;
    });
    Ok(streamed_json(body))
}

/// # POST /{db}/_design/{ddoc}/_view/{view}/queries
/// Several queries of one view, answered together (`{"results": [...]}`).
pub(crate) async fn queries(
    state: AppState,
    database: Database,
    ddoc: String,
    name: String,
    query: Query,
    request: Request,
) -> Result<Response, ApiError> {
    if request.method() != Method::POST {
        return Err(ApiError::MethodNotAllowed("POST"));
    }
    let body = crate::base::json_body::read_json_object(request.into_body(), &state.config).await?;
    let Some(Value::Array(queries)) = body.get("queries") else {
        return Err(query_parse_error(
            "`queries` member must be an array.".into(),
        ));
    };
    state.config.limits.check_items(queries.len(), "queries")?;
    let mut each = Vec::with_capacity(queries.len());
    for one in queries {
        let Value::Object(params) = one else {
            return Err(query_parse_error("each query must be an object".into()));
        };
        each.push(params.clone());
    }
    let doc = crate::design::load(&database, &ddoc).await?;
    let group = ViewGroup::of(&database, &doc).map_err(view_error)?;
    if !group.has_view(&name) {
        return Err(ApiError::not_found("missing_named_view"));
    }
    let index = open_index(&state, &database, &group, &query).await?;
    // Every query is opened (its parameters checked, its first rows read)
    // before the answer starts, so a bad one is a clean error.
    let mut opened = Vec::with_capacity(each.len());
    for params in &each {
        opened.push(
            open_query(
                &state,
                &database,
                &group,
                &index,
                &name,
                Asked {
                    query: &Query::default(),
                    body: params,
                    partition: None,
                },
            )
            .await?,
        );
    }
    let (mut writer, body) = BodyWriter::channel();
    tokio::spawn(async move {
        let written = async {
            writer.write(b"{\"results\":[").await?;
            for (i, one) in opened.into_iter().enumerate() {
                if i > 0 {
                    writer.write(b",\n").await?;
                }
                write_query(&mut writer, &database, one).await?;
            }
            writer.write(b"]}\n").await?;
            Ok::<(), Stop>(())
        }
        .await;
        writer.close(written).await;
    });
    Ok(streamed_json(body))
}

/// # GET /{db}/_design/{ddoc}/_info
pub(crate) async fn info(
    state: AppState,
    database: Database,
    ddoc: String,
    request: Request,
) -> Result<Response, ApiError> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return Err(ApiError::MethodNotAllowed("GET"));
    }
    let (doc, group, index) = index_as_is(&state, &database, &ddoc).await?;
    let indexed = index.update_seq().await?;
    let pending = database.update_seq().saturating_sub(indexed);
    let sizes = index.sizes();
    let out = json!({
        "name": ddoc,
        "view_index": {
            "signature": group.signature(),
            "language": doc.get("language").cloned().unwrap_or(json!("javascript")),
            "sizes": {"file": sizes.file, "external": sizes.external, "active": sizes.active},
            // CouchDB shows the index's own sequence as a number.
            "update_seq": indexed,
            "purge_seq": 0,
            "updater_running": false,
            "compact_running": index.compacting(),
            "waiting_clients": 0,
            "waiting_commit": false,
            "updates_pending": {"minimum": pending, "preferred": pending, "total": pending},
            "collator_versions": [collation::COLLATOR_VERSION],
        }
    });
    Ok(json_response(StatusCode::OK, &out))
}

/// # POST /{db}/_view_cleanup
/// Deletes the index files of views no design document has any more.
pub(crate) async fn cleanup(state: AppState, database: Database) -> Result<Response, ApiError> {
    let page = database
        .all_docs(store::AllDocsQuery {
            start: std::ops::Bound::Included("_design/".into()),
            end: std::ops::Bound::Excluded("_design0".into()),
            include_docs: true,
            ..Default::default()
        })
        .await?;
    let mut keep = Vec::new();
    for row in page.rows {
        let Some(doc) = row.doc else { continue };
        if let Ok(group) = ViewGroup::of(&database, &doc.to_value()?) {
            keep.push(group.signature().to_string());
        }
    }
    state
        .views
        .cleanup(&database, &keep)
        .await
        .map_err(view_error)?;
    Ok(json_response(StatusCode::ACCEPTED, &json!({"ok": true})))
}

/// # POST /{db}/_compact/{ddoc}
/// Compacts the index of a design document's views.
pub(crate) async fn compact(
    state: AppState,
    database: Database,
    ddoc: String,
) -> Result<Response, ApiError> {
    let (_, _, index) = index_as_is(&state, &database, &ddoc).await?;
    tokio::spawn(async move {
        if let Err(e) = index.compact().await {
            tracing::warn!(error = %e, "compacting a view index failed");
        }
    });
    Ok(json_response(StatusCode::ACCEPTED, &json!({"ok": true})))
}

/// A design document, its views and their index as it is (not updated).
async fn index_as_is(
    state: &AppState,
    database: &Database,
    ddoc: &str,
) -> Result<(Value, ViewGroup, store::Index), ApiError> {
    let doc = crate::design::load(database, ddoc).await?;
    let group = ViewGroup::of(database, &doc).map_err(view_error)?;
    let index = state
        .views
        .index(state.validators.engine(), database, &group, false)
        .await
        .map_err(view_error)?;
    Ok((doc, group, index))
}

/// The group's index, up to date as the query's `update` (or `stale`) asks.
pub(crate) async fn open_index(
    state: &AppState,
    database: &Database,
    group: &ViewGroup,
    query: &Query,
) -> Result<store::Index, ApiError> {
    let (update, after) = match (query.get("update"), query.get("stale")) {
        (Some("false"), _) | (_, Some("ok")) => (false, false),
        (Some("lazy"), _) | (_, Some("update_after")) => (false, true),
        (None | Some("true"), None) => (true, false),
        (Some(_), _) => {
            return Err(query_parse_error("Invalid value for `update`.".into()));
        }
        (None, Some(_)) => {
            return Err(query_parse_error("Invalid value for `stale`.".into()));
        }
    };
    let engine = state.validators.engine().clone();
    let index = state
        .views
        .index(&engine, database, group, update)
        .await
        .map_err(view_error)?;
    if after {
        // `update=lazy`: answer from the index as it is, then catch up.
        let (views, database, group) = (state.views.clone(), database.clone(), group.clone());
        tokio::spawn(async move {
            if let Err(e) = views.index(&engine, &database, &group, true).await {
                tracing::warn!(error = ?e, "a lazy view update failed");
            }
        });
    }
    Ok(index)
}

/// A view query ready to answer: its reader, with the first rows read
/// (so errors come before the answer starts) and how rows are written.
pub(crate) struct OpenedQuery {
    reader: ViewReader,
    first: Option<ViewPage>,
    include_docs: bool,
    /// How each row's document is read with `include_docs`.
    doc_options: GetOptions,
    update_seq: Option<String>,
}

/// What a view query asks: its parameters (the query string over the
/// body) and the partition it reads, if any.
pub(crate) struct Asked<'a> {
    pub query: &'a Query,
    pub body: &'a Map<String, Value>,
    pub partition: Option<&'a str>,
}

/// Opens one view query.
pub(crate) async fn open_query(
    state: &AppState,
    database: &Database,
    group: &ViewGroup,
    index: &store::Index,
    name: &str,
    asked: Asked<'_>,
) -> Result<OpenedQuery, ApiError> {
    let params = Params {
        query: asked.query,
        body: asked.body,
    };
    let mut q = params.view_query()?;
    q.partition = asked.partition.map(str::to_string);
    let rows = state.config.limits.query_rows(
        q.limit.map(|n| n as u64),
        q.partition.is_some() && group.is_partitioned(),
    )?;
    q.limit = rows.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    let include_docs = q.include_docs;
    let doc_options = GetOptions {
        conflicts: params.flag("conflicts")?.unwrap_or(false),
        attachments: params.flag("attachments")?.unwrap_or(false),
        att_encoding_info: params.flag("att_encoding_info")?.unwrap_or(false),
        ..Default::default()
    };
    let update_seq = match params.flag("update_seq")?.unwrap_or(false) {
        true => Some(database.seq_string(index.update_seq().await?)),
        false => None,
    };
    let mut reader = group
        .read(state.validators.engine(), index, name, &q)
        .await
        .map_err(view_error)?;
    let first = reader.next_page().await.map_err(view_error)?;
    Ok(OpenedQuery {
        reader,
        first,
        include_docs,
        doc_options,
        update_seq,
    })
}

impl OpenedQuery {
    /// What comes before the rows (`total_rows`, `offset`, `update_seq`).
    pub(crate) fn head(&self) -> Map<String, Value> {
        let mut head = Map::new();
        if let ViewHead::Map { total_rows, offset } = self.reader.head() {
            head.insert("total_rows".into(), json!(total_rows));
            head.insert("offset".into(), json!(offset));
        }
        if let Some(seq) = &self.update_seq {
            head.insert("update_seq".into(), json!(seq));
        }
        head
    }

    /// The next rows as written out, or `None` after the last.
    pub(crate) async fn next_rows(
        &mut self,
        database: &Database,
    ) -> Result<Option<Vec<Value>>, ApiError> {
        let page = match self.first.take() {
            Some(page) => page,
            None => match self.reader.next_page().await.map_err(view_error)? {
                Some(page) => page,
                None => return Ok(None),
            },
        };
        let rows = match page {
            ViewPage::Reduced(rows) => rows
                .into_iter()
                .map(|(key, reduced)| match reduced {
                    Reduced::Value(value) => json!({"key": key, "value": value}),
                    // CouchDB's row for a reduce that failed there: no
                    // value, and no key either.
                    Reduced::Error { error, reason } => {
                        json!({"key": null, "error": error, "reason": reason})
                    }
                })
                .collect(),
            ViewPage::Map(rows) => {
                let mut out = Vec::with_capacity(rows.len());
                for row in rows {
                    out.push(self.map_row(database, row).await?);
                }
                out
            }
        };
        Ok(Some(rows))
    }

    async fn map_row(&self, database: &Database, row: IndexEntry) -> Result<Value, ApiError> {
        let key: Value = ejson::from_stored(&row.key).unwrap_or(Value::Null);
        let value: Value = ejson::from_stored(&row.value).unwrap_or(Value::Null);
        if !self.include_docs {
            return Ok(json!({"id": row.id, "key": key, "value": value}));
        }
        // A value `{"_id": ...}` links another document, and `{"_rev": ...}`
        // names a revision (of the linked document, or the row's own), as
        // in CouchDB; `{"_id": null}` links nothing.
        let (target, rev) = match value.as_object() {
            Some(fields) if fields.get("_id") == Some(&Value::Null) => {
                return Ok(json!({"id": row.id, "key": key, "value": value, "doc": null}));
            }
            Some(fields) => (
                fields.get("_id").and_then(Value::as_str).unwrap_or(&row.id),
                match fields.get("_rev") {
                    None => None,
                    // A revision that cannot be one is of no document.
                    Some(given) => match given.as_str().map(str::parse) {
                        Some(Ok(rev)) => Some(rev),
                        _ => {
                            return Ok(
                                json!({"id": row.id, "key": key, "value": value, "doc": null}),
                            );
                        }
                    },
                },
            ),
            None => (row.id.as_str(), None),
        };
        let found = database
            .get(
                target,
                GetOptions {
                    rev,
                    ..self.doc_options.clone()
                },
            )
            .await;
        let doc = match found {
            Ok(doc) => doc.to_value()?,
            Err(_) => Value::Null,
        };
        Ok(json!({"id": row.id, "key": key, "value": value, "doc": doc}))
    }
}

/// Writes one query's answer object, its rows as they are read.
async fn write_query(
    writer: &mut BodyWriter,
    database: &Database,
    mut opened: OpenedQuery,
) -> Result<(), Stop> {
    let mut text = String::from("{");
    for (name, value) in opened.head() {
        ejson::push_string(&mut text, &name);
        text.push(':');
        text.push_str(&ejson::to_string(&value));
        text.push(',');
    }
    text.push_str("\"rows\":[\r\n");
    writer.write(text.as_bytes()).await?;
    let mut first = true;
    while let Some(rows) = opened.next_rows(database).await? {
        for row in rows {
            if !first {
                writer.write(b",\r\n").await?;
            }
            first = false;
            writer.write(&ejson::to_vec(&row)).await?;
        }
    }
    writer.write(b"\r\n]}").await?;
    Ok(())
}

/// The response for a streamed JSON body.
fn streamed_json(body: axum::body::Body) -> Response {
    let mut response = Response::new(body);
    response.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    response
}

fn view_error(e: ViewError) -> ApiError {
    match e {
        ViewError::NotFound(reason) => ApiError::not_found(reason),
        ViewError::BadRequest(reason) => query_parse_error(reason),
        ViewError::Store(e) => e.into(),
        ViewError::Script(design_functions::JsError::Runtime { error, reason })
            if error == "not_implemented" =>
        {
            ApiError::NotImplemented(reason)
        }
        ViewError::Script(e) => crate::base::error::script_error(e),
    }
}

/// A view's parameters: the query string over the body, as CouchDB reads them.
struct Params<'a> {
    query: &'a Query,
    body: &'a Map<String, Value>,
}

impl Params<'_> {
    fn json(&self, key: &str, alt: &str) -> Result<Option<Value>, ApiError> {
        for name in [key, alt] {
            if let Some(v) = self.query.json(name)? {
                return Ok(Some(v));
            }
        }
        Ok(self.body.get(key).or_else(|| self.body.get(alt)).cloned())
    }

    fn flag(&self, key: &str) -> Result<Option<bool>, ApiError> {
        if let Some(b) = self.query.view_bool(key)? {
            return Ok(Some(b));
        }
        match self.body.get(key) {
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(query_parse_error(format!(
                "Invalid boolean parameter: {other}"
            ))),
            None => Ok(None),
        }
    }

    fn number(&self, key: &str) -> Result<Option<u64>, ApiError> {
        if let Some(n) = self.query.view_uint(key)? {
            return Ok(Some(n));
        }
        match self.body.get(key) {
            Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                query_parse_error(format!("Invalid value for positive integer: {v}"))
            }),
            None => Ok(None),
        }
    }

    fn text(&self, key: &str, alt: &str) -> Option<String> {
        self.query
            .get(key)
            .or_else(|| self.query.get(alt))
            .map(str::to_string)
            .or_else(|| {
                self.body
                    .get(key)
                    .or_else(|| self.body.get(alt))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
    }

    fn view_query(&self) -> Result<ViewQuery, ApiError> {
        // CouchDB's words differ by where `keys` came from.
        let keys = match (self.query.json("keys")?, self.body.get("keys")) {
            (Some(Value::Array(keys)), _) => Some(keys),
            (Some(_), _) => {
                return Err(query_parse_error(
                    "`keys` must be an array of strings.".into(),
                ));
            }
            (None, Some(Value::Array(keys))) => Some(keys.clone()),
            (None, Some(_)) => {
                return Err(ApiError::bad_request("`keys` member must be an array."));
            }
            (None, None) => None,
        };
        let mut key = self.json("key", "key")?;
        let start_key = self.json("startkey", "start_key")?;
        let end_key = self.json("endkey", "end_key")?;
        // One key is CouchDB's `key` (a `key` given beside it wins, and a
        // start or end key narrows it). More keys beside a range are
        // refused by the reader, in CouchDB's order of checks.
        let keys = match keys {
            Some(mut one) if one.len() == 1 => {
                let only = one.pop();
                if key.is_none() {
                    key = only;
                }
                None
            }
            other => other,
        };
        let many_keys = keys.as_ref().is_some_and(|k| !k.is_empty());
        // A key beside a start or end key is the range they leave of it.
        let (key, start_key, end_key) = match key {
            Some(k) if !many_keys && (start_key.is_some() || end_key.is_some()) => (
                None,
                Some(start_key.unwrap_or_else(|| k.clone())),
                Some(end_key.unwrap_or(k)),
            ),
            k => (k, start_key, end_key),
        };
        let group_level = self.number("group_level")?.map(|n| n as usize);
        // One node answers in order and from one copy: `sorted=false` and
        // `stable` change nothing, but are checked as CouchDB checks them.
        self.flag("sorted")?;
        if self.flag("stable").is_err() {
            return Err(query_parse_error("Invalid value for `stable`.".into()));
        }
        Ok(ViewQuery {
            key,
            keys,
            start_key,
            start_docid: self.text("startkey_docid", "start_key_doc_id"),
            end_key,
            end_docid: self.text("endkey_docid", "end_key_doc_id"),
            inclusive_end: self.flag("inclusive_end")?.unwrap_or(true),
            descending: self.flag("descending")?.unwrap_or(false),
            limit: self.number("limit")?.map(|n| n as usize),
            skip: self.number("skip")?.unwrap_or(0) as usize,
            reduce: self.flag("reduce")?,
            group: self.flag("group")?.unwrap_or(false),
            group_level,
            include_docs: self.flag("include_docs")?.unwrap_or(false),
            partition: None,
        })
    }
}
