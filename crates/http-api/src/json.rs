//! JSON in and out, the CouchDB way: bodies read within the configured size
//! limit and refused with CouchDB's reasons, answers written with a trailing
//! newline and `Content-Type: application/json`.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use futures_util::StreamExt;
use serde::Serialize;
use serde_json::Value;

use crate::error::ApiError;

/// Serializes `value` into a JSON response with CouchDB's trailing newline.
pub fn json_response(status: StatusCode, value: &impl Serialize) -> Response {
    match serde_json::to_vec(value) {
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

/// Parses a JSON request body; CouchDB's reason for anything unparsable.
pub fn parse_json(bytes: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(bytes).map_err(|_| ApiError::bad_request("invalid UTF-8 JSON"))
}

/// Reads and parses a JSON body that must be an object.
pub async fn read_json_object(
    body: Body,
    limit: u64,
) -> Result<serde_json::Map<String, Value>, ApiError> {
    match parse_json(&read_body(body, limit).await?)? {
        Value::Object(map) => Ok(map),
        _ => Err(ApiError::bad_request("Request body must be a JSON object")),
    }
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
