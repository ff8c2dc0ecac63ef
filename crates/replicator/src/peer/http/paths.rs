//! The paths, queries and bodies of the requests to an HTTP peer.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Map, Value};

/// The query of the target's creation `PUT` from `create_target_params`:
/// CouchDB reads the shard count `q`, the replica count `n` and
/// `partitioned` there. Other keys mean nothing to a database creation and
/// are not sent.
pub(crate) fn create_query(params: &Map<String, Value>) -> String {
    let mut query = String::new();
    for key in ["q", "n", "partitioned"] {
        let text = match params.get(key) {
            None | Some(Value::Null) => continue,
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        query.push(if query.is_empty() { '?' } else { '&' });
        query.push_str(key);
        query.push('=');
        query.push_str(&form_encode(&text));
    }
    query
}

/// A `_bulk_docs` body with `new_edits=false` around documents already
/// encoded by the JSON writer (so the splice is valid JSON).
pub(crate) fn bulk_docs_body(encoded: &[Vec<u8>]) -> Bytes {
    const HEAD: &[u8] = b"{\"new_edits\":false,\"docs\":[";
    let size = HEAD.len() + 2 + encoded.iter().map(|d| d.len() + 1).sum::<usize>();
    let mut body = Vec::with_capacity(size);
    body.extend_from_slice(HEAD);
    for (i, doc) in encoded.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(doc);
    }
    body.extend_from_slice(b"]}");
    Bytes::from(body)
}

/// The most JSON one `_bulk_docs` request carries, as CouchDB's replicator
/// flushes: large enough to amortize requests, small enough for any peer.
pub(crate) const MAX_WRITE_BYTES: usize = 4 << 20;

/// Splits encoded documents into runs whose JSON stays under `limit` bytes
/// (a lone larger document still gets a run of its own).
pub(crate) fn chunk_by_bytes(encoded: &[Vec<u8>], limit: usize) -> Vec<std::ops::Range<usize>> {
    let mut chunks = Vec::new();
    let mut start = 0;
    let mut size = 0;
    for (i, doc) in encoded.iter().enumerate() {
        if i > start && size + doc.len() > limit {
            chunks.push(start..i);
            start = i;
            size = 0;
        }
        size += doc.len();
    }
    if start < encoded.len() {
        chunks.push(start..encoded.len());
    }
    chunks
}

/// A longpoll changes feed from `since` that waits up to `wait` for the
/// first change, and answers before the request's own `timeout`.
pub(crate) fn longpoll_path(since: &Value, wait: Duration, timeout: Duration) -> String {
    let since_text = match since {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    format!(
        "_changes?feed=longpoll&limit=1&since={}&timeout={}",
        form_encode(&since_text),
        wait.min(timeout * 3 / 4).as_millis()
    )
}

/// Text percent-encoded for a query value or a path segment.
pub(crate) fn form_encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// A document id as a URL path: `_design/x` keeps its slash, as CouchDB expects.
pub(crate) fn encode_doc_id(id: &str) -> String {
    match id.strip_prefix("_design/") {
        Some(rest) => format!("_design/{}", form_encode(rest)),
        None => form_encode(id),
    }
}
