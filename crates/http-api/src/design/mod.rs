//! Design documents' functions over HTTP: finding them with CouchDB's
//! reasons when they are missing, the request object functions receive,
//! and what a function sees of the database. Filters, views, shows,
//! lists, updates and rewrites run (`changes`, `views`, `render`,
//! `rewrite`); a request for an unknown kind of function is answered as
//! CouchDB answers when the design document is missing (404), and with
//! 501 when it exists.

pub(crate) mod clouseau;
pub(crate) mod render;
pub(crate) mod rewrite;
pub(crate) mod search;
pub(crate) mod views;

use serde_json::Value;
use store::{Database, GetOptions, StoreError};

use crate::base::error::ApiError;

/// The sections of a design document that name functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Section {
    Views,
    Shows,
    Lists,
    Updates,
    Filters,
}

impl Section {
    /// The section a `/_design/x/_kind/...` path segment names.
    pub(crate) fn of_path(segment: &str) -> Option<Section> {
        Some(match segment {
            "_view" => Section::Views,
            "_show" => Section::Shows,
            "_list" => Section::Lists,
            "_update" => Section::Updates,
            _ => return None,
        })
    }

    fn key(self) -> &'static str {
        match self {
            Section::Views => "views",
            Section::Shows => "shows",
            Section::Lists => "lists",
            Section::Updates => "updates",
            Section::Filters => "filters",
        }
    }
}

/// The design document `_design/{ddoc}`, or CouchDB's 404 `missing`.
/// Read whole: a design document serves every reader of the database (who
/// may run it was decided by the route's rule before any handler ran).
pub(crate) async fn load(database: &Database, ddoc: &str) -> Result<Value, ApiError> {
    let id = format!("_design/{ddoc}");
    let doc = database
        .unscoped()
        .get(&id, GetOptions::default())
        .await
        .map_err(|e| match e {
            StoreError::DocNotFound(_) => ApiError::not_found("missing"),
            other => other.into(),
        })?;
    Ok(doc.to_value()?)
}

/// Checks that `ddoc` defines `name` in `section`, with CouchDB's reasons
/// when it does not; then answers 501, as the function cannot run yet.
pub(crate) async fn function_not_runnable(
    database: &Database,
    ddoc: &str,
    section: Section,
    name: &str,
) -> ApiError {
    match find(database, ddoc, section, name).await {
        Err(missing) => missing,
        Ok(()) => ApiError::NotImplemented(format!(
            "design document functions do not run yet ({}/{ddoc}/{name})",
            section.key()
        )),
    }
}

async fn find(
    database: &Database,
    ddoc: &str,
    section: Section,
    name: &str,
) -> Result<(), ApiError> {
    let doc = load(database, ddoc).await?;
    let Some(functions) = doc.get(section.key()).and_then(Value::as_object) else {
        return Err(ApiError::not_found(format!(
            "missing json key: {}",
            section.key()
        )));
    };
    if functions.contains_key(name) {
        Ok(())
    } else if section == Section::Views {
        Err(ApiError::not_found("missing_named_view"))
    } else {
        Err(ApiError::not_found(format!("missing json key: {name}")))
    }
}

/// The design document `_design/{ddoc}` when it defines `name` in
/// `section`, ready to run; CouchDB's 404 when it does not.
pub(crate) async fn runnable(
    database: &Database,
    ddoc: &str,
    section: Section,
    name: &str,
) -> Result<design_functions::DesignDoc, ApiError> {
    let doc = load(database, ddoc).await?;
    let Some(functions) = doc.get(section.key()).and_then(Value::as_object) else {
        return Err(ApiError::not_found(format!(
            "missing json key: {}",
            section.key()
        )));
    };
    if !functions.contains_key(name) {
        return Err(ApiError::not_found(format!("missing json key: {name}")));
    }
    Ok(runnable_doc(database, &doc))
}

/// A loaded design document, ready to run its functions.
pub(crate) fn runnable_doc(database: &Database, doc: &Value) -> design_functions::DesignDoc {
    let text = |k: &str| doc.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    design_functions::DesignDoc {
        db: database.name().to_string(),
        id: text("_id"),
        rev: text("_rev"),
        json: ejson::to_string(doc).into(),
    }
}

/// What CouchDB's request object is made of.
pub(crate) struct RequestParts<'a> {
    pub database: &'a Database,
    pub user: &'a auth::UserCtx,
    pub method: &'a axum::http::Method,
    /// The request's path, as sent (`/db/_changes`), followed by its
    /// query string as sent (`?a=%22x%22`) when the caller has it: then
    /// `raw_path` is exactly what the client sent, and `requested_path`
    /// is split as CouchDB splits it (the query stays in the last
    /// segment); else the query is written from `query`.
    pub path: &'a str,
    pub query: &'a crate::base::params::Query,
    pub headers: &'a axum::http::HeaderMap,
    /// The body's text; `None` for a request without one.
    pub body: Option<String>,
    /// The document the request names (`_show/name/docid`), if any.
    pub id: Option<&'a str>,
}

/// The request object design functions receive (`req`), as CouchDB builds
/// it: `info`, `method`, `path`, `query`, `headers`, `body`, `userCtx`,
/// `secObj` and the rest, as JSON text.
pub(crate) async fn request_object(parts: RequestParts<'_>) -> Result<String, ApiError> {
    build_request_object(parts, true).await
}

/// The request object a `rewrites` function receives: CouchDB's without
/// `info`, `uuid`, `id` and `form`.
pub(crate) async fn rewrite_request_object(parts: RequestParts<'_>) -> Result<String, ApiError> {
    build_request_object(parts, false).await
}

async fn build_request_object(parts: RequestParts<'_>, full: bool) -> Result<String, ApiError> {
    let RequestParts {
        database,
        user,
        method,
        path,
        query,
        headers,
        body,
        id,
    } = parts;
    let (path, raw_query) = match path.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (path, None),
    };
    let split = |text: &str| -> Vec<Value> {
        text.split('/')
            .filter(|s| !s.is_empty())
            .map(|s| {
                Value::String(
                    percent_encoding::percent_decode_str(s)
                        .decode_utf8_lossy()
                        .into_owned(),
                )
            })
            .collect()
    };
    let segments = split(path);
    // As CouchDB: these parameters are JSON to functions (400 when not).
    let query_object = query
        .pairs()
        .iter()
        .map(|(k, v)| match k.as_str() {
            "startkey" | "endkey" | "key" | "descending" => Ok((k.clone(), ejson::from_str(v)?)),
            _ => Ok((k.clone(), Value::String(v.clone()))),
        })
        .collect::<Result<serde_json::Map<String, Value>, ApiError>>()?;
    // By name, as CouchDB lists them; a repeated header's values joined.
    let mut header_object = std::collections::BTreeMap::<String, String>::new();
    // Credentials are gone already: authentication takes them out of every
    // request (`base::auth::remove_credentials`).
    for (name, value) in headers {
        let Ok(value) = value.to_str() else { continue };
        header_object
            .entry(canonical_header(name.as_str()))
            .and_modify(|joined| {
                joined.push_str(", ");
                joined.push_str(value);
            })
            .or_insert_with(|| value.to_string());
    }
    let header_object: serde_json::Map<String, Value> = header_object
        .into_iter()
        .map(|(name, value)| (name, Value::String(value)))
        .collect();
    let (raw_path, requested) = match raw_query {
        Some(raw) => {
            let whole = format!("{path}?{raw}");
            (whole.clone(), split(&whole))
        }
        None if query.pairs().is_empty() => (path.to_string(), segments.clone()),
        None => (
            format!(
                "{path}?{}",
                form_urlencoded::Serializer::new(String::new())
                    .extend_pairs(query.pairs())
                    .finish()
            ),
            segments.clone(),
        ),
    };
    let security = database.security().await?;
    let mut req = serde_json::Map::new();
    if full {
        req.insert(
            "info".into(),
            crate::base::db_info::info_json(database).await?,
        );
        let uuid = uuid::Uuid::new_v4().simple().to_string();
        req.insert("uuid".into(), Value::String(uuid));
        req.insert("id".into(), serde_json::json!(id));
    }
    let form = full.then(|| form_of(headers, body.as_deref()));
    let fields = [
        ("method", Value::String(method.as_str().into())),
        ("requested_path", Value::Array(requested)),
        ("path", Value::Array(segments)),
        ("raw_path", Value::String(raw_path)),
        ("query", Value::Object(query_object)),
        ("headers", Value::Object(header_object)),
        (
            "body",
            Value::String(body.unwrap_or_else(|| "undefined".into())),
        ),
        ("peer", Value::String("127.0.0.1".into())),
    ];
    req.extend(fields.into_iter().map(|(k, v)| (k.to_string(), v)));
    if let Some(form) = form {
        req.insert("form".into(), form);
    }
    req.insert("cookie".into(), serde_json::json!({}));
    req.insert(
        "userCtx".into(),
        serde_json::json!({"db": database.name(), "name": user.name, "roles": user.roles}),
    );
    req.insert("secObj".into(), (*security).clone());
    Ok(ejson::to_string(&Value::Object(req)))
}

/// A form body (`application/x-www-form-urlencoded`) as `req.form`.
fn form_of(headers: &axum::http::HeaderMap, body: Option<&str>) -> Value {
    let is_form = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    match (is_form, body) {
        (true, Some(body)) => Value::Object(
            form_urlencoded::parse(body.as_bytes())
                .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
                .collect(),
        ),
        _ => Value::Object(Default::default()),
    }
}

/// `content-type` as CouchDB's request object names it: `Content-Type`.
fn canonical_header(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join("-")
}

/// Splits `filter=ddoc/name` (or `view=ddoc/name`) as CouchDB does.
pub(crate) fn split_name<'a>(value: &'a str, what: &str) -> Result<(&'a str, &'a str), ApiError> {
    match value.split_once('/') {
        Some((ddoc, name)) if !ddoc.is_empty() && !name.is_empty() => Ok((ddoc, name)),
        _ => Err(ApiError::bad_request(format!(
            "`{what}` must be of the form `designname/{what}name`"
        ))),
    }
}
