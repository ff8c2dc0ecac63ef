//! JSON in and out, the CouchDB way: bodies read within the configured size
//! limit and refused with CouchDB's reasons, answers written with a trailing
//! newline and `Content-Type: application/json`.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use axum::response::Response;
use futures_util::StreamExt;
use serde::Serialize;
use serde_json::Value;

use crate::error::ApiError;

/// Serializes `value` into a JSON response with CouchDB's trailing newline,
/// numbers and escapes (`ejson`).
pub fn json_response(status: StatusCode, value: &impl Serialize) -> Response {
    match ejson::to_vec_of(value) {
        Ok(mut bytes) => {
            bytes.push(b'\n');
            raw_json_response(status, bytes)
        }
        Err(e) => {
            // Never send `null` in place of an answer: this is our fault.
            tracing::error!(error = %e, "a response could not be serialized");
            raw_json_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                &b"{\"error\":\"unknown_error\",\"reason\":\"An internal error occurred; see the server log.\"}\n"[..],
            )
        }
    }
}

/// A JSON answer that is a function of its content alone, tagged as
/// CouchDB tags such answers (`_all_dbs`, `_uuids`, local documents): with
/// an ETag made from the content.
pub fn tagged_json_response(status: StatusCode, value: &impl Serialize) -> Response {
    match ejson::to_vec_of(value) {
        Ok(mut bytes) => {
            bytes.push(b'\n');
            let etag = content_etag(&bytes);
            let mut response = raw_json_response(status, bytes);
            crate::db::set_etag(&mut response, &etag);
            response
        }
        Err(_) => json_response(status, value),
    }
}

/// Whether a request's `If-None-Match` names `etag` (quoted), as CouchDB
/// matches it: the header's tags split at commas and spaces, a weak tag
/// (`W/"..."`) standing for its strong one.
pub(crate) fn etag_matches(headers: &axum::http::HeaderMap, etag: &str) -> bool {
    headers
        .get_all(axum::http::header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split([',', ' ']))
        .filter(|t| !t.is_empty())
        .map(|t| t.strip_prefix("W/").unwrap_or(t))
        .any(|t| t == etag)
}

/// CouchDB's answer when the client has the current version: 304 with the
/// ETag and no body. (CouchDB also sends `Content-Length: 0`; the HTTP
/// server library leaves that header out of every 304.)
pub(crate) fn not_modified(etag: &str) -> Response {
    let mut response = StatusCode::NOT_MODIFIED.into_response();
    if let Ok(value) = axum::http::HeaderValue::from_str(etag) {
        response
            .headers_mut()
            .insert(axum::http::header::ETAG, value);
    }
    response
}

/// An ETag value naming `content` (its md5, in hex; `set_etag` quotes it).
pub fn content_etag(content: &[u8]) -> String {
    use md5::{Digest, Md5};
    Md5::digest(content)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A response whose JSON text is already built.
pub fn raw_json_response(status: StatusCode, bytes: impl Into<Bytes>) -> Response {
    let mut response = Response::new(Body::from(bytes.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// Reads a whole request body, refusing it once it passes `limit` bytes
/// (413 `too_large`), without ever holding more than the limit.
pub async fn read_body(body: Body, limit: u64) -> Result<Bytes, ApiError> {
    let mut stream = body.into_data_stream();
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk
            .map_err(|e| ApiError::bad_request(format!("error reading the request body: {e}")))?;
        if (out.len() + chunk.len()) as u64 > limit {
            return Err(ApiError::RequestTooLarge);
        }
        out.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(out))
}

/// Parses a JSON request body as CouchDB reads it (`ejson`); CouchDB's
/// reason for anything unparsable.
pub fn parse_json(bytes: &[u8]) -> Result<Value, ApiError> {
    Ok(ejson::from_slice(bytes)?)
}

/// Reads and parses a JSON body that is not documents and must be an
/// object (see [`read_json_body`]).
pub async fn read_json_object(
    body: Body,
    config: &crate::ApiConfig,
) -> Result<serde_json::Map<String, Value>, ApiError> {
    match read_json_body(body, config).await? {
        Some(Value::Object(map)) => Ok(map),
        // CouchDB's words for an empty body.
        None => Err(ApiError::bad_request("Missing request body")),
        Some(_) => Err(ApiError::bad_request("Request body must be a JSON object")),
    }
}

/// Reads and parses a JSON body that is not documents (`None` when it is
/// empty or blank). Such a body becomes one tree in memory, so it is held
/// to `max_json_body_size` (413) and its values are counted before the
/// tree is built: a body of tiny values (`[0,0,...]`) would otherwise take
/// many times its size. Past four values per `max_bulk_items` it is a 400.
pub async fn read_json_body(
    body: Body,
    config: &crate::ApiConfig,
) -> Result<Option<Value>, ApiError> {
    let bytes = read_body(body, config.max_json_body_size).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let values = count_values(&bytes);
    let most = config.limits.max_bulk_items.saturating_mul(4);
    if values > most {
        return Err(ApiError::bad_request(format!(
            "Too many values in one request body: more than {most} \
             (four per item of max_bulk_items)"
        )));
    }
    parse_json(&bytes).map(Some)
}

/// An upper bound on the number of values in a JSON text, object keys
/// included: one per separator, colon or opening bracket outside strings,
/// plus one.
fn count_values(bytes: &[u8]) -> usize {
    let mut count = 1;
    let mut in_string = false;
    let mut escaped = false;
    for &b in bytes {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
        } else {
            match b {
                b'"' => in_string = true,
                b',' | b'[' | b'{' | b':' => count += 1,
                _ => {}
            }
        }
    }
    count
}

/// CouchDB requires `Content-Type: application/json` on JSON POSTs.
pub fn require_json_content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let ok = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        });
    if ok {
        Ok(())
    } else {
        Err(ApiError::BadContentType(
            "Content-Type must be application/json".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_none_match_is_read_as_couchdb_reads_it() {
        let mut headers = axum::http::HeaderMap::new();
        headers.insert(
            axum::http::header::IF_NONE_MATCH,
            axum::http::HeaderValue::from_static("\"a\", W/\"1-abc\""),
        );
        assert!(etag_matches(&headers, "\"1-abc\""), "a weak tag matches");
        assert!(etag_matches(&headers, "\"a\""));
        assert!(!etag_matches(&headers, "\"1-ab\""));
        assert!(!etag_matches(&axum::http::HeaderMap::new(), "\"a\""));
    }

    #[test]
    fn values_are_counted_outside_strings_only() {
        assert_eq!(count_values(b"0"), 1);
        assert_eq!(count_values(b"[0,0,0]"), 4);
        assert_eq!(count_values(br#"{"a":[1,2],"b":"x"}"#), 7);
        assert_eq!(count_values(br#"["a,b:[{", "\",[", 3]"#), 4);
        // Never fewer than the values a parser would build.
        for text in [&br#"{"k":{"l":[[],{}],"m":null}}"#[..], b"[[[[1]]],2,true]"] {
            let value: Value = serde_json::from_slice(text).unwrap();
            assert!(
                count_values(text) >= nodes(&value),
                "{}",
                String::from_utf8_lossy(text)
            );
        }
    }

    fn nodes(value: &Value) -> usize {
        match value {
            Value::Array(items) => 1 + items.iter().map(nodes).sum::<usize>(),
            Value::Object(map) => 1 + map.values().map(|v| 1 + nodes(v)).sum::<usize>(),
            _ => 1,
        }
    }
}
