//! Document routes: `GET|HEAD|PUT|DELETE|COPY /{db}/{docid}`, for ordinary,
//! design (`_design/...`) and local (`_local/...`) documents.

pub(crate) mod attachments;
pub(crate) mod form_upload;
pub(crate) mod multipart;

use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};
use store::{AttachmentInput, Database, DocInput, GetOptions, OpenRev, OpenRevs};

use crate::AppState;
use crate::base::access::Writer;
use crate::base::doc_input::parse_doc;
use crate::base::error::ApiError;
use crate::base::params::{Query, parse_rev, rev_list};
use crate::base::response::{encode_segment, set_etag, set_location};
use crate::base::response::{json_response, raw_json_response};

/// # GET|HEAD|PUT|DELETE|COPY /{db}/{docid}
pub(crate) async fn document(
    state: AppState,
    db: String,
    id: String,
    query: Query,
    request: Request,
) -> Result<Response, ApiError> {
    let user = crate::base::auth::user_of(&request);
    let (database, writer) = state.open_to_write(&db, &user).await?;
    match request.method().as_str() {
        "GET" | "HEAD" if writer.reads_filtered() => {
            filtered_get(&state, &database, &writer, &id, &query).await
        }
        "GET" | "HEAD" => get(&database, &id, &query, request.headers()).await,
        "PUT" => put(&state, &database, &writer, &db, id, &query, request).await,
        "DELETE" => delete(&database, &writer, id, &query, request.headers()).await,
        "COPY" => copy(&database, &writer, &db, &id, &query, request.headers()).await,
        // CouchDB's HTML form uploads of attachments.
        "POST" => {
            crate::document::form_upload::form_upload(&state, &database, &writer, id, request).await
        }
        _ => Err(ApiError::MethodNotAllowed("DELETE,GET,HEAD,POST,PUT,COPY")),
    }
}

/// # GET /_users/{docid} by a caller who is not its admin
/// Only the plain read: the caller's own document whole, others' public
/// fields at most (CouchDB's `after_doc_read`).
async fn filtered_get(
    state: &AppState,
    database: &Database,
    writer: &Writer,
    id: &str,
    query: &Query,
) -> Result<Response, ApiError> {
    if query.get("open_revs").is_some() || id.starts_with("_local/") {
        return Err(ApiError::Forbidden(
            "Only administrators may read this in the users database.".into(),
        ));
    }
    let opts = GetOptions {
        rev: query.rev("rev")?,
        ..GetOptions::default()
    };
    let Value::Object(body) = database.get(id, opts).await?.to_value()? else {
        return Err(ApiError::Internal(
            "stored document is not an object".into(),
        ));
    };
    let public = if state.auth.config.users_db_public {
        state.auth.config.public_fields.as_slice()
    } else {
        &[]
    };
    let shown = writer.filter_read(id, body, public)?;
    Ok(json_response(StatusCode::OK, &Value::Object(shown)))
}

/// The `_rev` of a document built by the store: it always follows `_id`.
pub(crate) fn rev_of(doc: &str) -> Option<&str> {
    let start = doc.find("\"_rev\":\"")? + 8;
    let len = doc[start..].find('"')?;
    Some(&doc[start..start + len])
}

/// The read options of `GET /db/doc`.
pub(crate) fn get_options(query: &Query) -> Result<GetOptions, ApiError> {
    let meta = query.doc_flag("meta");
    let atts_since = match query.json("atts_since")? {
        Some(v) => rev_list(&v, "atts_since")?,
        None => Vec::new(),
    };
    Ok(GetOptions {
        rev: query.rev("rev")?,
        revs: query.doc_flag("revs"),
        revs_info: query.doc_flag("revs_info") || meta,
        conflicts: query.doc_flag("conflicts") || meta,
        deleted_conflicts: query.doc_flag("deleted_conflicts") || meta,
        local_seq: query.doc_flag("local_seq"),
        attachments: query.doc_flag("attachments"),
        atts_since,
        latest: query.doc_flag("latest"),
        att_encoding_info: query.doc_flag("att_encoding_info"),
    })
}

/// # GET /{db}/{docid}
async fn get(
    database: &Database,
    id: &str,
    query: &Query,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    // A local document is read by id alone: CouchDB finds no revision of it.
    if id.starts_with("_local/") && query.get("rev").is_some() {
        return Err(ApiError::not_found("missing"));
    }
    let opts = get_options(query)?;
    if let Some(open_revs) = query.get("open_revs") {
        let which = if open_revs == "all" {
            OpenRevs::All
        } else {
            let value: Value = ejson::from_str(open_revs)?;
            OpenRevs::List(rev_list(&value, "open_revs")?)
        };
        if crate::document::multipart::accepts(headers, "multipart/mixed") {
            let revs = database.open_revs(id, which, opts, true).await?;
            return crate::document::multipart::open_revs_mixed(database, id, revs).await;
        }
        return open_revs_json(database, id, which, opts).await;
    }
    let related = (opts.attachments || !opts.atts_since.is_empty())
        && crate::document::multipart::accepts(headers, "multipart/related")
        && !id.starts_with("_local/");
    if related {
        let rev = opts.rev.clone();
        let mut follows = opts.clone();
        follows.attachments = false;
        let which = match rev {
            Some(rev) => OpenRevs::List(vec![rev]),
            None => OpenRevs::All,
        };
        // Which revision answers (the winner, or the asked one), read
        // without attachment bytes; then the same revision with `follows`.
        let probe = GetOptions {
            attachments: false,
            atts_since: Vec::new(),
            ..opts.clone()
        };
        let doc = database.get(id, probe).await?;
        let wanted = rev_of(doc.as_str()).map(str::to_string);
        let chosen = database
            .open_revs(id, which, follows, true)
            .await?
            .into_iter()
            .find_map(|r| match r {
                OpenRev::Ok(d) if rev_of(d.as_str()).map(str::to_string) == wanted => Some(d),
                _ => None,
            })
            .unwrap_or(doc);
        return crate::document::multipart::doc_related(database, id, chosen).await;
    }
    // As CouchDB: no ETag (nor 304) when the answer carries revision
    // metadata (`_revs_info`, `_conflicts`, `_deleted_conflicts`,
    // `_local_seq`), which the revision alone does not name.
    let metadata = opts.revs_info || opts.local_seq;
    let maybe_metadata = opts.conflicts || opts.deleted_conflicts;
    let doc = database.get(id, opts).await?;
    let rev = rev_of(doc.as_str()).unwrap_or("").to_string();
    let untagged = id.starts_with("_local/")
        || metadata
        || (maybe_metadata && has_conflict_lists(doc.as_str()));
    let tagged = !untagged;
    if tagged && crate::base::response::etag_matches(headers, &format!("\"{rev}\"")) {
        return Ok(crate::base::response::not_modified(&format!("\"{rev}\"")));
    }
    let mut text = doc.into_string();
    text.push('\n');
    // A local document is tagged by its content (its `0-N` names nothing
    // a client can ask for).
    let local_tag = id
        .starts_with("_local/")
        .then(|| crate::base::response::content_etag(text.as_bytes()));
    let mut response = raw_json_response(StatusCode::OK, text);
    if tagged {
        set_etag(&mut response, &rev);
    } else if let Some(tag) = local_tag {
        set_etag(&mut response, &tag);
    }
    Ok(response)
}

/// Whether a document's top level has `_conflicts` or `_deleted_conflicts`.
fn has_conflict_lists(doc: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Lists {
        #[serde(rename = "_conflicts")]
        conflicts: Option<serde::de::IgnoredAny>,
        #[serde(rename = "_deleted_conflicts")]
        deleted_conflicts: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_str::<Lists>(doc)
        .is_ok_and(|l| l.conflicts.is_some() || l.deleted_conflicts.is_some())
}

/// `open_revs` as JSON: `[{"ok": doc} | {"missing": rev}, ...]`.
async fn open_revs_json(
    database: &Database,
    id: &str,
    which: OpenRevs,
    opts: GetOptions,
) -> Result<Response, ApiError> {
    let revs = database.open_revs(id, which, opts, false).await?;
    let mut out = String::from("[");
    for (i, r) in revs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match r {
            OpenRev::Ok(doc) => {
                out.push_str("{\"ok\":");
                out.push_str(doc.as_str());
                out.push('}');
            }
            OpenRev::Missing(rev) => out.push_str(&json!({"missing": rev.to_string()}).to_string()),
        }
    }
    out.push_str("]\n");
    Ok(raw_json_response(StatusCode::OK, out))
}

/// The revision a write names: `?rev=`, `If-Match` and the body's `_rev`
/// must agree when more than one is given (CouchDB's reasons otherwise).
fn explicit_rev(
    query: &Query,
    headers: &HeaderMap,
    body_rev: Option<&str>,
) -> Result<Option<String>, ApiError> {
    let query_rev = query.get("rev").map(str::to_string);
    let header_rev = headers
        .get(header::IF_MATCH)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().trim_matches('"').to_string());
    // A malformed If-Match is refused as a malformed `rev` (local `0-N`
    // revisions aside).
    if let Some(h) = &header_rev
        && !h.starts_with("0-")
    {
        parse_rev(h)?;
    }
    if let (Some(q), Some(b)) = (&query_rev, body_rev)
        && q != b
    {
        return Err(ApiError::bad_request(
            "Document rev from request body and query string have different values",
        ));
    }
    let rev = query_rev.or(body_rev.map(str::to_string));
    if let (Some(r), Some(h)) = (&rev, &header_rev)
        && r != h
    {
        return Err(ApiError::bad_request(
            "Document rev and etag have different values",
        ));
    }
    Ok(rev.or(header_rev))
}

fn write_response(status: StatusCode, db: &str, id: &str, rev: &str) -> Response {
    let mut response = json_response(status, &json!({"ok": true, "id": id, "rev": rev}));
    set_location(
        &mut response,
        &format!("/{}/{}", encode_segment(db), encode_segment(id)),
    );
    set_etag(&mut response, rev);
    response
}

/// # PUT /{db}/{docid}
async fn put(
    state: &AppState,
    database: &Database,
    writer: &Writer,
    db: &str,
    id: String,
    query: &Query,
    request: Request,
) -> Result<Response, ApiError> {
    let headers = request.headers().clone();
    if let Some(boundary) = crate::document::multipart::related_boundary(&headers) {
        return put_related(
            state,
            database,
            writer,
            db,
            id,
            query,
            &headers,
            request.into_body(),
            boundary,
        )
        .await;
    }
    let crate::base::body::DocBody {
        map: mut body,
        staged,
    } = crate::base::body::read_doc_body(
        state,
        database,
        request.into_body(),
        id.starts_with("_local/"),
    )
    .await?;
    if id.starts_with("_local/") {
        if let Some(rev) = explicit_rev(query, &headers, body.get("_rev").and_then(Value::as_str))?
        {
            body.insert("_rev".into(), Value::String(rev));
        }
        // A deletion written with PUT is a 200, as CouchDB answers it.
        let deleted = body.get("_deleted") == Some(&Value::Bool(true));
        // The write gate judges local documents too (and, where each
        // document has its readers, names the writer in `_access`), once
        // the id is one.
        store::validate_local_id(&id)?;
        let mut checked = body.clone();
        checked.insert("_id".into(), Value::String(id.clone()));
        let mut input = DocInput::from_json(Value::Object(checked))?;
        writer.check_one(database, &mut input, true).await?;
        if let Some(access) = input.body.get(store::doc_access::ACCESS_FIELD) {
            body.insert(store::doc_access::ACCESS_FIELD.into(), access.clone());
        }
        let rev = database.put_local(&id, Value::Object(body)).await?;
        let status = if deleted {
            StatusCode::OK
        } else {
            StatusCode::CREATED
        };
        return Ok(write_response(status, db, &id, &rev));
    }
    store::validate_doc_id(&id)?;
    if body.get("_rev").is_some_and(|rev| !rev.is_string()) {
        return Err(ApiError::bad_request("Invalid rev format"));
    }
    let rev = explicit_rev(query, &headers, body.get("_rev").and_then(Value::as_str))?;
    match &rev {
        Some(rev) => body.insert("_rev".into(), Value::String(rev.clone())),
        None => body.remove("_rev"),
    };
    body.insert("_id".into(), Value::String(id.clone()));
    let mut doc = parse_doc(state, Value::Object(body))?;
    crate::base::body::DocBody::resolve(staged, &mut doc)?;
    let new_edits = query.get("new_edits") != Some("false");
    writer.check_one(database, &mut doc, new_edits).await?;
    let deleted = doc.deleted;
    if query.get("batch") == Some("ok") {
        return Ok(batch_write(database, doc, new_edits, &id).await);
    }
    let rev = database.put_doc(doc, new_edits).await?;
    let status = if deleted {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok(write_response(status, db, &id, &rev))
}

/// # PUT /{db}/{docid} with a multipart/related body
/// The JSON part first, then the bytes of each `follows` attachment.
#[allow(clippy::too_many_arguments)]
async fn put_related(
    state: &AppState,
    database: &Database,
    writer: &Writer,
    db: &str,
    id: String,
    query: &Query,
    headers: &HeaderMap,
    body: axum::body::Body,
    boundary: String,
) -> Result<Response, ApiError> {
    if id.starts_with("_local/") {
        return Err(ApiError::bad_request(
            "_local documents do not accept attachments.",
        ));
    }
    store::validate_doc_id(&id)?;
    let mut doc = crate::document::multipart::read_related(state, database, body, boundary).await?;
    let body_rev = doc.rev.as_ref().map(ToString::to_string);
    if let Some(rev) = explicit_rev(query, headers, body_rev.as_deref())?
        && doc.revisions.is_none()
    {
        doc.rev = Some(parse_rev(&rev)?);
    }
    doc.id = Some(id.clone());
    let new_edits = query.get("new_edits") != Some("false");
    writer.check_one(database, &mut doc, new_edits).await?;
    let deleted = doc.deleted;
    let rev = database.put_doc(doc, new_edits).await?;
    let status = if deleted {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok(write_response(status, db, &id, &rev))
}

/// # DELETE /{db}/{docid}
async fn delete(
    database: &Database,
    writer: &Writer,
    id: String,
    query: &Query,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    if id.starts_with("_local/") {
        if store::validate_local_id(&id).is_ok() {
            let mut doc = DocInput::from_json(json!({"_id": id, "_deleted": true}))?;
            writer.check_one(database, &mut doc, true).await?;
        }
        let rev = database.delete_local(&id).await?;
        return Ok(crate::base::response::tagged_json_response(
            StatusCode::OK,
            &json!({"ok": true, "id": id, "rev": rev}),
        ));
    }
    // CouchDB opens the document first: 404 `missing` or `deleted` before any rev check.
    database.get(&id, GetOptions::default()).await?;
    let Some(rev) = explicit_rev(query, headers, None)? else {
        return Err(ApiError::Conflict);
    };
    parse_rev(&rev)?;
    let mut doc = DocInput::from_json(json!({"_id": id, "_rev": rev, "_deleted": true}))?;
    writer.check_one(database, &mut doc, true).await?;
    let rev = database.put_doc(doc, true).await?;
    let mut response = json_response(StatusCode::OK, &json!({"ok": true, "id": id, "rev": rev}));
    set_etag(&mut response, &rev);
    Ok(response)
}

/// `batch=ok`: CouchDB queues the write and answers 202 at once, so the
/// write's own failure (a conflict...) never reaches the client; it is
/// logged. Recliner writes before answering, which costs nothing more than
/// CouchDB's queue and loses nothing at a crash.
pub(crate) async fn batch_write(
    database: &Database,
    doc: DocInput,
    new_edits: bool,
    id: &str,
) -> Response {
    if let Err(e) = database.put_doc(doc, new_edits).await {
        tracing::debug!(db = %database.name(), id = %id, error = %e, "batch write failed");
    }
    json_response(StatusCode::ACCEPTED, &json!({"ok": true, "id": id}))
}

/// # COPY /{db}/{docid}
/// Copies a revision (the winner, or `?rev=`) with its attachments to the
/// id in the `Destination` header (`id` or `id?rev=...` to overwrite).
async fn copy(
    database: &Database,
    writer: &Writer,
    db: &str,
    id: &str,
    query: &Query,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let destination = headers
        .get("destination")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| ApiError::bad_request("Destination header is mandatory for COPY."))?;
    if destination.starts_with("http://") || destination.starts_with("https://") {
        return Err(ApiError::bad_request("Destination URL must be relative."));
    }
    let (dest_raw, dest_query) = destination.split_once('?').unwrap_or((destination, ""));
    let dest_id = percent_encoding::percent_decode_str(dest_raw)
        .decode_utf8()
        .map_err(|_| ApiError::bad_request("Destination header is not valid UTF-8"))?
        .into_owned();
    let dest_rev = form_urlencoded::parse(dest_query.as_bytes())
        .find(|(k, _)| k == "rev")
        .map(|(_, v)| v.into_owned());
    let source = database
        .get(
            id,
            GetOptions {
                rev: query.rev("rev")?,
                // The copy refers to the very bytes stored, encoded or not.
                att_encoding_info: true,
                ..Default::default()
            },
        )
        .await?
        .to_value()?;
    let Value::Object(body) = source else {
        return Err(ApiError::Internal(
            "stored document is not an object".into(),
        ));
    };
    // A copy shows its writer the source: only what they may read of it.
    let mut body = if writer.reads_filtered() {
        writer.filter_read(id, body, &[])?
    } else {
        body
    };
    let attachments = body.remove("_attachments");
    body.retain(|k, _| !k.starts_with('_') || k.starts_with("_replication") || k == "_access");
    body.insert("_id".into(), Value::String(dest_id.clone()));
    if let Some(rev) = &dest_rev {
        body.insert("_rev".into(), Value::String(rev.clone()));
    }
    let mut doc = DocInput::from_json(Value::Object(body))?;
    if let Some(Value::Object(atts)) = attachments {
        for (name, meta) in atts {
            let text = |k: &str| meta.get(k).and_then(Value::as_str).map(str::to_string);
            let (Some(content_type), Some(digest), Some(length)) = (
                text("content_type"),
                text("digest"),
                meta.get("length").and_then(Value::as_u64),
            ) else {
                continue;
            };
            doc.attachments.push((
                name,
                AttachmentInput::Staged {
                    content_type,
                    digest,
                    length,
                    revpos: None,
                    encoding: text("encoding"),
                    encoded_length: meta.get("encoded_length").and_then(Value::as_u64),
                    // Read from this database's own record of the bytes.
                    length_counted: true,
                    pin: Default::default(),
                },
            ));
        }
    }
    writer.check_one(database, &mut doc, true).await?;
    let rev = database.put_doc(doc, true).await?;
    Ok(write_response(StatusCode::CREATED, db, &dest_id, &rev))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rev_is_found_after_any_id() {
        assert_eq!(rev_of(r#"{"_id":"x","_rev":"1-a","v":1}"#), Some("1-a"));
        assert_eq!(
            rev_of(r#"{"_id":"\"_rev\":\"evil","_rev":"2-b"}"#),
            Some("2-b")
        );
    }
}
