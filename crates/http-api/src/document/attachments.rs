//! Attachment routes: `GET|HEAD|PUT|DELETE /{db}/{docid}/{attname}`. Bytes
//! stream in and out chunk by chunk; a large attachment is never whole in memory.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use futures_util::{StreamExt, stream};
use serde_json::{Map, Value, json};
use store::{AttachmentInput, AttachmentMeta, AttachmentReader, Database, DocInput, GetOptions};

use crate::AppState;
use crate::base::access::Writer;
use crate::base::error::ApiError;
use crate::base::params::Query;
use crate::base::response::json_response;
use crate::base::response::{encode_segment, set_location};

/// # GET|HEAD|PUT|DELETE /{db}/{docid}/{attname}
pub(crate) async fn attachment(
    state: AppState,
    db: String,
    id: String,
    name: String,
    query: Query,
    request: Request,
) -> Result<Response, ApiError> {
    let user = crate::base::auth::user_of(&request);
    let (database, writer) = state.open_to_write(&db, &user).await?;
    match request.method().as_str() {
        // Another user's document does not exist for a `_users` reader.
        "GET" | "HEAD"
            if writer.reads_filtered()
                && (user.name.is_none() || user.name.as_deref() != auth::users::name_of(&id)) =>
        {
            Err(ApiError::not_found("missing"))
        }
        "GET" | "HEAD" => get(&database, &id, &name, &query, request.headers()).await,
        "PUT" => put(&state, &database, &writer, &db, id, name, &query, request).await,
        "DELETE" => delete(&database, &writer, id, name, &query, request.headers()).await,
        _ => Err(ApiError::MethodNotAllowed("DELETE,GET,HEAD,PUT")),
    }
}

/// The base64 md5 inside a `md5-...` digest: CouchDB's ETag and Content-MD5.
fn digest_b64(meta: &AttachmentMeta) -> &str {
    meta.digest.strip_prefix("md5-").unwrap_or(&meta.digest)
}

/// Whether a standalone upload's bytes come gzip-encoded
/// (`Content-Encoding`); CouchDB takes no other encoding.
fn content_encoding_is_gzip(headers: &HeaderMap) -> Result<bool, ApiError> {
    let Some(value) = headers.get(header::CONTENT_ENCODING) else {
        return Ok(false);
    };
    let value = value.to_str().unwrap_or_default().trim();
    if value.eq_ignore_ascii_case("gzip") {
        Ok(true)
    } else if value.eq_ignore_ascii_case("identity") {
        Ok(false)
    } else {
        Err(ApiError::BadContentType(
            "Only gzip and identity content-encodings are supported".into(),
        ))
    }
}

/// A single `bytes=a-b` range over `len` bytes, CouchDB-style; `None` for
/// no (or an unusable multi-) range, which means the whole body.
fn parse_range(headers: &HeaderMap, len: u64) -> Result<Option<(u64, u64)>, ApiError> {
    let Some(value) = headers.get(header::RANGE).and_then(|v| v.to_str().ok()) else {
        return Ok(None);
    };
    let Some(spec) = value.trim().strip_prefix("bytes=") else {
        return Ok(None);
    };
    // `bytes=0-` asks for everything: CouchDB answers it with the whole
    // attachment (200), as it does a multi-range.
    if spec.contains(',') || spec.trim() == "0-" {
        return Ok(None);
    }
    let (a, b) = spec.split_once('-').ok_or(ApiError::RangeNotSatisfiable)?;
    let (start, end) = match (a.trim(), b.trim()) {
        ("", suffix) => {
            let n: u64 = suffix.parse().map_err(|_| ApiError::RangeNotSatisfiable)?;
            (len.saturating_sub(n), len.saturating_sub(1))
        }
        (s, "") => (
            s.parse().map_err(|_| ApiError::RangeNotSatisfiable)?,
            len.saturating_sub(1),
        ),
        (s, e) => (
            s.parse().map_err(|_| ApiError::RangeNotSatisfiable)?,
            e.parse::<u64>()
                .map_err(|_| ApiError::RangeNotSatisfiable)?
                .min(len.saturating_sub(1)),
        ),
    };
    if len == 0 || start > end || start >= len {
        return Err(ApiError::RangeNotSatisfiable);
    }
    Ok(Some((start, end)))
}

/// Streams bytes `start..=end` of an attachment.
fn byte_stream(reader: AttachmentReader, start: u64, end: u64) -> Body {
    let state = (reader, 0u64, false);
    let s = stream::unfold(state, move |(mut reader, offset, done)| async move {
        if done || offset > end {
            return None;
        }
        match reader.next_chunk().await {
            Ok(Some(chunk)) => {
                let len = chunk.len() as u64;
                let from = start.saturating_sub(offset).min(len) as usize;
                let to = (end + 1).saturating_sub(offset).min(len) as usize;
                let piece = Bytes::from(chunk).slice(from..to.max(from));
                Some((
                    Ok::<Bytes, std::io::Error>(piece),
                    (reader, offset + len, false),
                ))
            }
            Ok(None) => None,
            Err(e) => Some((
                Err(std::io::Error::other(e.to_string())),
                (reader, offset, true),
            )),
        }
    })
    .filter(|item| futures_util::future::ready(!matches!(item, Ok(b) if b.is_empty())));
    Body::from_stream(s)
}

/// Streams an attachment's inflated content.
fn inflated_stream(reader: store::InflatingReader) -> Body {
    let s = stream::unfold(Some(reader), |reader| async move {
        let mut reader = reader?;
        match reader.next_chunk().await {
            Ok(Some(piece)) => Some((
                Ok::<Bytes, std::io::Error>(Bytes::from(piece)),
                Some(reader),
            )),
            Ok(None) => None,
            Err(e) => Some((Err(std::io::Error::other(e.to_string())), None)),
        }
    });
    Body::from_stream(s)
}

/// Whether `Accept-Encoding` takes gzip (or anything, `*`) with a weight
/// above zero.
fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim();
            let weight = parts
                .find_map(|p| p.trim().strip_prefix("q="))
                .map_or(Some(1.0), |q| q.trim().parse::<f32>().ok());
            (coding.eq_ignore_ascii_case("gzip") || coding == "*")
                && weight.is_some_and(|w| w > 0.0)
        })
}

/// # GET /{db}/{docid}/{attname}
async fn get(
    database: &Database,
    id: &str,
    name: &str,
    query: &Query,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let (meta, reader) = database.attachment(id, name, query.rev("rev")?).await?;
    let etag = format!("\"{}\"", digest_b64(&meta));
    if crate::base::response::etag_matches(headers, &etag) {
        return Ok(crate::base::response::not_modified(&etag));
    }
    let inflate = meta.encoding.as_deref() == Some("gzip") && !accepts_gzip(headers);
    let stored_len = meta.encoded_length.unwrap_or(meta.length);
    // As CouchDB: a range is checked against what would be sent (416 when
    // it is unsatisfiable) even where it is then ignored (encoded bytes).
    let range = parse_range(headers, if inflate { meta.length } else { stored_len })?;
    // Compressed bytes go out as they are to clients that take gzip, and
    // inflated to everyone else, as CouchDB does.
    if inflate {
        let mut response = Response::new(inflated_stream(store::InflatingReader::new(reader)));
        let h = response.headers_mut();
        for (name, value) in [
            (header::CONTENT_TYPE, meta.content_type.as_str()),
            (header::ETAG, etag.as_str()),
            (header::ACCEPT_RANGES, "none"),
            (header::CONTENT_LENGTH, &meta.length.to_string()),
        ] {
            if let Ok(value) = HeaderValue::from_str(value) {
                h.insert(name, value);
            }
        }
        return Ok(response);
    }
    let range = if meta.encoding.is_some() { None } else { range };
    let (status, start, end) = match range {
        Some((s, e)) => (StatusCode::PARTIAL_CONTENT, s, e),
        None => (StatusCode::OK, 0, stored_len.saturating_sub(1)),
    };
    let body = if stored_len == 0 {
        Body::empty()
    } else {
        byte_stream(reader, start, end)
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let h = response.headers_mut();
    let put = |h: &mut HeaderMap, k: header::HeaderName, v: &str| {
        if let Ok(v) = HeaderValue::from_str(v) {
            h.insert(k, v);
        }
    };
    put(h, header::CONTENT_TYPE, &meta.content_type);
    put(h, header::ETAG, &etag);
    // Ranges of compressed bytes are not served (CouchDB's "none").
    let ranges = if meta.encoding.is_some() {
        "none"
    } else {
        "bytes"
    };
    put(h, header::ACCEPT_RANGES, ranges);
    let length = if stored_len == 0 { 0 } else { end - start + 1 };
    put(h, header::CONTENT_LENGTH, &length.to_string());
    if let Some(encoding) = &meta.encoding {
        put(h, header::CONTENT_ENCODING, encoding);
    } else {
        put(
            h,
            header::HeaderName::from_static("content-md5"),
            digest_b64(&meta),
        );
    }
    if status == StatusCode::PARTIAL_CONTENT {
        put(
            h,
            header::CONTENT_RANGE,
            &format!("bytes {start}-{end}/{stored_len}"),
        );
    }
    Ok(response)
}

/// The document to change as an edit of revision `rev` (or a new document
/// when there is none), as stored (attachments as stubs).
pub(crate) async fn base_doc(
    database: &Database,
    id: &str,
    rev: Option<&str>,
) -> Result<Map<String, Value>, ApiError> {
    let Some(rev) = rev else {
        return match database.get(id, GetOptions::default()).await {
            Err(store::StoreError::DocNotFound(_)) => {
                Ok(Map::from_iter([("_id".to_string(), json!(id))]))
            }
            Ok(_) => Err(ApiError::Conflict),
            Err(e) => Err(e.into()),
        };
    };
    let rev = crate::base::params::parse_rev(rev)?;
    let doc = match database
        .get(
            id,
            GetOptions {
                rev: Some(rev),
                ..Default::default()
            },
        )
        .await
    {
        Ok(doc) => doc.to_value()?,
        // As CouchDB: the document does not have that revision.
        Err(store::StoreError::DocNotFound(_)) => return Err(ApiError::MissingRevConflict),
        Err(e) => return Err(e.into()),
    };
    match doc {
        Value::Object(map) => Ok(map),
        _ => Err(ApiError::Internal(
            "stored document is not an object".into(),
        )),
    }
}

/// The edit that keeps every attachment of `body` as a stub except `drop`;
/// also says whether `drop` was there.
fn keep_attachments_except(
    body: Map<String, Value>,
    drop: &str,
) -> Result<(DocInput, bool), ApiError> {
    keep_attachments_but(body, &[drop])
}

/// The edit that keeps every attachment of `body` as a stub but those
/// named in `drop`; also says whether any of those was there.
pub(crate) fn keep_attachments_but(
    mut body: Map<String, Value>,
    drop: &[&str],
) -> Result<(DocInput, bool), ApiError> {
    let atts = match body.remove("_attachments") {
        Some(Value::Object(atts)) => atts,
        _ => Map::new(),
    };
    let mut doc = DocInput::from_json(Value::Object(body))?;
    let had = atts.keys().any(|name| drop.contains(&name.as_str()));
    for (name, _) in atts {
        if !drop.contains(&name.as_str()) {
            doc.attachments.push((
                name,
                AttachmentInput::Stub {
                    digest: None,
                    revpos: None,
                },
            ));
        }
    }
    Ok((doc, had))
}

fn request_rev(query: &Query, headers: &HeaderMap) -> Option<String> {
    query.get("rev").map(str::to_string).or_else(|| {
        headers
            .get(header::IF_MATCH)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.trim_matches('"').to_string())
    })
}

pub(crate) async fn write(
    database: &Database,
    writer: &Writer,
    mut doc: DocInput,
) -> Result<String, ApiError> {
    writer.check_one(database, &mut doc, true).await?;
    Ok(database.put_doc(doc, true).await?)
}

/// # PUT /{db}/{docid}/{attname}
#[allow(clippy::too_many_arguments)]
async fn put(
    state: &AppState,
    database: &Database,
    writer: &Writer,
    db: &str,
    id: String,
    name: String,
    query: &Query,
    request: Request,
) -> Result<Response, ApiError> {
    if id.starts_with("_local/") {
        return Err(ApiError::bad_request(
            "_local documents do not accept attachments.",
        ));
    }
    state.config.limits.check_doc_id(&id)?;
    state.config.limits.check_attachment_name(&name)?;
    if name.starts_with('_') {
        return Err(ApiError::bad_request(format!(
            "Attachment name '{name}' starts with prohibited character '_'"
        )));
    }
    store::validate_doc_id(&id)?;
    let rev = request_rev(query, request.headers());
    let body = base_doc(database, &id, rev.as_deref()).await?;
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/octet-stream")
        .to_string();
    let sent_gzipped = content_encoding_is_gzip(request.headers())?;
    let mut upload = if sent_gzipped {
        database.begin_attachment(&name)
    } else {
        database.begin_attachment_of(&name, &content_type)
    };
    let mut stream = request.into_body().into_data_stream();
    let mut total = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk
            .map_err(|e| ApiError::bad_request(format!("error reading the request body: {e}")))?;
        total += chunk.len() as u64;
        if total > state.config.max_http_request_size {
            return Err(ApiError::RequestTooLarge);
        }
        upload.write(&chunk).await?;
    }
    let staged = upload.finish().await?;
    let input = if sent_gzipped {
        // Stored as sent; the length clients see is counted by inflating.
        let length = database.gzip_content_length(&name, &staged.digest).await?;
        AttachmentInput::Staged {
            content_type,
            encoded_length: Some(staged.length),
            digest: staged.digest,
            length,
            revpos: None,
            encoding: Some("gzip".into()),
            length_counted: true,
            pin: staged.pin,
        }
    } else {
        AttachmentInput::uploaded(content_type, staged)
    };
    let (mut doc, _) = keep_attachments_except(body, &name)?;
    let location = format!(
        "/{}/{}/{}",
        encode_segment(db),
        encode_segment(&id),
        encode_segment(&name)
    );
    // First, as CouchDB puts it: the order counts in the revision id.
    doc.attachments.insert(0, (name, input));
    let new_rev = write(database, writer, doc).await?;
    // As CouchDB: where the attachment is, and no ETag.
    let mut response = json_response(
        StatusCode::CREATED,
        &json!({"ok": true, "id": id, "rev": new_rev}),
    );
    set_location(&mut response, &location);
    Ok(response)
}

/// # DELETE /{db}/{docid}/{attname}
async fn delete(
    database: &Database,
    writer: &Writer,
    id: String,
    name: String,
    query: &Query,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let Some(rev) = request_rev(query, headers) else {
        // A missing document is 404 before a missing revision is 409.
        database.get(&id, GetOptions::default()).await?;
        return Err(ApiError::Conflict);
    };
    let body = base_doc(database, &id, Some(&rev)).await?;
    let (doc, had) = keep_attachments_except(body, &name)?;
    if !had {
        return Err(ApiError::not_found("Document is missing attachment"));
    }
    let new_rev = write(database, writer, doc).await?;
    let mut response = json_response(
        StatusCode::OK,
        &json!({"ok": true, "id": id, "rev": new_rev}),
    );
    response
        .extensions_mut()
        .insert(crate::base::http_rules::ConfirmedWrite);
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_is_accepted_only_with_a_positive_weight() {
        let with = |value: &str| {
            let mut h = HeaderMap::new();
            h.insert(
                header::ACCEPT_ENCODING,
                HeaderValue::from_str(value).unwrap(),
            );
            accepts_gzip(&h)
        };
        assert!(with("gzip"));
        assert!(with("deflate, GZIP;q=0.5"));
        assert!(with("*"));
        assert!(!with("gzip;q=0, identity"));
        assert!(!with("identity"));
        assert!(!with("gzip;q=oops"));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }

    fn range(v: &str, len: u64) -> Result<Option<(u64, u64)>, ApiError> {
        let mut h = HeaderMap::new();
        h.insert(header::RANGE, HeaderValue::from_str(v).unwrap());
        parse_range(&h, len)
    }

    #[test]
    fn ranges_parse_like_http_says() {
        assert_eq!(range("bytes=0-9", 100).unwrap(), Some((0, 9)));
        assert_eq!(range("bytes=90-", 100).unwrap(), Some((90, 99)));
        assert_eq!(range("bytes=-10", 100).unwrap(), Some((90, 99)));
        assert_eq!(range("bytes=50-500", 100).unwrap(), Some((50, 99)));
        assert_eq!(range("bytes=0-1,5-6", 100).unwrap(), None);
        assert_eq!(range("bytes=0-", 100).unwrap(), None);
        assert_eq!(range("bytes=1-", 100).unwrap(), Some((1, 99)));
        assert!(range("bytes=100-", 100).is_err());
        assert!(range("bytes=9-3", 100).is_err());
    }
}
