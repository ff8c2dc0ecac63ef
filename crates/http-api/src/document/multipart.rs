//! Multipart bodies, byte for byte as CouchDB 3 writes them
//! (`couch_doc:doc_to_multi_part_stream`, `chttpd_db:send_docs_multipart`):
//! `open_revs` answers as multipart/mixed, documents with attachments as
//! multipart/related, and multipart/related uploads parsed as they stream.
//! Attachment bytes are streamed chunk by chunk in both directions.

use std::collections::VecDeque;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use futures_util::stream;
use serde_json::Value;
use store::{AttachmentInput, AttachmentReader, Database, DocInput, DocJson, OpenRev};

use crate::AppState;
use crate::base::doc_input::parse_doc;
use crate::base::error::ApiError;

/// Whether the client takes `mime`, as CouchDB decides: a request without
/// `Accept` takes anything; else `mime`, `type/*` or `*/*` with a weight
/// above zero. (So `curl` gets multipart where CouchDB sends it.)
pub(crate) fn accepts(headers: &HeaderMap, mime: &str) -> bool {
    let mut values = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .peekable();
    if values.peek().is_none() {
        return true;
    }
    let family = mime.split('/').next().unwrap_or(mime);
    values.flat_map(|v| v.split(',')).any(|item| {
        let mut parts = item.split(';');
        let range = parts.next().unwrap_or("").trim();
        let weight = parts
            .find_map(|p| p.trim().strip_prefix("q="))
            .map_or(Some(1.0), |q| q.trim().parse::<f32>().ok());
        let matches = range.eq_ignore_ascii_case(mime)
            || range == "*/*"
            || range
                .strip_suffix("/*")
                .is_some_and(|f| f.eq_ignore_ascii_case(family));
        matches && weight.is_some_and(|w| w > 0.0)
    })
}

use wire::multipart::new_boundary as boundary;

/// One piece of a streamed multipart body.
enum Piece {
    Bytes(Bytes),
    Attachment(AttachmentReader),
}

/// The attachments a document JSON marks `follows: true`, in order.
fn following(doc: &Value) -> Vec<String> {
    doc.get("_attachments")
        .and_then(Value::as_object)
        .map(|atts| {
            atts.iter()
                .filter(|(_, a)| a.get("follows").and_then(Value::as_bool) == Some(true))
                .map(|(name, _)| name.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// The pieces of one document as CouchDB writes it: the JSON alone when no
/// attachment follows, else a multipart/related body. Returns the part's
/// content type and how many bytes its attachments' pieces hold.
async fn document_pieces(
    database: &Database,
    id: &str,
    doc: DocJson,
    inner: &str,
    pieces: &mut VecDeque<Piece>,
) -> Result<(String, u64), ApiError> {
    let value = doc.to_value()?;
    let names = following(&value);
    if names.is_empty() {
        pieces.push_back(Piece::Bytes(Bytes::from(doc.into_string())));
        return Ok(("application/json".into(), 0));
    }
    let mut attachment_bytes = 0u64;
    let rev = value
        .get("_rev")
        .and_then(Value::as_str)
        .map(crate::base::params::parse_rev)
        .transpose()?;
    pieces.push_back(Piece::Bytes(Bytes::from(format!(
        "--{inner}\r\nContent-Type: application/json\r\n\r\n{}\r\n--{inner}",
        doc.as_str()
    ))));
    for name in names {
        let (meta, reader) = database.attachment(id, &name, rev.clone()).await?;
        let length = meta.encoded_length.unwrap_or(meta.length);
        attachment_bytes += length;
        let head = format!(
            "\r\n{}\r\n\r\n",
            wire::multipart::attachment_part_headers(
                &name,
                &meta.content_type,
                length,
                meta.encoding.as_deref()
            )
        );
        pieces.push_back(Piece::Bytes(Bytes::from(head)));
        pieces.push_back(Piece::Attachment(reader));
        pieces.push_back(Piece::Bytes(Bytes::from(format!("\r\n--{inner}"))));
    }
    pieces.push_back(Piece::Bytes(Bytes::from_static(b"--")));
    Ok((
        format!("multipart/related; boundary=\"{inner}\""),
        attachment_bytes,
    ))
}

fn stream_pieces(pieces: VecDeque<Piece>) -> Body {
    let s = stream::unfold(pieces, |mut pieces| async move {
        loop {
            match pieces.front_mut()? {
                Piece::Bytes(_) => {
                    if let Some(Piece::Bytes(b)) = pieces.pop_front() {
                        return Some((Ok::<Bytes, std::io::Error>(b), pieces));
                    }
                }
                Piece::Attachment(reader) => match reader.next_chunk().await {
                    Ok(Some(chunk)) => return Some((Ok(Bytes::from(chunk)), pieces)),
                    Ok(None) => {
                        pieces.pop_front();
                    }
                    Err(e) => {
                        pieces.clear();
                        return Some((Err(std::io::Error::other(e.to_string())), pieces));
                    }
                },
            }
        }
    });
    Body::from_stream(s)
}

/// `GET /db/doc?open_revs=...` with `Accept: multipart/mixed`.
pub(crate) async fn open_revs_mixed(
    database: &Database,
    id: &str,
    revs: Vec<OpenRev>,
) -> Result<Response, ApiError> {
    let outer = boundary();
    let inner = boundary();
    let mut pieces = VecDeque::new();
    pieces.push_back(Piece::Bytes(Bytes::from(format!("--{outer}"))));
    for rev in revs {
        match rev {
            OpenRev::Ok(doc) => {
                let mut part = VecDeque::new();
                let (content_type, _) =
                    document_pieces(database, id, doc, &inner, &mut part).await?;
                pieces.push_back(Piece::Bytes(Bytes::from(format!(
                    "\r\nContent-Type: {content_type}\r\n\r\n"
                ))));
                pieces.extend(part);
            }
            OpenRev::Missing(rev) => pieces.push_back(Piece::Bytes(Bytes::from(format!(
                "\r\nContent-Type: application/json; error=\"true\"\r\n\r\n{}",
                serde_json::json!({"missing": rev.to_string()})
            )))),
        }
        pieces.push_back(Piece::Bytes(Bytes::from(format!("\r\n--{outer}"))));
    }
    pieces.push_back(Piece::Bytes(Bytes::from_static(b"--")));
    let mut response = Response::new(stream_pieces(pieces));
    let content_type = format!("multipart/mixed; boundary=\"{outer}\"");
    if let Ok(v) = HeaderValue::from_str(&content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    Ok(response)
}

/// `GET /db/doc?attachments=true` with `Accept: multipart/related`: the
/// document as multipart/related when attachments follow, else plain JSON.
pub(crate) async fn doc_related(
    database: &Database,
    id: &str,
    doc: DocJson,
) -> Result<Response, ApiError> {
    let inner = boundary();
    let mut pieces = VecDeque::new();
    let (content_type, attachment_bytes) =
        document_pieces(database, id, doc, &inner, &mut pieces).await?;
    // Every piece's length is known before the first is sent: the answer
    // carries its `Content-Length`, as CouchDB's does, not chunked framing.
    let framing: u64 = pieces
        .iter()
        .map(|piece| match piece {
            Piece::Bytes(bytes) => bytes.len() as u64,
            Piece::Attachment(_) => 0,
        })
        .sum();
    let mut response = Response::new(stream_pieces(pieces));
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(
        header::CONTENT_LENGTH,
        HeaderValue::from(framing + attachment_bytes),
    );
    if let Ok(v) = HeaderValue::from_str(&content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    Ok(response)
}

/// The boundary of a `multipart/related` content type.
pub(crate) fn related_boundary(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    wire::multipart::boundary_of(value, "multipart/related")
}

/// Reads a multipart/related document upload: the JSON part first, then the
/// bytes of each `follows` attachment (matched by file name when the part
/// names one, else in `_attachments` order), each streamed into the store.
pub(crate) async fn read_related(
    state: &AppState,
    database: &Database,
    body: Body,
    boundary: String,
) -> Result<DocInput, ApiError> {
    let bad = |e: multer::Error| ApiError::bad_request(format!("invalid multipart body: {e}"));
    let parts = with_part_headers(body.into_data_stream(), &boundary);
    let mut multipart = multer::Multipart::new(parts, boundary);
    let mut first = multipart
        .next_field()
        .await
        .map_err(bad)?
        .ok_or_else(|| ApiError::bad_request("multipart body has no document part"))?;
    // CouchDB reads the document part only as JSON said to be JSON.
    let json_part = first
        .content_type()
        .is_some_and(|t| t.essence_str().eq_ignore_ascii_case("application/json"));
    if !json_part {
        return Err(ApiError::BadContentType(
            "Content-Type must be application/json".into(),
        ));
    }
    // Scanned like any document body: bounded by `max_document_size`, with
    // large inline data (rare in this part) streamed into the store.
    let body = crate::base::body::read_doc_stream(state, database, &mut first, false).await?;
    drop(first);
    let mut doc = parse_doc(state, Value::Object(body.map))?;
    crate::base::body::DocBody::resolve(body.staged, &mut doc)?;
    let mut waiting: Vec<usize> = doc
        .attachments
        .iter()
        .enumerate()
        .filter(|(_, (_, a))| matches!(a, AttachmentInput::Follows { .. }))
        .map(|(i, _)| i)
        .collect();
    while let Some(mut field) = multipart.next_field().await.map_err(bad)? {
        if waiting.is_empty() {
            break;
        }
        let by_name = field
            .file_name()
            .and_then(|f| waiting.iter().position(|&i| doc.attachments[i].0 == f));
        let index = waiting.remove(by_name.unwrap_or(0));
        let mut upload = match &doc.attachments[index] {
            // Bytes sent as they are, of a type CouchDB compresses, are gzipped on the way in.
            (
                name,
                AttachmentInput::Follows {
                    content_type,
                    encoding: None,
                    ..
                },
            ) => database.begin_attachment_of(name, content_type),
            (name, _) => database.begin_attachment(name),
        };
        while let Some(chunk) = field.chunk().await.map_err(bad)? {
            upload.write(&chunk).await?;
        }
        let staged = upload.finish().await?;
        let (name, input) = &mut doc.attachments[index];
        if let AttachmentInput::Follows {
            length, encoding, ..
        } = &*input
            && encoding.is_none()
            && length.is_some_and(|l| l != staged.length)
        {
            return Err(ApiError::bad_request(format!(
                "attachment {name} announced {} bytes but {} arrived",
                length.unwrap_or(0),
                staged.length
            )));
        }
        *input = input.clone().staged(staged);
    }
    if let Some(&i) = waiting.first() {
        return Err(ApiError::bad_request(format!(
            "multipart body lacks the bytes of attachment {}",
            doc.attachments[i].0
        )));
    }
    Ok(doc)
}

/// The header given to a part sent with none.
const NO_HEADERS: &[u8] = b"X-Part-Had-No-Headers: true\r\n";

/// Gives every part at least one header. CouchDB takes a part with none
/// (`--B\r\n\r\nbytes`: the bytes start right after the blank line);
/// the multipart reader would instead take everything up to the next blank
/// line, in whatever part it falls, for that part's headers, and store
/// other bytes than the ones sent. A delimiter followed at once by the
/// blank line can only be such a part (the delimiter never occurs inside
/// a part's bytes), so a header is put between them.
fn with_part_headers<S, E>(
    body: S,
    boundary: &str,
) -> impl futures_util::Stream<Item = Result<Bytes, E>> + use<S, E>
where
    S: futures_util::Stream<Item = Result<Bytes, E>> + Unpin,
{
    use futures_util::StreamExt;
    // The body is read as if it began with a line end, so its first
    // delimiter looks like every other.
    let pattern: Vec<u8> = format!("\r\n--{boundary}\r\n\r\n").into_bytes();
    let keep = pattern.len() - 1;
    // The line end put in front, still to be taken out of the output.
    let state = (body, b"\r\n".to_vec(), 2usize, false);
    stream::unfold(state, move |(mut body, mut carry, mut unsent, done)| {
        let pattern = pattern.clone();
        async move {
            if done {
                return None;
            }
            let (chunk, ended) = match body.next().await {
                Some(Ok(chunk)) => (chunk, false),
                Some(Err(e)) => return Some((Err(e), (body, carry, unsent, true))),
                None => (Bytes::new(), true),
            };
            carry.extend_from_slice(&chunk);
            let mut out = Vec::with_capacity(carry.len() + NO_HEADERS.len());
            let mut at = 0;
            while let Some(found) = carry[at..]
                .windows(pattern.len())
                .position(|w| w == pattern.as_slice())
            {
                let end_of_delimiter = at + found + pattern.len() - 2;
                out.extend_from_slice(&carry[at..end_of_delimiter]);
                out.extend_from_slice(NO_HEADERS);
                at = end_of_delimiter;
            }
            // What may be the start of a delimiter waits for the next chunk.
            let hold = if ended { 0 } else { keep.min(carry.len() - at) };
            out.extend_from_slice(&carry[at..carry.len() - hold]);
            carry.drain(..carry.len() - hold);
            let drop = unsent.min(out.len());
            out.drain(..drop);
            unsent -= drop;
            Some((Ok(Bytes::from(out)), (body, carry, unsent, ended)))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Runs a body, cut into chunks of the given sizes, through
    /// [`with_part_headers`].
    fn through(body: &[u8], cuts: &[usize]) -> Vec<u8> {
        let mut chunks = Vec::new();
        let mut rest = body;
        for &cut in cuts.iter().cycle().take(body.len() + 1) {
            if rest.is_empty() {
                break;
            }
            let n = cut.clamp(1, rest.len());
            chunks.push(Ok::<_, std::convert::Infallible>(Bytes::copy_from_slice(
                &rest[..n],
            )));
            rest = &rest[n..];
        }
        let out = with_part_headers(stream::iter(chunks), "B");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let pieces: Vec<Result<Bytes, _>> = runtime.block_on(futures_util::StreamExt::collect(out));
        pieces.into_iter().flatten().flatten().collect()
    }

    proptest! {
        /// Parts with and without headers, cut anywhere: only headerless
        /// parts change, by the one header they get.
        #[test]
        fn only_headerless_parts_gain_a_header(
            parts in proptest::collection::vec(
                (any::<bool>(), proptest::collection::vec(any::<u8>(), 0..40)), 1..5),
            cuts in proptest::collection::vec(1usize..30, 1..20),
        ) {
            let mut body = Vec::new();
            let mut expected = Vec::new();
            for (headed, bytes) in &parts {
                // Part bytes never hold the delimiter, as in any valid body.
                let bytes: Vec<u8> = bytes.iter().map(|&b| if b == b'-' { b'x' } else { b }).collect();
                body.extend_from_slice(b"--B\r\n");
                expected.extend_from_slice(b"--B\r\n");
                if *headed {
                    body.extend_from_slice(b"Content-Type: a/b\r\n");
                    expected.extend_from_slice(b"Content-Type: a/b\r\n");
                } else {
                    expected.extend_from_slice(NO_HEADERS);
                }
                for out in [&mut body, &mut expected] {
                    out.extend_from_slice(b"\r\n");
                    out.extend_from_slice(&bytes);
                    out.extend_from_slice(b"\r\n");
                }
            }
            body.extend_from_slice(b"--B--");
            expected.extend_from_slice(b"--B--");
            prop_assert_eq!(through(&body, &cuts), expected);
        }
    }

    #[test]
    fn accept_headers_are_matched_by_type() {
        let mut h = HeaderMap::new();
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, multipart/mixed;q=0.9"),
        );
        assert!(accepts(&h, "multipart/mixed"));
        assert!(!accepts(&h, "multipart/related"));
        assert!(accepts(&HeaderMap::new(), "multipart/related"));
        for (accept, takes) in [
            ("*/*", true),
            ("multipart/*", true),
            ("application/json", false),
            ("multipart/related;q=0", false),
            ("text/*, application/json", false),
        ] {
            h.insert(header::ACCEPT, HeaderValue::from_static(accept));
            assert_eq!(accepts(&h, "multipart/related"), takes, "{accept}");
        }
    }

    #[test]
    fn the_related_boundary_is_read_from_the_content_type() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("multipart/related; boundary=\"abc123\""),
        );
        assert_eq!(related_boundary(&h).as_deref(), Some("abc123"));
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        assert_eq!(related_boundary(&h), None);
    }
}
