//! Answers: JSON with CouchDB's framing, ETags and `If-None-Match`, and
//! `Location` headers with CouchDB's path encoding.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use axum::response::Response;
use bytes::Bytes;
use serde::Serialize;

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
            crate::base::response::set_etag(&mut response, &etag);
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
/// ETag, `Content-Length: 0` and no body. The HTTP server library writes a
/// 304's length header only when the body is a stream of unknown length
/// (an empty body leaves it out); it sends no body on a 304 either way.
pub(crate) fn not_modified(etag: &str) -> Response {
    let nothing = futures_util::stream::empty::<Result<bytes::Bytes, std::io::Error>>();
    let mut response = (
        StatusCode::NOT_MODIFIED,
        axum::body::Body::from_stream(nothing),
    )
        .into_response();
    response.headers_mut().insert(
        axum::http::header::CONTENT_LENGTH,
        axum::http::HeaderValue::from_static("0"),
    );
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

pub(crate) fn set_etag(response: &mut Response, rev: &str) {
    if let Ok(value) = HeaderValue::from_str(&format!("\"{rev}\"")) {
        response.headers_mut().insert(header::ETAG, value);
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
}
