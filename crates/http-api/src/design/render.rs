//! `_show`, `_list` and `_update` functions: a design document's function
//! renders a document (or changes one, or a view's rows as they are read)
//! and answers with its own response object (`body`, `json` or `base64`,
//! `code`, `headers`), as CouchDB runs them.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, Method, StatusCode};
use axum::response::Response;
use base64::Engine;
use design_functions::{ListChunk, ListIo};
use serde_json::Value;
use store::{Database, GetOptions, StoreError};
use tokio::sync::mpsc;

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::params::Query;
use crate::base::streamed::{BodyWriter, Gone};
use crate::design::{RequestParts, Section};

/// Largest request body a show or update function receives.
pub(crate) const MAX_BODY: usize = 64 << 20;

/// # GET|POST /{db}/_design/{ddoc}/_show/{name}[/{docid}]
pub(crate) async fn show(
    state: AppState,
    database: Database,
    ddoc: String,
    rest: Vec<String>,
    query: Query,
    request: Request,
) -> Result<Response, ApiError> {
    // Any method runs the function (`req.method` tells it which), as in CouchDB.
    let (name, id) = name_and_id(rest);
    if name.is_empty() {
        return Err(invalid_path(&database, &ddoc, "show_error").await);
    }
    let design = crate::design::runnable(&database, &ddoc, Section::Shows, &name).await?;
    let doc = match &id {
        Some(id) => stored(&database, id).await?,
        None => "null".to_string(),
    };
    let user = crate::base::auth::user_of(&request);
    let (headers, req) = request_for(&database, &user, &query, id.as_deref(), request).await?;
    // As CouchDB: the answer is tagged by the design document, the
    // document, what the client accepts, who asks and what it asks.
    let tag = serde_json::json!([
        design.rev,
        ejson::from_stored(&doc)
            .ok()
            .and_then(|d| d.get("_rev").cloned()),
        headers
            .headers
            .get(axum::http::header::ACCEPT)
            .and_then(|v| v.to_str().ok()),
        user.name,
        user.roles,
        query.pairs(),
    ]);
    let etag = format!(
        "\"{}\"",
        crate::base::response::content_etag(tag.to_string().as_bytes())
    );
    if crate::base::response::etag_matches(&headers.headers, &etag) {
        return Ok(crate::base::response::not_modified(&etag));
    }
    let answer = state
        .validators
        .engine()
        .show(design, &name, doc, req)
        .await
        .map_err(crate::base::error::script_error)?;
    let mut response = respond(&answer, StatusCode::OK, &[])?;
    // CouchDB's tag and `Vary` replace any the function set: the answer
    // depends on the Accept header.
    if let Ok(value) = HeaderValue::from_str(&etag) {
        response
            .headers_mut()
            .insert(axum::http::header::ETAG, value);
    }
    response
        .headers_mut()
        .insert(axum::http::header::VARY, HeaderValue::from_static("Accept"));
    Ok(response)
}

/// # POST|PUT /{db}/_design/{ddoc}/_update/{name}[/{docid}]
pub(crate) async fn update(
    state: AppState,
    database: Database,
    ddoc: String,
    rest: Vec<String>,
    query: Query,
    request: Request,
) -> Result<Response, ApiError> {
    // The function refuses GET itself (CouchDB's 405 reason comes from
    // it); any other method runs it.
    let (name, id) = name_and_id(rest);
    if name.is_empty() {
        return Err(invalid_path(&database, &ddoc, "update_error").await);
    }
    let design = crate::design::runnable(&database, &ddoc, Section::Updates, &name).await?;
    let doc = match &id {
        Some(id) => stored(&database, id).await?,
        None => "null".to_string(),
    };
    let user = crate::base::auth::user_of(&request);
    // The gate of this caller, with the handle it opens for them.
    let (database, writer) = state.open_to_write(database.name(), &user).await?;
    let (_, req) = request_for(&database, &user, &query, id.as_deref(), request).await?;
    let (new_doc, answer) = state
        .validators
        .engine()
        .update(design, &name, doc, req)
        .await
        .map_err(crate::base::error::script_error)?;
    if new_doc.is_null() {
        return respond(&answer, StatusCode::OK, &[]);
    }
    let mut input = crate::base::doc_input::parse_doc(&state, new_doc)?;
    if input.id.is_none() {
        return Err(ApiError::Invalid {
            error: "illegal_docid",
            reason: "Document id must not be empty".into(),
        });
    }
    writer.check_one(&database, &mut input, true).await?;
    let saved_id = input.id.clone().unwrap_or_default();
    let rev = database.put_doc(input, true).await?;
    // The id as CouchDB writes it in this header: percent-encoded but
    // for letters, digits and `_.-:`.
    let encoded_id = percent_encoding::utf8_percent_encode(&saved_id, COUCH_ID_KEPT).to_string();
    respond(
        &answer,
        StatusCode::CREATED,
        &[("x-couch-id", &encoded_id), ("x-couch-update-newrev", &rev)],
    )
}

/// What `X-Couch-Id` leaves as it is.
const COUCH_ID_KEPT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'_')
    .remove(b'.')
    .remove(b'-')
    .remove(b':');

/// # GET|POST /{db}/_design/{ddoc}/_list/{list}/[{other ddoc}/]{view}
/// A list function over a view's rows (or `_all_docs`'), with the view's
/// query parameters.
pub(crate) async fn list(
    state: AppState,
    database: Database,
    ddoc: String,
    rest: Vec<String>,
    query: Query,
    request: Request,
) -> Result<Response, ApiError> {
    let method = request.method().clone();
    // OPTIONS (without CORS, which answers it before) reads as GET does,
    // as in CouchDB.
    if ![Method::GET, Method::HEAD, Method::POST, Method::OPTIONS].contains(&method) {
        return Err(ApiError::MethodNotAllowed("GET,POST,HEAD"));
    }
    let (name, view_ddoc, view) = match rest.as_slice() {
        [name, view] if !name.is_empty() && !view.is_empty() => {
            (name.clone(), ddoc.clone(), view.clone())
        }
        [name, other, view] if !name.is_empty() && !other.is_empty() && !view.is_empty() => {
            (name.clone(), other.clone(), view.clone())
        }
        _ => return Err(invalid_path(&database, &ddoc, "list_error").await),
    };
    let design = crate::design::runnable(&database, &ddoc, Section::Lists, &name).await?;
    let user = crate::base::auth::user_of(&request);
    let path = path_as_sent(&request);
    let (headers, body) = parts(request).await?;
    // A POST's body is the view's parameters (`keys`...), read as
    // CouchDB reads it: JSON, an object, of that content type.
    let params = if method == Method::POST {
        crate::base::json_body::require_json_content_type(&headers.headers)?;
        let text = body.clone().unwrap_or_default();
        crate::base::json_body::read_json_object(Body::from(text), &state.config).await?
    } else {
        Default::default()
    };
    let (head, rows) = if view == "_all_docs" {
        all_docs_rows(&state, &database, &query, method == Method::POST, &body).await?
    } else {
        view_rows(&state, &database, &view_ddoc, &view, &query, &params).await?
    };
    let head = ejson::to_string(&Value::Object(head));
    let req = crate::design::request_object(RequestParts {
        database: &database,
        user: &user,
        method: &method,
        path: &path,
        query: &query,
        headers: &headers.headers,
        body,
        id: None,
    })
    .await?;
    let (rows_in, rows_out) = mpsc::channel::<String>(LIST_ROWS_IN_FLIGHT);
    let (chunks_out, mut chunks) = mpsc::channel::<ListChunk>(2);
    let feeder = tokio::spawn(feed_rows(rows, database.clone(), rows_in));
    let engine = state.validators.engine().clone();
    let mut run = tokio::spawn(async move {
        engine
            .list(design, &name, head, req, ListIo::new(rows_out, chunks_out))
            .await
    });
    // As CouchDB, the answer begins with the first text the function
    // sends: until then each head it gives (`start()`, before or after
    // reading rows) sets the status and headers.
    let mut start = Value::Null;
    let mut ended = false;
    let text = loop {
        match chunks.recv().await {
            Some(ListChunk::Start(head, text)) => {
                start = head;
                if !text.is_empty() {
                    break text;
                }
            }
            Some(ListChunk::Text(text)) if !text.is_empty() => break text,
            Some(ListChunk::Text(_)) => {}
            None => {
                let outcome = (&mut run).await.map_err(|e| {
                    ApiError::Internal(format!("a list function's task failed: {e}"))
                })?;
                match outcome {
                    Err(e) => return Err(crate::base::error::script_error(e)),
                    Ok(tail) => {
                        ended = true;
                        break tail;
                    }
                }
            }
        }
    };
    let mut answer = serde_json::json!({ "body": "" });
    if let Some(code) = start.get("code") {
        answer["code"] = code.clone();
    }
    // A list's answer is JSON unless the function says otherwise, as CouchDB's.
    let mut headers_out = match start.get("headers") {
        Some(Value::Object(given)) => given.clone(),
        _ => serde_json::Map::new(),
    };
    if !headers_out
        .keys()
        .any(|k| k.eq_ignore_ascii_case("content-type"))
    {
        headers_out.insert(
            "Content-Type".into(),
            Value::String("application/json".into()),
        );
    }
    answer["headers"] = Value::Object(headers_out);
    let mut response = respond(&answer, StatusCode::OK, &[])?;
    if ended {
        // The function ended before it sent any text: its tail is the
        // whole answer, unless reading the rows failed under it.
        if let Ok(Err(reason)) = feeder.await {
            return Err(ApiError::Internal(reason));
        }
        *response.body_mut() = Body::from(text);
        return Ok(response);
    }
    let (mut writer, streamed) = BodyWriter::channel();
    *response.body_mut() = streamed;
    tokio::spawn(async move {
        let written = async {
            writer.write(text.as_bytes()).await?;
            writer.flush().await?;
            while let Some(chunk) = chunks.recv().await {
                let (ListChunk::Text(text) | ListChunk::Start(_, text)) = chunk;
                writer.write(text.as_bytes()).await?;
                writer.flush().await?;
            }
            Ok::<(), Gone>(())
        }
        .await;
        if written.is_err() {
            return;
        }
        let tail = match run.await {
            Ok(Ok(tail)) => tail,
            Ok(Err(e)) => {
                // After the head, CouchDB ends the body with the error
                // object, on a line of its own.
                let (status, error, reason) = crate::base::error::script_error(e).error_info();
                let text =
                    serde_json::json!({"code": status.as_u16(), "error": error, "reason": reason});
                if writer.write(format!("\n{text}\n").as_bytes()).await.is_ok() {
                    let _ = writer.finish().await;
                }
                return;
            }
            Err(e) => {
                return writer
                    .fail(format!("the list function's task failed: {e}"))
                    .await;
            }
        };
        if let Ok(Err(reason)) = feeder.await {
            return writer.fail(reason).await;
        }
        if writer.write(tail.as_bytes()).await.is_ok() {
            let _ = writer.finish().await;
        }
    });
    Ok(response)
}

/// Where a list function's rows come from: a view read page by page, or
/// rows already read.
enum Rows {
    View(Box<crate::design::views::OpenedQuery>),
    Read(Vec<Value>),
}

/// A view's head and rows for a list: the view of `view_ddoc` (the
/// list's own design document, or another), with CouchDB's 404s.
async fn view_rows(
    state: &AppState,
    database: &Database,
    view_ddoc: &str,
    view: &str,
    query: &Query,
    params: &serde_json::Map<String, Value>,
) -> Result<(serde_json::Map<String, Value>, Rows), ApiError> {
    let view_doc = crate::design::load(database, view_ddoc).await?;
    let group = design_functions::views::ViewGroup::of(database, &view_doc)
        .map_err(|_| ApiError::not_found("missing_named_view"))?;
    if !group.has_view(view) {
        return Err(ApiError::not_found("missing_named_view"));
    }
    let index = crate::design::views::open_index(state, database, &group, query).await?;
    let opened = crate::design::views::open_query(
        state,
        database,
        &group,
        &index,
        view,
        crate::design::views::Asked {
            query,
            body: params,
            partition: None,
        },
    )
    .await?;
    Ok((opened.head(), Rows::View(Box::new(opened))))
}

/// `_all_docs`' head and rows for a list (`_list/name/_all_docs`), read
/// by the `_all_docs` handler itself so that its parameters, `keys` and
/// errors are CouchDB's. Its rows are read whole before the function runs.
async fn all_docs_rows(
    state: &AppState,
    database: &Database,
    query: &Query,
    post: bool,
    body: &Option<String>,
) -> Result<(serde_json::Map<String, Value>, Rows), ApiError> {
    let mut asked = Request::builder().method(if post { Method::POST } else { Method::GET });
    if post {
        asked = asked.header(axum::http::header::CONTENT_TYPE, "application/json");
    }
    let asked = asked
        .body(Body::from(body.clone().unwrap_or_default()))
        .map_err(|e| ApiError::Internal(format!("an _all_docs request for a list: {e}")))?;
    let answer = crate::database::all_docs::all_docs(
        state.clone(),
        database.name().to_string(),
        query.clone(),
        asked,
    )
    .await?;
    // Held whole and then as a tree: bounded as any JSON body held whole.
    let most = usize::try_from(state.config.max_json_body_size).unwrap_or(usize::MAX);
    let bytes = axum::body::to_bytes(answer.into_body(), most)
        .await
        .map_err(|_| {
            ApiError::bad_request(format!(
                "_all_docs for a list is larger than max_json_body_size ({most} bytes): \
                 ask for fewer rows (limit, a key range, keys)"
            ))
        })?;
    let Ok(Value::Object(mut head)) = ejson::from_slice(&bytes) else {
        return Err(ApiError::Internal(
            "_all_docs for a list is not an object".into(),
        ));
    };
    let rows = match head.remove("rows") {
        Some(Value::Array(rows)) => rows.into_iter().map(list_row).collect(),
        _ => Vec::new(),
    };
    Ok((head, Rows::Read(rows)))
}

/// An `_all_docs` row as a list function reads it: a key that names no
/// document comes as CouchDB hands it, `{"id": "error", "key", "value":
/// "not_found"}`.
fn list_row(row: Value) -> Value {
    match (row.get("id"), row.get("error")) {
        (None, Some(error)) => serde_json::json!({
            "id": "error",
            "key": row.get("key").cloned().unwrap_or(Value::Null),
            "value": error,
        }),
        _ => row,
    }
}

/// Rows a list function may hold unread.
const LIST_ROWS_IN_FLIGHT: usize = 64;

/// Hands a view's rows to a list function as it reads them; stops when it
/// stops reading. A failure to read them fails the answer.
async fn feed_rows(
    source: Rows,
    database: Database,
    rows: mpsc::Sender<String>,
) -> Result<(), String> {
    let mut opened = match source {
        Rows::View(opened) => opened,
        Rows::Read(read) => {
            for row in read {
                if rows.send(ejson::to_string(&row)).await.is_err() {
                    break;
                }
            }
            return Ok(());
        }
    };
    loop {
        let page = opened.next_rows(&database).await.map_err(|e| {
            tracing::warn!(error = ?e, "reading a view for a list function failed");
            format!("reading the view failed: {e:?}")
        })?;
        let Some(page) = page else { return Ok(()) };
        for row in page {
            if rows.send(ejson::to_string(&row)).await.is_err() {
                return Ok(());
            }
        }
    }
}

/// The request's headers and CouchDB's request object for a function
/// (its body read, bounded).
async fn request_for(
    database: &Database,
    user: &auth::UserCtx,
    query: &Query,
    id: Option<&str>,
    request: Request,
) -> Result<(axum::http::request::Parts, String), ApiError> {
    let method = request.method().clone();
    let path = path_as_sent(&request);
    let (headers, body) = parts(request).await?;
    let req = crate::design::request_object(RequestParts {
        database,
        user,
        method: &method,
        path: &path,
        query,
        headers: &headers.headers,
        body,
        id,
    })
    .await?;
    Ok((headers, req))
}

/// The request's path and query string as the client sent them: the
/// function's `req.path` holds every segment (the document id's too),
/// `req.raw_path` the text itself.
fn path_as_sent(request: &Request) -> String {
    request.uri().path_and_query().map_or_else(
        || request.uri().path().to_string(),
        |pq| pq.as_str().to_string(),
    )
}

/// CouchDB's 404 for a show, list or update path that names no function
/// (`_show/`, `_list/name`): after the design document is found.
async fn invalid_path(database: &Database, ddoc: &str, error: &'static str) -> ApiError {
    match crate::design::load(database, ddoc).await {
        Err(missing) => missing,
        Ok(_) => ApiError::Status {
            status: StatusCode::NOT_FOUND,
            error,
            reason: "Invalid path.".into(),
        },
    }
}

/// `name/doc/id` → the function's name and the document id (which may
/// hold slashes).
fn name_and_id(rest: Vec<String>) -> (String, Option<String>) {
    let mut rest = rest.into_iter();
    let name = rest.next().unwrap_or_default();
    let id = rest.collect::<Vec<String>>().join("/");
    // A trailing slash names no document, as in CouchDB.
    (name, (!id.is_empty()).then_some(id))
}

/// The stored document, or `null` for one that is missing (the function decides).
async fn stored(database: &Database, id: &str) -> Result<String, ApiError> {
    match database.get(id, GetOptions::default()).await {
        Ok(doc) => Ok(doc.into_string()),
        Err(StoreError::DocNotFound(_)) => Ok("null".into()),
        Err(e) => Err(e.into()),
    }
}

/// The request's headers and body text (bounded).
async fn parts(request: Request) -> Result<(axum::http::request::Parts, Option<String>), ApiError> {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_BODY)
        .await
        .map_err(|_| ApiError::RequestTooLarge)?;
    let text = (!bytes.is_empty()).then(|| String::from_utf8_lossy(&bytes).into_owned());
    Ok((parts, text))
}

/// A function's response object as the HTTP answer.
fn respond(
    answer: &Value,
    default: StatusCode,
    extra: &[(&str, &str)],
) -> Result<Response, ApiError> {
    let status = answer
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .and_then(|c| StatusCode::from_u16(c).ok())
        .unwrap_or(default);
    let (body, content_type): (Vec<u8>, &str) = if let Some(json) = answer.get("json") {
        (ejson::to_vec(json), "application/json")
    } else if let Some(encoded) = answer.get("base64").and_then(Value::as_str) {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|_| ApiError::Failed {
                error: "render_error",
                reason: "the response's base64 is not valid".into(),
            })?;
        (bytes, "application/binary")
    } else if let Some(body) = answer.get("body") {
        let text = match body {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        };
        (text.into_bytes(), "text/html; charset=utf-8")
    } else {
        // No body at all: CouchDB's default type, for an empty body.
        (Vec::new(), "application/json")
    };
    let json = answer.get("json").is_some();
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    if !json {
        // CouchDB adds nothing to a body the function wrote.
        response.extensions_mut().insert(crate::RenderedByFunction);
    }
    let headers = response.headers_mut();
    headers.insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static(content_type),
    );
    // Every answer is sandboxed by the content policy layer
    // (`base::content_policy`); a policy the function adds is kept beside
    // it, so it can only narrow the sandbox.
    if let Some(Value::Object(given)) = answer.get("headers") {
        for (name, value) in given {
            if let Some((name, value)) = function_header(name, value) {
                if name == axum::http::header::CONTENT_SECURITY_POLICY {
                    headers.append(name, value);
                } else {
                    headers.insert(name, value);
                }
            }
        }
    }
    for (name, value) in extra {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            headers.insert(name, value);
        }
    }
    Ok(response)
}

/// Headers that frame the HTTP message or manage the connection: the
/// server sets them from the body it actually sends, never a function
/// (a `Content-Length` the body does not have leaves the client waiting,
/// and the connection's next request unanswered).
const FRAMING_HEADERS: &[&str] = &[
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "trailer",
    "te",
    "proxy-connection",
];

/// One header a function gave, as it may go on the answer: `None` for a
/// framing header, a name or value no HTTP message can carry (spaces or
/// line breaks in a name, a line break in a value), or a value that is
/// not a string.
pub(crate) fn function_header(name: &str, value: &Value) -> Option<(HeaderName, HeaderValue)> {
    if FRAMING_HEADERS
        .iter()
        .any(|framing| name.eq_ignore_ascii_case(framing))
    {
        tracing::debug!(
            header = name,
            "a design function's framing header is ignored"
        );
        return None;
    }
    let name = HeaderName::from_bytes(name.as_bytes()).ok()?;
    let value = HeaderValue::from_str(value.as_str()?).ok()?;
    Some((name, value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn functions_cannot_frame_the_answer_nor_break_its_header() {
        for framing in [
            "Content-Length",
            "transfer-encoding",
            "CONNECTION",
            "Keep-Alive",
            "Upgrade",
            "Trailer",
            "TE",
            "Proxy-Connection",
        ] {
            assert!(function_header(framing, &json!("5")).is_none(), "{framing}");
        }
        for bad_name in ["X Space", "X-Line\r\nInjected: yes", "", "X-Colon:"] {
            assert!(
                function_header(bad_name, &json!("v")).is_none(),
                "{bad_name:?}"
            );
        }
        assert!(function_header("X-Split", &json!("a\r\nInjected: yes")).is_none());
        assert!(function_header("X-Line", &json!("a\nb")).is_none());
        assert!(function_header("X-Number", &json!(5)).is_none());
        let (name, value) = function_header("X-Kept", &json!("yes")).unwrap();
        assert_eq!((name.as_str(), value.to_str().unwrap()), ("x-kept", "yes"));
    }

    #[test]
    fn new_ids_are_written_as_couchdb_writes_them() {
        let encode =
            |id: &str| percent_encoding::utf8_percent_encode(id, COUCH_ID_KEPT).to_string();
        assert_eq!(encode("a/b c"), "a%2Fb%20c");
        assert_eq!(encode("_design/x.y-z:1"), "_design%2Fx.y-z:1");
        assert_eq!(encode("é~"), "%C3%A9%7E");
    }

    #[test]
    fn a_missing_keys_row_reaches_a_list_as_couchdb_hands_it() {
        assert_eq!(
            list_row(json!({"key": "zz", "error": "not_found"})),
            json!({"id": "error", "key": "zz", "value": "not_found"})
        );
        let found = json!({"id": "a", "key": "a", "value": {"rev": "1-x"}});
        assert_eq!(list_row(found.clone()), found);
    }

    #[test]
    fn an_answer_without_a_body_is_empty_json() {
        let response = respond(&json!({"code": 302}), StatusCode::OK, &[]).unwrap();
        assert_eq!(response.status(), StatusCode::FOUND);
        let headers = response.headers();
        assert_eq!(headers.get("content-type").unwrap(), "application/json");
    }

    #[test]
    fn an_answer_is_framed_by_its_own_body() {
        let answer = json!({
            "body": "hello world",
            "headers": {"Transfer-Encoding": "chunked", "Content-Length": "5",
                        "Content-Type": "text/plain", "X-Bad\nName": "v", "X-Bad-Value": "a\r\nb: c"},
        });
        let response = respond(&answer, StatusCode::OK, &[]).unwrap();
        let headers = response.headers();
        assert!(headers.get("transfer-encoding").is_none());
        assert!(headers.get("content-length").is_none());
        assert!(headers.get("x-bad-value").is_none());
        assert_eq!(headers.get("content-type").unwrap(), "text/plain");
    }
}
