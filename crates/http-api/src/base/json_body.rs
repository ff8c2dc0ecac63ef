//! JSON in and out, the CouchDB way: bodies read within the configured size
//! limit and refused with CouchDB's reasons, answers written with a trailing
//! newline and `Content-Type: application/json`.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, header};
use futures_util::StreamExt;
use serde_json::Value;

use crate::base::error::ApiError;

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
/// `max_http_request_size` bounds it too, as it bounds every request.
pub async fn read_json_body(
    body: Body,
    config: &crate::ApiConfig,
) -> Result<Option<Value>, ApiError> {
    let limit = config.max_json_body_size.min(config.max_http_request_size);
    let bytes = read_body(body, limit).await?;
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
