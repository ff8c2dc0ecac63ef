//! Request bodies sent gzip-compressed (`Content-Encoding: gzip`), as
//! CouchDB reads JSON bodies and as the Cloudant SDK (couchbackup, say)
//! sends every request. The body is inflated as it streams in, a bounded
//! slice at a time, so the readers' size limits apply to the inflated
//! bytes and a small compressed body cannot balloon in memory. Attachment
//! uploads and design functions' bodies are left as sent: CouchDB stores
//! a gzip-encoded attachment encoded.

use std::io::Write;

use axum::body::Body;
use axum::extract::Request;
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use flate2::write::GzDecoder;
use futures_util::StreamExt;

use crate::base::error::ApiError;
use crate::base::target::{Target, parse_target};

/// Compressed bytes inflated per step: at most about a thousand times
/// this comes out of one step.
const STEP: usize = 1 << 10;

/// # Middleware: inflates gzip-encoded JSON request bodies.
pub(crate) async fn inflate(request: Request, next: Next) -> Response {
    let Some(encoding) = request.headers().get(header::CONTENT_ENCODING) else {
        return next.run(request).await;
    };
    let encoding = encoding.to_str().unwrap_or("").trim().to_ascii_lowercase();
    if encoding.is_empty() || encoding == "identity" || !reads_json(&request) {
        return next.run(request).await;
    }
    if encoding != "gzip" {
        // CouchDB's answer, word for word.
        return ApiError::BadContentType(format!(
            "{encoding} is not a supported content encoding."
        ))
        .into_response();
    }
    let (mut parts, body) = request.into_parts();
    parts.headers.remove(header::CONTENT_ENCODING);
    parts.headers.remove(header::CONTENT_LENGTH);
    let body = Body::from_stream(inflated(body));
    next.run(Request::from_parts(parts, body)).await
}

/// Whether the request's body is JSON the API parses (not an attachment,
/// nor a body a design function reads as it was sent).
fn reads_json(request: &Request) -> bool {
    let json = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_none_or(|t| {
            t.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        });
    if !json {
        return false;
    }
    let path = request.uri().path();
    // Server paths (`/_session`, `/_replicate`...) take JSON only.
    let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
    if first.starts_with('_') && !store::name::SYSTEM_DATABASES.contains(&first) {
        return true;
    }
    !matches!(
        parse_target(path),
        Ok(Target::Attachment { .. } | Target::DesignFunction { .. })
    )
}

/// Where inflating a body is.
struct Inflating {
    input: axum::body::BodyDataStream,
    decoder: GzDecoder<Vec<u8>>,
    /// The compressed chunk being inflated, and how far.
    chunk: Bytes,
    at: usize,
    done: bool,
}

fn not_gzip() -> std::io::Error {
    // CouchDB's reason, word for word.
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "Request body is not properly gzipped.",
    )
}

/// The inflated bytes of a gzip stream, one step of compressed input at a
/// time; a stream that is not gzip ends with an error, which the body
/// readers answer as a bad request.
fn inflated(body: Body) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    let state = Inflating {
        input: body.into_data_stream(),
        decoder: GzDecoder::new(Vec::new()),
        chunk: Bytes::new(),
        at: 0,
        done: false,
    };
    futures_util::stream::unfold(state, |mut s| async move {
        loop {
            if s.done {
                return None;
            }
            if s.at < s.chunk.len() {
                let end = (s.at + STEP).min(s.chunk.len());
                if s.decoder.write_all(&s.chunk[s.at..end]).is_err() {
                    s.done = true;
                    return Some((Err(not_gzip()), s));
                }
                s.at = end;
                let out = std::mem::take(s.decoder.get_mut());
                if !out.is_empty() {
                    return Some((Ok(Bytes::from(out)), s));
                }
                continue;
            }
            match s.input.next().await {
                Some(Ok(chunk)) => {
                    s.chunk = chunk;
                    s.at = 0;
                }
                Some(Err(e)) => {
                    s.done = true;
                    return Some((Err(std::io::Error::other(e.to_string())), s));
                }
                None => {
                    s.done = true;
                    // A cut-off stream is not gzip either.
                    if s.decoder.try_finish().is_err() {
                        return Some((Err(not_gzip()), s));
                    }
                    let out = std::mem::take(s.decoder.get_mut());
                    return (!out.is_empty()).then(|| (Ok(Bytes::from(out)), s));
                }
            }
        }
    })
}
