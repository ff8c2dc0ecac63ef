//! `_rewrite`: a design document's `rewrites` turn a request into another
//! request below the database, as CouchDB 3's `chttpd_rewrite` does.
//! Either an array of rules (`rules`) or a JavaScript function of the
//! request object, which answers a path, `{path, query, method, headers,
//! body}`, or `{code, headers, body}` to answer at once.
//!
//! The new request goes back through the whole API, authentication and
//! the access gates included: a rewrite reaches nothing its caller could
//! not ask for directly. The nested depth rides on the request
//! (`RewriteDepth`), so a rewrite into `_rewrite` again stops at
//! `rewrite_limit` with CouchDB's 400, and separate requests never add up.

mod rules;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::Response;
use serde_json::{Map, Value};
use store::Database;

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::params::Query;
use crate::design::RequestParts;

/// How many rewrites led to this request (none for a client's own).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RewriteDepth(u32);

/// # ANY /{db}/_design/{ddoc}/_rewrite[/{path}]
pub(crate) async fn rewrite(
    state: AppState,
    database: Database,
    ddoc: String,
    rest: Vec<String>,
    query: Query,
    request: Request,
) -> Result<Response, ApiError> {
    let doc = crate::design::load(&database, &ddoc).await?;
    let depth = request
        .extensions()
        .get::<RewriteDepth>()
        .copied()
        .unwrap_or_default();
    if depth.0 >= state.config.http.rewrite_limit {
        return Err(ApiError::bad_request("Exceeded rewrite recursion limit"));
    }
    let prefix = format!(
        "/{}/_design/{}",
        rules::url_encode(database.name()),
        rules::url_encode(&ddoc)
    );
    match doc.get("rewrites") {
        Some(Value::Array(list)) => {
            // The query string is read first, then every rule, as CouchDB.
            let bindings = rules::query_bindings(query.pairs())?;
            let read = rules::read(list, state.config.http.secure_rewrites)?;
            // CouchDB's path parts: decoded, empty segments dropped.
            let segments: Vec<String> = rest.into_iter().filter(|s| !s.is_empty()).collect();
            let method = request.method().as_str().to_string();
            let Some(target) = rules::apply(&read, &method, &segments, &bindings)? else {
                return Err(ApiError::not_found("missing"));
            };
            let (mut parts, body) = request.into_parts();
            parts.uri = uri_of(&rules::normalize(&format!("{prefix}/{target}")))?;
            redispatch(state, parts, body, depth).await
        }
        Some(Value::String(_)) => {
            let design = crate::design::runnable_doc(&database, &doc);
            by_function(state, database, design, prefix, query, request, depth).await
        }
        _ => Err(invalid_path()),
    }
}

/// CouchDB's 404 when there is nothing to rewrite with.
fn invalid_path() -> ApiError {
    ApiError::Status {
        status: StatusCode::NOT_FOUND,
        error: "rewrite_error",
        reason: "Invalid path.".into(),
    }
}

fn rewrite_error(reason: impl Into<String>) -> ApiError {
    ApiError::Status {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        error: "rewrite_error",
        reason: reason.into(),
    }
}

/// The function form: the function sees the request object (without
/// `info`, `uuid`, `id` and `form`, as in CouchDB) and decides.
async fn by_function(
    state: AppState,
    database: Database,
    design: design_functions::DesignDoc,
    prefix: String,
    query: Query,
    request: Request,
    depth: RewriteDepth,
) -> Result<Response, ApiError> {
    let user = crate::base::auth::user_of(&request);
    let (mut parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, crate::design::render::MAX_BODY)
        .await
        .map_err(|_| ApiError::RequestTooLarge)?;
    let text = (!bytes.is_empty()).then(|| String::from_utf8_lossy(&bytes).into_owned());
    let req = crate::design::rewrite_request_object(RequestParts {
        database: &database,
        user: &user,
        method: &parts.method,
        path: parts.uri.path(),
        query: &query,
        headers: &parts.headers,
        body: text,
        id: None,
    })
    .await?;
    let answer = state
        .validators
        .engine()
        .rewrite(design, req)
        .await
        .map_err(crate::base::error::script_error)?;
    let Some(answer) = answer else {
        return Err(invalid_path());
    };
    let Value::Object(answer) = answer else {
        return Err(rewrite_error("bad rewrite"));
    };
    check_answer(&answer)?;
    let text_of = |key: &str| answer.get(key).and_then(Value::as_str);
    let new_body = text_of("body").map_or(bytes, |b| bytes::Bytes::from(b.to_string()));
    let given_headers = answer.get("headers").and_then(Value::as_object);
    if let Some(code) = answer.get("code").and_then(Value::as_u64) {
        return Ok(answer_now(code, given_headers, new_body));
    }
    let Some(path) = text_of("path") else {
        return Err(rewrite_error("Rewrite result must produce a new path."));
    };
    if let Some(method) = text_of("method") {
        parts.method =
            Method::from_bytes(method.as_bytes()).map_err(|_| rewrite_error("bad method"))?;
    }
    for (name, value) in given_headers.into_iter().flatten() {
        let (Ok(name), Some(Ok(value))) = (
            header::HeaderName::from_bytes(name.as_bytes()),
            value.as_str().map(HeaderValue::from_str),
        ) else {
            continue;
        };
        parts.headers.insert(name, value);
    }
    // The body is whole now: its length frames it.
    parts.headers.remove(header::TRANSFER_ENCODING);
    parts
        .headers
        .insert(header::CONTENT_LENGTH, HeaderValue::from(new_body.len()));
    let pairs: Vec<(String, String)> = match answer.get("query").and_then(Value::as_object) {
        Some(given) => given
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
            .collect(),
        None => query.pairs().to_vec(),
    };
    let mut target = rules::normalize(&format!("{prefix}/{path}"));
    if !pairs.is_empty() {
        let encoded: Vec<String> = pairs
            .iter()
            .map(|(k, v)| format!("{}={}", rules::quote_plus(k), rules::quote_plus(v)))
            .collect();
        target.push('?');
        target.push_str(&encoded.join("&"));
    }
    parts.uri = uri_of(&target)?;
    redispatch(state, parts, Body::from(new_body), depth).await
}

/// CouchDB's checks of a function's answer, in the answer's order.
fn check_answer(answer: &Map<String, Value>) -> Result<(), ApiError> {
    for (key, value) in answer {
        match (key.as_str(), value) {
            ("method" | "path" | "body", Value::String(_)) => {}
            ("method" | "path" | "body", _) => return Err(rewrite_error(format!("bad {key}"))),
            ("headers" | "query", Value::Object(members)) => {
                if let Some((k, v)) = members.iter().find(|(_, v)| !v.is_string()) {
                    return Err(rewrite_error(format!(
                        "object key/value must be strings <<\"{k}\">>={}",
                        erlang_term(v)
                    )));
                }
            }
            ("headers" | "query", _) => return Err(rewrite_error(format!("bad {key}"))),
            ("code", Value::Number(n)) if n.as_u64().is_some_and(|c| (200..600).contains(&c)) => {}
            ("code", _) => return Err(rewrite_error("bad code")),
            _ => {}
        }
    }
    Ok(())
}

/// A JSON value as CouchDB's reasons print its Erlang form.
fn erlang_term(value: &Value) -> String {
    match value {
        Value::String(s) => format!("<<\"{s}\">>"),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(erlang_term).collect::<Vec<_>>().join(",")
        ),
        Value::Object(members) => format!(
            "{{[{}]}}",
            members
                .iter()
                .map(|(k, v)| format!("{{<<\"{k}\">>,{}}}", erlang_term(v)))
                .collect::<Vec<_>>()
                .join(",")
        ),
        other => ejson::to_string(other),
    }
}

/// `{code, headers, body}`: the function answers itself, with no headers
/// but its own (the request's body when it gives none, as in CouchDB).
fn answer_now(code: u64, headers: Option<&Map<String, Value>>, body: bytes::Bytes) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = u16::try_from(code)
        .ok()
        .and_then(|c| StatusCode::from_u16(c).ok())
        .unwrap_or(StatusCode::OK);
    response.extensions_mut().insert(crate::RenderedByFunction);
    for (name, value) in headers.into_iter().flatten() {
        if let Some((name, value)) = crate::design::render::function_header(name, value) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

/// A rewritten path as a URI: what a function wrote may hold characters a
/// request line cannot, which are percent-encoded.
fn uri_of(target: &str) -> Result<Uri, ApiError> {
    let mut text = String::with_capacity(target.len());
    for b in target.bytes() {
        if b.is_ascii_graphic() && !b"\"<>\\^`{|}#".contains(&b) {
            text.push(char::from(b));
        } else {
            text.push_str(&format!("%{b:02X}"));
        }
    }
    text.parse()
        .map_err(|_| ApiError::bad_request("the rewritten path is not a valid URL"))
}

/// Serves the rewritten request with the whole API, as a client's request
/// is served: authentication and access gates again, on the new path.
async fn redispatch(
    state: AppState,
    mut parts: axum::http::request::Parts,
    body: Body,
    depth: RewriteDepth,
) -> Result<Response, ApiError> {
    tracing::debug!(target = %parts.uri, "rewrite");
    parts.extensions.insert(RewriteDepth(depth.0 + 1));
    // Who asks is the caller, as they were authenticated: a rewrite is
    // not a login (headers it set that would authenticate are dropped by
    // authentication, which takes this caller instead of reading them).
    let caller = parts
        .extensions
        .remove::<auth::UserCtx>()
        .unwrap_or_default();
    parts
        .extensions
        .insert(crate::base::auth::AuthenticatedCaller(caller));
    let mut router = crate::router(state);
    let request = Request::from_parts(parts, body);
    // A task of its own: a chain of rewrites is a chain of tasks, not of
    // nested polls on one stack. It ends with the request that waits on it.
    let task = AbortOnDrop(tokio::spawn(async move {
        match tower_service::Service::call(&mut router, request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }));
    task.join()
        .await
        .map_err(|e| ApiError::Internal(format!("a rewritten request's task failed: {e}")))
}

/// A task that stops when whoever waits for it goes away.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> AbortOnDrop<T> {
    async fn join(mut self) -> Result<T, tokio::task::JoinError> {
        (&mut self.0).await
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
