//! What the `_all_docs`-style listings share: their parameters, their rows
//! for missing keys, and their answer's framing.

use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{Map, Value, json};
use std::ops::Bound;
use store::{AllDocsQuery, Database};

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::json_body::{read_json_object, require_json_content_type};
use crate::base::params::{Query, query_parse_error};
use crate::base::response::raw_json_response;

/// Where a JSON key falls among document ids, which are all strings.
/// CouchDB compares ids as its runtime orders terms, not by view
/// collation: there every other JSON value (null, booleans, numbers, and
/// arrays and objects too) comes before every string. So `startkey={}`
/// lists every document and `endkey=[]` none.
enum KeyPlace {
    BeforeAll,
    Id(String),
}

fn key_place(value: &Value) -> KeyPlace {
    match value {
        Value::String(s) => KeyPlace::Id(s.clone()),
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
        att_encoding_info: flag("att_encoding_info")?.unwrap_or(false),
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
        // With `descending`, the start key is the high end and the range
        // runs down: a start before every id is then empty, as is an end
        // before every id going up.
        if let Some(start) = json("startkey", "start_key")? {
            match key_place(&start) {
                KeyPlace::Id(id) => q.start = Bound::Included(id),
                // Going down from below every id: nothing, past every
                // row (the offset counts them all, as CouchDB's).
                KeyPlace::BeforeAll if descending => {
                    q.start = Bound::Excluded(String::new());
                    empty = true;
                }
                KeyPlace::BeforeAll => {}
            }
        }
        if let Some(end) = json("endkey", "end_key")? {
            match key_place(&end) {
                KeyPlace::Id(id) if inclusive_end => q.end = Bound::Included(id),
                KeyPlace::Id(id) => q.end = Bound::Excluded(id),
                KeyPlace::BeforeAll => empty |= !descending,
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

/// What the `_all_docs`-style endpoints (`_all_docs`, `_local_docs`,
/// `_design_docs`) read first: the database, and their options from the
/// query string and, for a POST, the JSON body.
pub(crate) async fn listing(
    state: &AppState,
    db: &str,
    query: &Query,
    request: Request,
) -> Result<(Database, AllDocsOptions), ApiError> {
    let user = crate::base::auth::user_of(&request);
    let database = state.open(db, &user).await?;
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
