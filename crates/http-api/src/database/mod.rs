//! Database-level routes: create, info, delete, `POST /db`, `_all_docs`,
//! `_bulk_docs`, `_bulk_get`, `_revs_diff`, `_missing_revs`,
//! `_ensure_full_commit`, `_compact`, `_revs_limit`, `_security`.

use std::ops::Bound;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use futures_util::{StreamExt, stream};
use serde_json::{Map, Value, json};
use store::{AllDocsQuery, AllDocsRow, BulkGetRequest, Database, DocInput, DocWriteResult};

use crate::AppState;
use crate::access::Writer;
use crate::error::ApiError;
use crate::json::{json_response, raw_json_response, read_json_object, require_json_content_type};
use crate::query::{Query, parse_rev, query_parse_error, rev_list};

/// Rows fetched from the store per page while streaming a long answer.
const PAGE_ROWS: usize = 1000;

/// # GET|HEAD|PUT|DELETE|POST /{db}
pub(crate) async fn database(
    state: AppState,
    db: String,
    query: Query,
    request: Request,
) -> Result<Response, ApiError> {
    match *request.method() {
        Method::GET | Method::HEAD => info(&state, &db).await,
        Method::PUT => {
            let partitioned = match query.get("partitioned") {
                None | Some("false") => false,
                Some("true") => true,
                Some(_) => return Err(ApiError::bad_request("Invalid `partitioned` parameter")),
            };
            state.store.create_db_with(&db, partitioned).await?;
            let mut response = json_response(StatusCode::CREATED, &json!({"ok": true}));
            set_location(&mut response, &format!("/{}", encode_segment(&db)));
            Ok(response)
        }
        Method::DELETE => {
            if query.has("rev") {
                return Err(ApiError::bad_request(
                    "You tried to DELETE a database with a ?=rev parameter. Did you mean to DELETE a document instead?",
                ));
            }
            state.store.delete_db(&db).await?;
            Ok(json_response(StatusCode::OK, &json!({"ok": true})))
        }
        Method::POST => post_document(state, db, query, request).await,
        // CouchDB's list, which leaves out PUT.
        _ => Err(ApiError::MethodNotAllowed("DELETE,GET,HEAD,POST")),
    }
}

/// CouchDB's `GET /db` object.
pub(crate) async fn info_json(db: &Database) -> Result<Value, ApiError> {
    let info = db.info().await?;
    Ok(json!({
        "instance_start_time": info.instance_start_time,
        "db_name": info.db_name,
        "purge_seq": db.seq_string(info.purge_seq),
        "update_seq": db.seq_string(info.update_seq),
        "sizes": {"file": info.file_size, "external": info.external_size, "active": info.active_size},
        "props": if db.is_partitioned() { json!({"partitioned": true}) } else { json!({}) },
        "doc_del_count": info.doc_del_count,
        "doc_count": info.doc_count,
        "disk_format_version": 8,
        "compact_running": db.compact_running(),
        "cluster": {"q": 1, "n": 1, "w": 1, "r": 1},
    }))
}

async fn info(state: &AppState, name: &str) -> Result<Response, ApiError> {
    let db = state.store.db(name).await?;
    Ok(json_response(StatusCode::OK, &info_json(&db).await?))
}

/// Characters a path segment keeps as they are, as CouchDB writes its
/// `Location` headers: RFC 3986's unreserved ones and `:` (user documents
/// are `org.couchdb.user:NAME`).
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b':');

pub(crate) fn encode_segment(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, SEGMENT).to_string()
}

pub(crate) fn set_location(response: &mut Response, path: &str) {
    if let Ok(value) = HeaderValue::from_str(path) {
        response.headers_mut().insert(header::LOCATION, value);
    }
}

/// An approximation of a JSON value's encoded size, computed without
/// encoding it: enough to enforce `max_document_size` cheaply.
pub(crate) fn json_size(value: &Value) -> u64 {
    match value {
        Value::Null => 4,
        Value::Bool(_) => 5,
        Value::Number(_) => 8,
        Value::String(s) => s.len() as u64 + 2,
        Value::Array(items) => 2 + items.iter().map(|v| json_size(v) + 1).sum::<u64>(),
        Value::Object(map) => {
            2 + map
                .iter()
                .map(|(k, v)| k.len() as u64 + 4 + json_size(v))
                .sum::<u64>()
        }
    }
}

/// Parses a document and enforces `max_document_size` on its body (the
/// special fields and attachments do not count, as in CouchDB).
pub(crate) fn parse_doc(state: &AppState, value: Value) -> Result<DocInput, ApiError> {
    let doc = DocInput::from_json(value)?;
    let limits = &state.config.limits;
    if let Some(id) = &doc.id {
        limits.check_doc_id(id)?;
    }
    if doc.attachments.len() > limits.max_attachments_per_document {
        return Err(ApiError::bad_request(format!(
            "Too many attachments: {}, the limit is {} (max_attachments_per_document)",
            doc.attachments.len(),
            limits.max_attachments_per_document
        )));
    }
    for (name, _) in &doc.attachments {
        limits.check_attachment_name(name)?;
    }
    let size: u64 = 2 + doc
        .body
        .iter()
        .map(|(k, v)| k.len() as u64 + 4 + json_size(v))
        .sum::<u64>();
    if size > state.config.max_document_size {
        return Err(ApiError::DocumentTooLarge(
            doc.id.clone().unwrap_or_default(),
        ));
    }
    Ok(doc)
}

/// Refuses a document over `max_document_size` from its raw text, before
/// any tree is built from it: only its top-level fields are visited (values
/// borrowed, not parsed), and inline attachment data does not count, as in
/// CouchDB. Text that is not an object is left to the ordinary parse.
pub(crate) fn check_raw_document_size(state: &AppState, raw: &str) -> Result<(), ApiError> {
    let limit = state.config.max_document_size;
    if raw.len() as u64 <= limit {
        return Ok(());
    }
    match serde_json::from_str::<RawDocSize>(raw) {
        Ok(RawDocSize { size, id }) if size > limit => {
            Err(ApiError::DocumentTooLarge(id.unwrap_or_default()))
        }
        _ => Ok(()),
    }
}

/// A document's size as `max_document_size` counts it, from its raw text.
struct RawDocSize {
    size: u64,
    id: Option<String>,
}

impl<'de> serde::Deserialize<'de> for RawDocSize {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = RawDocSize;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<RawDocSize, A::Error> {
                let mut out = RawDocSize { size: 2, id: None };
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    let value: &'de serde_json::value::RawValue = map.next_value()?;
                    if key == "_id" {
                        out.id = serde_json::from_str(value.get()).ok();
                    }
                    if key != "_attachments" {
                        out.size += (key.len() + 4 + value.get().len()) as u64;
                    }
                }
                Ok(out)
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

/// `{"ok": true, "id", "rev"}`, or the row's error.
fn write_row(result: &DocWriteResult) -> Value {
    match &result.result {
        Ok(rev) => json!({"ok": true, "id": result.id, "rev": rev}),
        Err(failure) => json!({"id": result.id, "error": failure.error, "reason": failure.reason}),
    }
}

/// # POST /{db}
/// Creates a document, with a generated id when it has none.
async fn post_document(
    state: AppState,
    db: String,
    query: Query,
    request: Request,
) -> Result<Response, ApiError> {
    require_json_content_type(request.headers())?;
    let database = state.store.db(&db).await?;
    let writer = Writer::of(&state, &database, crate::auth::user_of(&request)).await?;
    let body = crate::body::read_doc_body(&state, &database, request.into_body(), false).await?;
    let mut doc = parse_doc(&state, Value::Object(body.map))?;
    crate::body::DocBody::resolve(body.staged, &mut doc)?;
    let id = doc.id.get_or_insert_with(|| state.uuids.next()).clone();
    writer.check_one(&database, &mut doc, true).await?;
    if query.get("batch") == Some("ok") {
        return Ok(crate::docs::batch_write(&database, doc, true, &id).await);
    }
    let rev = database.put_doc(doc, true).await?;
    let mut response = json_response(
        StatusCode::CREATED,
        &json!({"ok": true, "id": id, "rev": rev}),
    );
    // As CouchDB: a POSTed document gets a Location, no ETag.
    set_location(
        &mut response,
        &format!("/{}/{}", encode_segment(&db), encode_segment(&id)),
    );
    Ok(response)
}

pub(crate) fn set_etag(response: &mut Response, rev: &str) {
    if let Ok(value) = HeaderValue::from_str(&format!("\"{rev}\"")) {
        response.headers_mut().insert(header::ETAG, value);
    }
}

/// # POST /{db}/_bulk_docs
pub(crate) async fn bulk_docs(
    state: AppState,
    db: String,
    request: Request,
) -> Result<Response, ApiError> {
    require_json_content_type(request.headers())?;
    let database = state.store.db(&db).await?;
    let writer = Writer::of(&state, &database, crate::auth::user_of(&request)).await?;
    let bytes = match crate::body::spool(
        request.into_body().into_data_stream(),
        state.config.max_http_request_size,
        &crate::body::spool_dir(&state),
        crate::body::BULK_IN_MEMORY,
    )
    .await?
    {
        crate::body::Spooled::Memory(bytes) => bytes,
        crate::body::Spooled::File(file) => {
            let (results, new_edits) =
                crate::body::bulk_docs_from_file(&state, &database, &writer, file).await?;
            return Ok(bulk_answer(&results, new_edits));
        }
    };
    // The documents stay raw JSON here: each is decoded as the store pulls
    // it, while the writer writes the ones before.
    let body: std::collections::HashMap<String, &serde_json::value::RawValue> =
        serde_json::from_slice(&bytes).map_err(|_| match crate::json::parse_json(&bytes) {
            Ok(_) => ApiError::bad_request("Request body must be a JSON object"),
            Err(e) => e,
        })?;
    let docs: Vec<&serde_json::value::RawValue> = match body.get("docs") {
        Some(raw) => serde_json::from_str(raw.get())
            .map_err(|_| ApiError::bad_request("`docs` parameter must be an array."))?,
        None => {
            return Err(ApiError::bad_request(
                "POST body must include `docs` parameter.",
            ));
        }
    };
    let new_edits = match body.get("new_edits").map(|raw| raw.get().trim()) {
        None => true,
        Some("true") => true,
        Some("false") => false,
        Some(_) => {
            return Err(ApiError::bad_request(
                "`new_edits` parameter must be a boolean.",
            ));
        }
    };
    let count = docs.len();
    state.config.limits.check_items(count, "documents")?;
    if new_edits && body.get("all_or_nothing").map(|raw| raw.get().trim()) == Some("true") {
        return Ok(all_or_nothing_refused(&docs));
    }
    let parse = |raw: &serde_json::value::RawValue| {
        check_raw_document_size(&state, raw.get())?;
        let value: Value = ejson::from_str(raw.get())?;
        parse_doc(&state, value)
    };
    // Design documents are checked by the engine (their views compile):
    // a batch holding one goes the checked way.
    let has_design = docs.iter().any(|raw| raw.get().contains("_design/"));
    if writer.needs_stored_state() || has_design {
        // `_users`: each document is checked against its stored revision
        // and its password hashed before anything is written.
        let mut accepted = Vec::with_capacity(count);
        let mut refused = Vec::new();
        for (at, raw) in docs.into_iter().enumerate() {
            let mut doc = parse(raw)?;
            match writer.check(&database, &mut doc, new_edits).await? {
                Ok(()) => accepted.push(Ok::<_, ApiError>(doc)),
                Err(failure) => refused.push((at, refusal_row(&doc, failure))),
            }
        }
        let written = match database
            .bulk_docs_streamed(accepted.into_iter(), count, new_edits)
            .await
        {
            Ok(results) => results,
            Err(store::BulkError::Input(e)) => return Err(e),
            Err(store::BulkError::Store(e)) => return Err(e.into()),
        };
        return Ok(bulk_answer(
            &crate::access::splice(written, refused),
            new_edits,
        ));
    }
    let mut refused = Vec::new();
    let inputs = docs
        .into_iter()
        .enumerate()
        .filter_map(|(at, raw)| match parse(raw) {
            Ok(doc) => match writer.check_streamed(&doc) {
                Ok(()) => Some(Ok(doc)),
                Err(failure) => {
                    refused.push((at, refusal_row(&doc, failure)));
                    None
                }
            },
            Err(e) => Some(Err(e)),
        });
    let results = match database.bulk_docs_streamed(inputs, count, new_edits).await {
        Ok(results) => results,
        Err(store::BulkError::Input(e)) => return Err(e),
        Err(store::BulkError::Store(e)) => return Err(e.into()),
    };
    Ok(bulk_answer(
        &crate::access::splice(results, refused),
        new_edits,
    ))
}

/// The `_bulk_docs` row of a document refused before the write.
pub(crate) fn refusal_row(doc: &DocInput, failure: store::DocFailure) -> DocWriteResult {
    DocWriteResult {
        id: doc.id.clone().unwrap_or_default(),
        result: Err(failure),
        refused_rev: doc.rev.as_ref().map(|rev| rev.to_string()),
    }
}

/// CouchDB 3 has no atomic `all_or_nothing` writes and says so for every
/// document, writing none (417): a client that asked for atomicity is not
/// given a partial write instead.
fn all_or_nothing_refused(docs: &[&serde_json::value::RawValue]) -> Response {
    #[derive(serde::Deserialize)]
    struct Named {
        #[serde(rename = "_id")]
        id: Option<String>,
        #[serde(rename = "_rev")]
        rev: Option<String>,
    }
    let rows: Vec<Value> = docs
        .iter()
        .map(|raw| {
            let named = serde_json::from_str::<Named>(raw.get()).unwrap_or(Named {
                id: None,
                rev: None,
            });
            json!({
                "id": named.id.unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string()),
                "rev": named.rev.unwrap_or_else(|| "0-".into()),
                "error": "not_implemented",
                "reason": "all_or_nothing is not supported",
            })
        })
        .collect();
    json_response(StatusCode::EXPECTATION_FAILED, &rows)
}

/// `_bulk_docs`' answer: a row per document, or only the failures when
/// replicating (`new_edits: false`), as CouchDB.
fn bulk_answer(results: &[DocWriteResult], new_edits: bool) -> Response {
    let rows: Vec<Value> = if new_edits {
        results.iter().map(write_row).collect()
    } else {
        results
            .iter()
            .filter_map(|r| {
                r.result.as_ref().err().map(|f| match &r.refused_rev {
                    Some(rev) => {
                        json!({"id": r.id, "rev": rev, "error": f.error, "reason": f.reason})
                    }
                    None => json!({"id": r.id, "error": f.error, "reason": f.reason}),
                })
            })
            .collect()
    };
    json_response(StatusCode::CREATED, &rows)
}

/// # POST /{db}/_bulk_get
pub(crate) async fn bulk_get(
    state: AppState,
    db: String,
    query: Query,
    request: Request,
) -> Result<Response, ApiError> {
    let database = state.store.db(&db).await?;
    let body = read_json_object(request.into_body(), &state.config).await?;
    let Some(Value::Array(docs)) = body.get("docs") else {
        return Err(ApiError::bad_request("Missing JSON list of 'docs'."));
    };
    state.config.limits.check_items(docs.len(), "documents")?;
    let requests: Vec<BulkGetEntry> = docs.iter().map(bulk_get_entry).collect();
    let options = BulkGetOptions {
        revs: query.flag("revs")?,
        latest: query.flag("latest")?,
        attachments: query.flag("attachments")?,
    };
    // The answer streams a page of documents at a time: however many are
    // asked for, only one page of them is held at once. The first page is
    // read before answering, so a failure there is still a proper error.
    let mut pages: std::collections::VecDeque<Vec<BulkGetEntry>> =
        std::collections::VecDeque::new();
    let mut requests = requests.into_iter().peekable();
    while requests.peek().is_some() {
        pages.push_back(requests.by_ref().take(BULK_GET_PAGE).collect());
    }
    let first = match pages.pop_front() {
        Some(page) => bulk_get_page(&database, page, options, true).await?,
        None => String::new(),
    };
    let head = Bytes::from(format!("{{\"results\":[{first}"));
    let rest = stream::unfold(
        (database, pages, false),
        move |(database, mut pages, done)| async move {
            if done {
                return None;
            }
            match pages.pop_front() {
                Some(page) => match bulk_get_page(&database, page, options, false).await {
                    Ok(text) => Some((Ok(Bytes::from(text)), (database, pages, false))),
                    Err(e) => {
                        // The status is sent: cutting the body is the only
                        // way left to tell the client the answer is incomplete.
                        tracing::error!(error = ?e, "_bulk_get failed midway");
                        Some((
                            Err(std::io::Error::other("_bulk_get failed midway")),
                            (database, pages, true),
                        ))
                    }
                },
                None => Some((Ok(Bytes::from_static(b"]}\n")), (database, pages, true))),
            }
        },
    );
    let body = stream::once(async move { Ok::<Bytes, std::io::Error>(head) }).chain(rest);
    let mut response = Response::new(Body::from_stream(body));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

/// Documents per page of a streamed `_bulk_get` answer.
const BULK_GET_PAGE: usize = 100;

#[derive(Debug, Clone, Copy)]
struct BulkGetOptions {
    revs: bool,
    latest: bool,
    attachments: bool,
}

/// One entry of a `_bulk_get` request: a read to make, or CouchDB's
/// answer for an entry it cannot read (the other entries are still read).
enum BulkGetEntry {
    Read(BulkGetRequest),
    Refused(Value),
}

fn bulk_get_entry(entry: &Value) -> BulkGetEntry {
    let refused = |id: &Value, rev: &Value, reason: &str| {
        BulkGetEntry::Refused(json!({"id": id, "docs": [{"error": {
            "id": id, "rev": rev, "error": "bad_request", "reason": reason}}]}))
    };
    let Some(id) = entry.get("id").and_then(Value::as_str) else {
        return refused(&Value::Null, &Value::Null, "document id missed");
    };
    let rev = match entry.get("rev").and_then(Value::as_str).map(parse_rev) {
        None => None,
        Some(Ok(rev)) => Some(rev),
        Some(Err(_)) => return refused(&json!(id), &entry["rev"], "Invalid rev format"),
    };
    let atts_since = match entry.get("atts_since").map(|v| rev_list(v, "atts_since")) {
        None => Vec::new(),
        Some(Ok(revs)) => revs,
        Some(Err(_)) => return refused(&json!(id), &entry["rev"], "Invalid rev format"),
    };
    BulkGetEntry::Read(BulkGetRequest {
        id: id.to_string(),
        rev,
        atts_since,
    })
}

/// One page of `_bulk_get` results as JSON text, comma-led unless `first`.
async fn bulk_get_page(
    database: &Database,
    entries: Vec<BulkGetEntry>,
    options: BulkGetOptions,
    first: bool,
) -> Result<String, ApiError> {
    let mut reads = Vec::with_capacity(entries.len());
    let mut order = Vec::with_capacity(entries.len());
    for entry in entries {
        match entry {
            BulkGetEntry::Read(request) => {
                reads.push(request);
                order.push(None);
            }
            BulkGetEntry::Refused(answer) => order.push(Some(answer)),
        }
    }
    let mut results = database
        .bulk_get(reads, options.revs, options.latest, options.attachments)
        .await?
        .into_iter();
    let mut out = String::new();
    for (i, refused) in order.into_iter().enumerate() {
        if i > 0 || !first {
            out.push(',');
        }
        if let Some(answer) = refused {
            out.push_str(&ejson::to_string(&answer));
            continue;
        }
        let Some(result) = results.next() else {
            return Err(ApiError::Internal("_bulk_get lost an answer".into()));
        };
        out.push_str("{\"id\":");
        wire::json::push_string(&mut out, &result.id);
        out.push_str(",\"docs\":[");
        for (j, doc) in result.docs.iter().enumerate() {
            if j > 0 {
                out.push(',');
            }
            match doc {
                Ok(doc) => {
                    out.push_str("{\"ok\":");
                    out.push_str(doc.as_str());
                    out.push('}');
                }
                Err(e) => out.push_str(
                    &ejson::to_string(&json!({"error": {"id": e.id, "rev": e.rev, "error": e.error, "reason": e.reason}})),
                ),
            }
        }
        out.push_str("]}");
    }
    Ok(out)
}

/// # POST /{db}/_revs_diff and POST /{db}/_missing_revs
pub(crate) async fn revs_diff(
    state: AppState,
    db: String,
    request: Request,
    missing_revs_shape: bool,
) -> Result<Response, ApiError> {
    let database = state.store.db(&db).await?;
    let body = read_json_object(request.into_body(), &state.config).await?;
    let mut asked = Vec::with_capacity(body.len());
    let mut revisions = 0;
    for (id, revs) in body {
        let revs = rev_list(&revs, "Each document's revisions")?;
        revisions += revs.len();
        state.config.limits.check_items(revisions, "revisions")?;
        asked.push((id, revs));
    }
    let diffs = database.revs_diff(asked).await?;
    let mut out = Map::new();
    for (id, diff) in diffs {
        let missing: Vec<String> = diff.missing.iter().map(ToString::to_string).collect();
        if missing_revs_shape {
            out.insert(id, json!(missing));
        } else {
            let mut entry = Map::new();
            entry.insert("missing".into(), json!(missing));
            if !diff.possible_ancestors.is_empty() {
                let ancestors: Vec<String> = diff
                    .possible_ancestors
                    .iter()
                    .map(ToString::to_string)
                    .collect();
                entry.insert("possible_ancestors".into(), json!(ancestors));
            }
            out.insert(id, Value::Object(entry));
        }
    }
    let body = if missing_revs_shape {
        json!({"missing_revs": out})
    } else {
        Value::Object(out)
    };
    Ok(json_response(StatusCode::OK, &body))
}

/// # POST /{db}/_ensure_full_commit
pub(crate) async fn ensure_full_commit(state: AppState, db: String) -> Result<Response, ApiError> {
    let database = state.store.db(&db).await?;
    database.ensure_full_commit().await?;
    Ok(json_response(
        StatusCode::CREATED,
        &json!({"ok": true, "instance_start_time": database.instance_start_time()}),
    ))
}

/// # POST /{db}/_compact
/// Starts compaction in the background, as CouchDB does.
pub(crate) async fn compact(
    state: AppState,
    db: String,
    request: Request,
) -> Result<Response, ApiError> {
    require_json_content_type(request.headers())?;
    let database = state.store.db(&db).await?;
    tokio::spawn(async move {
        if let Err(e) = database.compact().await {
            tracing::error!(db = %database.name(), error = %e, "compaction failed");
        }
    });
    Ok(json_response(StatusCode::ACCEPTED, &json!({"ok": true})))
}

/// # GET|PUT /{db}/_revs_limit
pub(crate) async fn revs_limit(
    state: AppState,
    db: String,
    request: Request,
) -> Result<Response, ApiError> {
    let database = state.store.db(&db).await?;
    if request.method() == Method::GET {
        return Ok(json_response(StatusCode::OK, &database.revs_limit().await?));
    }
    let limit = crate::json::read_json_body(request.into_body(), &state.config)
        .await?
        .and_then(|v| v.as_u64())
        .filter(|n| (1..=u32::MAX as u64).contains(n))
        .ok_or_else(|| ApiError::bad_request("The revs_limit must be a positive integer"))?;
    database.set_revs_limit(limit as u32).await?;
    Ok(json_response(StatusCode::OK, &json!({"ok": true})))
}

/// # GET|PUT /{db}/_security
pub(crate) async fn security(
    state: AppState,
    db: String,
    request: Request,
) -> Result<Response, ApiError> {
    let database = state.store.db(&db).await?;
    if request.method() == Method::GET {
        return Ok(json_response(StatusCode::OK, &*database.security().await?));
    }
    // Only the database's admins change who its admins and members are.
    let user = crate::auth::user_of(&request);
    let current = auth::SecurityObject::from_json(&*database.security().await?);
    if !current.is_admin(&user) {
        return Err(crate::access::not_db_admin(&user));
    }
    if db == crate::auth::USERS_DB && !state.auth.config.users_db_security_editable {
        return Err(ApiError::Forbidden(
            "You can't edit the security object of the user database.".into(),
        ));
    }
    let body = Value::Object(read_json_object(request.into_body(), &state.config).await?);
    auth::SecurityObject::validate(&body).map_err(ApiError::bad_request)?;
    database.set_security(body).await?;
    Ok(json_response(StatusCode::OK, &json!({"ok": true})))
}

/// Where a JSON key falls among document ids, which are all strings:
/// CouchDB's collation puts null, booleans and numbers before every string
/// and arrays and objects after.
enum KeyPlace {
    BeforeAll,
    Id(String),
    AfterAll,
}

fn key_place(value: &Value) -> KeyPlace {
    match value {
        Value::String(s) => KeyPlace::Id(s.clone()),
        Value::Array(_) | Value::Object(_) => KeyPlace::AfterAll,
        _ => KeyPlace::BeforeAll,
    }
}

/// The options of an `_all_docs` request, from the query string and (for
/// POST) the body.
/// The parameters of `_all_docs` (and `_local_docs`), from the query string
/// and a POST body.
pub(crate) struct AllDocsOptions {
    pub query: AllDocsQuery,
    pub keys: Option<Vec<Value>>,
    pub update_seq: bool,
    /// The range is empty (e.g. `startkey` after every id).
    pub empty: bool,
}

pub(crate) fn all_docs_options(
    query: &Query,
    body: &Map<String, Value>,
) -> Result<AllDocsOptions, ApiError> {
    // Query parameters override body fields: CouchDB reads the body, then
    // the query string over it.
    let json = |key: &str, alt: &str| -> Result<Option<Value>, ApiError> {
        if let Some(v) = query.json(key)? {
            return Ok(Some(v));
        }
        if let Some(v) = query.json(alt)? {
            return Ok(Some(v));
        }
        Ok(body.get(key).or_else(|| body.get(alt)).cloned())
    };
    let flag = |key: &str| -> Result<Option<bool>, ApiError> {
        if let Some(b) = query.view_bool(key)? {
            return Ok(Some(b));
        }
        match body.get(key) {
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(query_parse_error(format!(
                "Invalid boolean parameter: {other}"
            ))),
            None => Ok(None),
        }
    };
    let number = |key: &str| -> Result<Option<u64>, ApiError> {
        if let Some(n) = query.view_uint(key)? {
            return Ok(Some(n));
        }
        match body.get(key) {
            Some(v) => match (v.as_u64(), v) {
                (Some(n), _) => Ok(Some(n)),
                (None, Value::Number(n)) if n.as_i64().is_some() => Err(query_parse_error(
                    format!("Invalid value for positive integer: {n}"),
                )),
                // CouchDB shows a string in Erlang's binary notation.
                (None, Value::String(s)) => Err(query_parse_error(format!(
                    "Invalid value for integer: <<{s:?}>>"
                ))),
                (None, other) => Err(query_parse_error(format!(
                    "Invalid value for integer: {other}"
                ))),
            },
            None => Ok(None),
        }
    };
    let descending = flag("descending")?.unwrap_or(false);
    let inclusive_end = flag("inclusive_end")?.unwrap_or(true);
    let mut q = AllDocsQuery {
        descending,
        limit: number("limit")?.map_or(usize::MAX, |n| n as usize),
        skip: number("skip")?.unwrap_or(0) as usize,
        include_docs: flag("include_docs")?.unwrap_or(false),
        conflicts: flag("conflicts")?.unwrap_or(false),
        attachments: flag("attachments")?.unwrap_or(false),
        ..Default::default()
    };
    let mut empty = false;
    if let Some(key) = json("key", "key")? {
        match key_place(&key) {
            KeyPlace::Id(id) => {
                q.start = Bound::Included(id.clone());
                q.end = Bound::Included(id);
            }
            _ => empty = true,
        }
    } else {
        // With `descending`, the start key is the high end and the range runs down.
        let (before, after) = if descending {
            (true, false)
        } else {
            (false, true)
        };
        if let Some(start) = json("startkey", "start_key")? {
            match key_place(&start) {
                KeyPlace::Id(id) => q.start = Bound::Included(id),
                KeyPlace::BeforeAll => empty |= before,
                KeyPlace::AfterAll => empty |= after,
            }
        }
        if let Some(end) = json("endkey", "end_key")? {
            match key_place(&end) {
                KeyPlace::Id(id) if inclusive_end => q.end = Bound::Included(id),
                KeyPlace::Id(id) => q.end = Bound::Excluded(id),
                KeyPlace::BeforeAll => empty |= after,
                KeyPlace::AfterAll => empty |= before,
            }
        }
    }
    // `keys` from the body must agree with a key or range in the query
    // (CouchDB reads one key as the range [key, key]); in the query string
    // alone, `keys` wins.
    let keys = match body.get("keys") {
        Some(Value::Array(keys)) => {
            for (name, alt) in [
                ("key", "key"),
                ("startkey", "start_key"),
                ("endkey", "end_key"),
            ] {
                if let Some(bound) = json(name, alt)?
                    && (keys.len() != 1 || keys[0] != bound)
                {
                    return Err(query_parse_error(
                        "`keys` is incompatible with `key`, `start_key` and `end_key`".into(),
                    ));
                }
            }
            Some(keys.clone())
        }
        Some(_) => {
            return Err(ApiError::bad_request(
                "`keys` body member must be an array.",
            ));
        }
        None => match query.json("keys")? {
            None => None,
            Some(Value::Array(keys)) => Some(keys),
            Some(_) => {
                return Err(ApiError::bad_request("`keys` parameter must be an array."));
            }
        },
    };
    Ok(AllDocsOptions {
        query: q,
        keys,
        update_seq: flag("update_seq")?.unwrap_or(false),
        empty,
    })
}

/// One `_all_docs` row; a deleted document's (asked for by key) has
/// `"doc": null` with `include_docs`, as in CouchDB.
fn all_docs_row_json(row: &AllDocsRow, include_docs: bool) -> String {
    let mut out = String::with_capacity(96 + row.doc.as_ref().map_or(0, |d| d.as_str().len()));
    let doc = match &row.doc {
        Some(doc) => Some(Some(doc.as_str())),
        None if row.deleted && include_docs => Some(None),
        None => None,
    };
    wire::rows::write_all_docs_row(&mut out, &row.id, &row.rev, row.deleted, doc);
    out
}

/// What the `_all_docs`-style endpoints (`_all_docs`, `_local_docs`,
/// `_design_docs`) read first: the database, and their options from the
/// query string and, for a POST, the JSON body.
pub(crate) async fn listing(
    state: &AppState,
    db: &str,
    query: &Query,
    request: Request,
) -> Result<(Database, AllDocsOptions), ApiError> {
    let database = state.store.db(db).await?;
    let body = if request.method() == Method::POST {
        require_json_content_type(request.headers())?;
        read_json_object(request.into_body(), &state.config).await?
    } else {
        Map::new()
    };
    let options = all_docs_options(query, &body)?;
    if let Some(keys) = &options.keys {
        state.config.limits.check_items(keys.len(), "keys")?;
    }
    Ok((database, options))
}

/// The string `keys` of a listing that name its kind of document (ids
/// starting with `prefix`), in the order the rows go out; CouchDB leaves
/// the others out.
pub(crate) fn keyed_ids(keys: &[Value], prefix: &str, descending: bool) -> Vec<String> {
    let mut ids: Vec<String> = keys
        .iter()
        .filter_map(Value::as_str)
        .filter(|id| id.starts_with(prefix))
        .map(str::to_string)
        .collect();
    if descending {
        ids.reverse();
    }
    ids
}

/// A listing's row for a key that names no document.
pub(crate) fn not_found_row(key: &impl serde::Serialize) -> String {
    ejson::to_string(&json!({"key": key, "error": "not_found"}))
}

/// A listing's answer: `head` (the members before `rows`, each followed by
/// a comma), then the rows, one per line as CouchDB writes them.
pub(crate) fn listing_response(head: &str, rows: &[String]) -> Response {
    let mut out = format!("{{{head}\"rows\":[");
    for (i, row) in rows.iter().enumerate() {
        out.push_str(if i == 0 { "\n" } else { ",\n" });
        out.push_str(row);
    }
    out.push_str("\n]}\n");
    raw_json_response(StatusCode::OK, out)
}

/// Narrows a listing to a partition's ids: its live documents, and how
/// many live documents come before the partition in the listing's
/// direction (taken off `offset`).
async fn clamp_to_partition(
    database: &Database,
    query: &mut AllDocsQuery,
    partition: &str,
) -> Result<(u64, u64), ApiError> {
    let (low, high) = store::partition_range(partition);
    let (low, high) = (Bound::Included(low), Bound::Excluded(high));
    let later = |a: &Bound<String>, b: &Bound<String>| bound_key(a) >= bound_key(b);
    let open = |b: &Bound<String>| *b == Bound::Unbounded;
    if query.descending {
        if open(&query.start) || later(&query.start, &high) {
            query.start = high.clone();
        }
        if open(&query.end) || !later(&query.end, &low) {
            query.end = low.clone();
        }
    } else {
        if open(&query.start) || !later(&query.start, &low) {
            query.start = low.clone();
        }
        if open(&query.end) || later(&query.end, &high) {
            query.end = high.clone();
        }
    }
    let edge = if query.descending { high } else { low };
    let outside = database
        .all_docs(AllDocsQuery {
            start: edge,
            descending: query.descending,
            limit: 0,
            count_offset: true,
            ..Default::default()
        })
        .await?
        .offset
        .unwrap_or(0);
    Ok((database.partition_info(partition).await?.doc_count, outside))
}

/// A bound's id for comparing bounds (unbounded sorts first).
fn bound_key(bound: &Bound<String>) -> Option<&str> {
    match bound {
        Bound::Included(s) | Bound::Excluded(s) => Some(s),
        Bound::Unbounded => None,
    }
}

/// # GET|POST /{db}/_all_docs
/// Streams the rows page by page: memory stays flat however large the database.
pub(crate) async fn all_docs(
    state: AppState,
    db: String,
    query: Query,
    request: Request,
) -> Result<Response, ApiError> {
    all_docs_in(state, db, query, request, None).await
}

/// `_all_docs` of the whole database, or of one partition
/// (`/{db}/_partition/{p}/_all_docs`): its ids only, counted on their own.
pub(crate) async fn all_docs_in(
    state: AppState,
    db: String,
    query: Query,
    request: Request,
    partition: Option<String>,
) -> Result<Response, ApiError> {
    let (database, mut options) = listing(&state, &db, &query, request).await?;
    if let Some(keys) = options.keys {
        return all_docs_by_keys(database, keys, &options.query, options.update_seq).await;
    }
    let scope = match &partition {
        Some(p) => Some(clamp_to_partition(&database, &mut options.query, p).await?),
        None => None,
    };
    let mut first = options.query.clone();
    first.limit = first.limit.min(PAGE_ROWS);
    let mut remaining = options.query.limit;
    let page = if options.empty {
        let mut none = first.clone();
        none.limit = 0;
        database.all_docs(none).await?
    } else {
        database.all_docs(first.clone()).await?
    };
    let (total_rows, offset) = match scope {
        Some((count, outside)) => (count, page.offset.unwrap_or(0).saturating_sub(outside)),
        None => (page.total_rows, page.offset.unwrap_or(0)),
    };
    let mut head = format!("{{\"total_rows\":{total_rows},\"offset\":{offset},");
    if options.update_seq {
        head.push_str(&format!(
            "\"update_seq\":{},",
            wire::json::string(&database.seq_string(page.update_seq))
        ));
    }
    head.push_str("\"rows\":[");
    remaining = remaining.saturating_sub(page.rows.len());
    let done = options.empty || page.rows.len() < first.limit || remaining == 0;
    let next = AllDocsQuery {
        start: page
            .rows
            .last()
            .map_or(first.start.clone(), |r| Bound::Excluded(r.id.clone())),
        skip: 0,
        count_offset: false,
        ..options.query
    };
    let mut chunk = head;
    for (i, row) in page.rows.iter().enumerate() {
        chunk.push_str(if i == 0 { "\n" } else { ",\n" });
        chunk.push_str(&all_docs_row_json(row, false));
    }
    let had_rows = !page.rows.is_empty();
    struct Pager {
        db: Database,
        next: AllDocsQuery,
        remaining: usize,
        done: bool,
        had_rows: bool,
        first: Option<String>,
        finished: bool,
    }
    let pager = Pager {
        db: database,
        next,
        remaining,
        done,
        had_rows,
        first: Some(chunk),
        finished: false,
    };
    let body_stream = stream::unfold(pager, |mut p| async move {
        if let Some(first) = p.first.take() {
            return Some((Ok::<Bytes, std::io::Error>(Bytes::from(first)), p));
        }
        if p.finished {
            return None;
        }
        if p.done {
            p.finished = true;
            return Some((Ok(Bytes::from_static(b"\n]}\n")), p));
        }
        let mut q = p.next.clone();
        q.limit = p.remaining.min(PAGE_ROWS);
        match p.db.all_docs(q.clone()).await {
            Ok(page) => {
                let mut chunk = String::new();
                for row in &page.rows {
                    chunk.push_str(if p.had_rows { ",\n" } else { "\n" });
                    p.had_rows = true;
                    chunk.push_str(&all_docs_row_json(row, false));
                }
                p.remaining = p.remaining.saturating_sub(page.rows.len());
                p.done = page.rows.len() < q.limit || p.remaining == 0;
                if let Some(last) = page.rows.last() {
                    p.next.start = Bound::Excluded(last.id.clone());
                }
                Some((Ok(Bytes::from(chunk)), p))
            }
            Err(e) => {
                // The status line is gone; end the body so the client sees truncated JSON.
                tracing::error!(error = %e, "_all_docs stream failed");
                p.finished = true;
                Some((Err(std::io::Error::other(e.to_string())), p))
            }
        }
    });
    let mut response = Response::new(Body::from_stream(body_stream));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

async fn all_docs_by_keys(
    database: Database,
    keys: Vec<Value>,
    query: &AllDocsQuery,
    update_seq: bool,
) -> Result<Response, ApiError> {
    let info = database.info().await?;
    let mut keys = keys;
    if query.descending {
        keys.reverse();
    }
    let ids: Vec<Option<String>> = keys
        .iter()
        .map(|k| k.as_str().map(str::to_string))
        .collect();
    // Local documents are not in `_all_docs`'s range, but CouchDB answers
    // them by key.
    let is_local = |id: &String| id.starts_with("_local/");
    let lookup: Vec<String> = ids
        .iter()
        .flatten()
        .filter(|id| !is_local(id))
        .cloned()
        .collect();
    let locals: Vec<String> = ids
        .iter()
        .flatten()
        .filter(|id| is_local(id))
        .cloned()
        .collect();
    let mut found = database
        .all_docs_keys(lookup, query.doc_options())
        .await?
        .into_iter();
    let mut found_locals = database
        .local_docs_keys(locals, query.include_docs)
        .await?
        .into_iter();
    let mut rows = Vec::new();
    for (key, id) in keys.iter().zip(ids.iter()) {
        let row = match id {
            Some(id) if is_local(id) => found_locals
                .next()
                .and_then(|(_, row)| row)
                .map(crate::local_docs::row_json),
            Some(_) => found
                .next()
                .and_then(|(_, row)| row)
                .map(|row| all_docs_row_json(&row, query.include_docs)),
            None => None,
        };
        rows.push(row.unwrap_or_else(|| not_found_row(key)));
    }
    let rows: Vec<String> = rows
        .into_iter()
        .skip(query.skip)
        .take(query.limit)
        .collect();
    // CouchDB has no offset to give for keys.
    let mut head = format!("\"total_rows\":{},\"offset\":null,", info.doc_count);
    if update_seq {
        head.push_str(&format!(
            "\"update_seq\":{},",
            wire::json::string(&database.seq_string(info.update_seq))
        ));
    }
    Ok(listing_response(&head, &rows))
}
