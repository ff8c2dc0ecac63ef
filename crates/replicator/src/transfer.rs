//! Revisions whose attachment bytes must travel. They do not go through
//! `_bulk_docs` as base64: each is copied on its own, its attachments
//! streamed part by part from the source (the store's chunks, or a
//! `multipart/related` answer) into the target (the store's chunked upload,
//! or a `multipart/related` `PUT ?new_edits=false`), so an attachment of any
//! size never sits whole in memory.

use std::collections::VecDeque;

use bytes::Bytes;
use reqwest::Method;
use revtree::RevId;
use serde_json::Value;
use store::{AttachmentInput, AttachmentReader, DocInput};
use tokio::sync::OwnedSemaphorePermit;
use wire::doc::DocMeta;

use crate::endpoint::{
    Endpoint, EndpointError, WriteFailure, encode_doc_id, form_encode, with_retries,
};

/// Which attachments of a fetched revision the target lacks: those attached
/// after the newest of the target's possible ancestors that lies in the
/// revision's history (CouchDB's `atts_since` rule). With no such ancestor,
/// all of them.
pub fn attachments_to_send(meta: &DocMeta<'_>, possible_ancestors: &[RevId]) -> Vec<String> {
    if meta.attachments.0.is_empty() {
        return Vec::new();
    }
    let since = common_ancestor_pos(meta, possible_ancestors);
    meta.attachments
        .0
        .iter()
        .filter(|(_, att)| att.revpos.is_none_or(|pos| pos > since))
        .map(|(name, _)| name.to_string())
        .collect()
}

/// The position of the newest possible ancestor found in the revision's
/// `_revisions` history; 0 when none is.
fn common_ancestor_pos(meta: &DocMeta<'_>, possible_ancestors: &[RevId]) -> u64 {
    let Some(revisions) = &meta.revisions else {
        return 0;
    };
    possible_ancestors
        .iter()
        .filter(|rev| revisions.contains(rev))
        .map(RevId::pos)
        .max()
        .unwrap_or(0)
}

/// A fetched document's metadata, or the protocol error of a source that
/// sent a document without it.
fn meta_of<'a>(doc: &'a Value, peer: &Endpoint) -> Result<DocMeta<'a>, EndpointError> {
    DocMeta::of(doc).map_err(|e| EndpointError::Protocol {
        url: peer.display(),
        detail: format!("fetched document: {e}"),
    })
}

/// One attachment about to travel: its name and the bytes on the wire
/// (stored bytes: encoded when `encoding` is set).
#[derive(Debug, Clone)]
struct Outgoing {
    name: String,
    content_type: String,
    wire_length: u64,
    /// The bytes come gzip-encoded but go out as their content: the target
    /// does not take encoded attachments (PouchDB Server).
    inflate: bool,
}

/// Where the bytes of a document's attachments come from, in order.
enum Parts {
    Local {
        readers: VecDeque<AttachmentReader>,
        current: Option<AttachmentReader>,
    },
    Remote {
        multipart: Box<multer::Multipart<'static>>,
        current: Option<Box<multer::Field<'static>>>,
        url: String,
        /// The source connection the answer is read from, busy until done.
        _permit: Option<OwnedSemaphorePermit>,
    },
    /// A peer that answered JSON with base64 data (PouchDB Server): already
    /// in memory. `ended` marks the end of the attachment just handed out.
    Inline {
        datas: VecDeque<Vec<u8>>,
        ended: bool,
    },
}

impl Parts {
    /// The next piece of the current attachment; `None` at its end (the
    /// next call starts the following attachment).
    async fn next_chunk(&mut self) -> Result<Option<Bytes>, EndpointError> {
        match self {
            Parts::Local { readers, current } => {
                if current.is_none() {
                    *current = readers.pop_front();
                }
                let Some(reader) = current.as_mut() else {
                    return Ok(None);
                };
                match reader.next_chunk().await? {
                    Some(chunk) => Ok(Some(Bytes::from(chunk))),
                    None => {
                        *current = None;
                        Ok(None)
                    }
                }
            }
            Parts::Remote {
                multipart,
                current,
                url,
                ..
            } => {
                let transport = |e: multer::Error| EndpointError::Transport {
                    url: url.clone(),
                    detail: format!("reading attachments: {e}"),
                };
                if current.is_none() {
                    *current = multipart
                        .next_field()
                        .await
                        .map_err(transport)?
                        .map(Box::new);
                    if current.is_none() {
                        return Err(EndpointError::Transport {
                            url: url.clone(),
                            detail: "the answer ended before every attachment arrived".into(),
                        });
                    }
                }
                let Some(field) = current.as_mut() else {
                    return Ok(None);
                };
                match field.chunk().await.map_err(transport)? {
                    Some(chunk) => Ok(Some(chunk)),
                    None => {
                        *current = None;
                        Ok(None)
                    }
                }
            }
            Parts::Inline { datas, ended } => {
                if *ended {
                    *ended = false;
                    return Ok(None);
                }
                *ended = true;
                Ok(Some(Bytes::from(datas.pop_front().unwrap_or_default())))
            }
        }
    }
}

/// A revision with its attachments' metadata, ready to be sent.
struct Prepared {
    id: String,
    /// The document with `follows: true` on the attachments that travel.
    doc: Value,
    outgoing: Vec<Outgoing>,
    parts: Parts,
}

/// The attachments marked `follows`, in the document's order (the order
/// their parts come in), with the length each announces.
fn outgoing_of(doc: &Value, peer: &Endpoint) -> Result<Vec<Outgoing>, EndpointError> {
    meta_of(doc, peer)?
        .attachments
        .0
        .iter()
        .filter(|(_, att)| att.follows)
        .map(|(name, att)| {
            Ok(Outgoing {
                name: name.to_string(),
                content_type: att
                    .content_type
                    .unwrap_or("application/octet-stream")
                    .to_string(),
                wire_length: att.wire_length().ok_or_else(|| EndpointError::Protocol {
                    url: peer.display(),
                    detail: format!("attachment {name} follows without a length"),
                })?,
                inflate: false,
            })
        })
        .collect()
}

/// Reads a revision and readies its attachments `names` to be streamed.
async fn prepare(
    source: &Endpoint,
    doc: Value,
    names: &[String],
    possible_ancestors: &[RevId],
) -> Result<Prepared, EndpointError> {
    let (id, rev) = {
        let meta = meta_of(&doc, source)?;
        (meta.id.to_string(), meta.rev)
    };
    match source {
        Endpoint::Local { .. } => {
            let db = source.local_source().await?;
            let mut doc = doc;
            let mut readers = VecDeque::new();
            if let Some(Value::Object(atts)) = doc.get_mut("_attachments") {
                // In the document's order: the order the parts are sent in.
                for (name, att) in atts.iter_mut() {
                    let Value::Object(att) = att else { continue };
                    if !names.contains(name) {
                        continue;
                    }
                    let (meta, reader) = db.attachment(&id, name, Some(rev.clone())).await?;
                    att.remove("stub");
                    att.remove("data");
                    att.insert("follows".into(), Value::Bool(true));
                    // The reader gives the stored bytes: say how they are
                    // encoded, as CouchDB's `att_encoding_info` does.
                    if let (Some(encoding), Some(encoded_length)) =
                        (&meta.encoding, meta.encoded_length)
                    {
                        att.insert("encoding".into(), Value::from(encoding.as_str()));
                        att.insert("encoded_length".into(), Value::from(encoded_length));
                        att.insert("length".into(), Value::from(meta.length));
                    }
                    readers.push_back(reader);
                }
            }
            let outgoing = outgoing_of(&doc, source)?;
            Ok(Prepared {
                id,
                doc,
                outgoing,
                parts: Parts::Local {
                    readers,
                    current: None,
                },
            })
        }
        Endpoint::Remote { .. } => {
            let mut path = format!(
                "{}?rev={}&revs=true&attachments=true",
                encode_doc_id(&id),
                form_encode(&rev.to_string())
            );
            if !possible_ancestors.is_empty() {
                let since = serde_json::to_string(possible_ancestors).map_err(|e| {
                    EndpointError::Protocol {
                        url: source.display(),
                        detail: e.to_string(),
                    }
                })?;
                path.push_str(&format!("&atts_since={}", form_encode(&since)));
            }
            let crate::endpoint::Streamed { response, permit } = source
                .send_with_retries(Method::GET, &path, "multipart/related, application/json")
                .await?;
            let url = source.display();
            let content_type = response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            if let Some(boundary) = wire::multipart::boundary_of(&content_type, "multipart/related")
            {
                let stream = response.bytes_stream();
                let mut multipart = multer::Multipart::new(stream, boundary);
                let transport = |e: multer::Error| EndpointError::Transport {
                    url: url.clone(),
                    detail: format!("reading the document part: {e}"),
                };
                let first = multipart
                    .next_field()
                    .await
                    .map_err(transport)?
                    .ok_or_else(|| EndpointError::Protocol {
                        url: url.clone(),
                        detail: "multipart answer without a document part".into(),
                    })?;
                let mut first = first;
                let mut json = Vec::new();
                while let Some(chunk) = first.chunk().await.map_err(transport)? {
                    if json.len() + chunk.len() > source.max_answer() {
                        return Err(EndpointError::TooLarge {
                            url: url.clone(),
                            limit: source.max_answer(),
                        });
                    }
                    json.extend_from_slice(&chunk);
                }
                let doc = crate::endpoint::decode_doc(&url, &json)?;
                let outgoing = outgoing_of(&doc, source)?;
                Ok(Prepared {
                    id,
                    doc,
                    outgoing,
                    parts: Parts::Remote {
                        multipart: Box::new(multipart),
                        current: None,
                        url,
                        _permit: permit,
                    },
                })
            } else {
                // JSON with the bytes inline (peers without multipart answers).
                let bytes =
                    crate::endpoint::read_bounded(response, source.max_answer(), &url).await?;
                drop(permit);
                let mut doc = crate::endpoint::decode_doc(&url, &bytes)?;
                let mut datas = VecDeque::new();
                if let Some(Value::Object(atts)) = doc.get_mut("_attachments") {
                    for (_, att) in atts.iter_mut() {
                        let Value::Object(att) = att else { continue };
                        let Some(Value::String(data)) = att.remove("data") else {
                            continue;
                        };
                        let bytes =
                            base64_decode(&data).map_err(|detail| EndpointError::Protocol {
                                url: url.clone(),
                                detail,
                            })?;
                        // Inline data is always the identity bytes.
                        att.remove("encoding");
                        att.remove("encoded_length");
                        att.insert("length".into(), Value::from(bytes.len() as u64));
                        att.insert("follows".into(), Value::Bool(true));
                        datas.push_back(bytes);
                    }
                }
                let outgoing = outgoing_of(&doc, source)?;
                Ok(Prepared {
                    id,
                    doc,
                    outgoing,
                    parts: Parts::Inline {
                        datas,
                        ended: false,
                    },
                })
            }
        }
    }
}

fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("invalid base64 attachment data: {e}"))
}

/// Copies one revision whose attachments `names` the target lacks, retrying
/// the whole copy after transient failures. A refusal by the target is
/// returned as a write failure, not an error.
pub async fn copy(
    source: &Endpoint,
    target: &Endpoint,
    doc: Value,
    names: &[String],
    possible_ancestors: &[RevId],
    retries: u64,
) -> Result<Option<WriteFailure>, EndpointError> {
    with_retries(retries, "a document with attachments", || async {
        let prepared = prepare(source, doc.clone(), names, possible_ancestors).await?;
        write(target, prepared).await
    })
    .await
}

/// Writes a prepared revision to the target (`new_edits=false`).
async fn write(
    target: &Endpoint,
    prepared: Prepared,
) -> Result<Option<WriteFailure>, EndpointError> {
    let Prepared {
        id,
        doc,
        outgoing,
        mut parts,
    } = prepared;
    match target {
        Endpoint::Local { .. } => {
            let (db, gate) = target.local_gate().await?;
            let mut input = DocInput::from_json(doc)?;
            if let Some(refusal) = target.refusal(&db, &gate, &mut input).await? {
                return Ok(Some(refusal));
            }
            for out in &outgoing {
                // Content sent as it is, of a type CouchDB compresses, is
                // gzipped on the way in, as a CouchDB target would store it.
                let sent_plain = input.attachments.iter().any(|(n, att)| {
                    n == &out.name && matches!(att, AttachmentInput::Follows { encoding: None, .. })
                });
                let mut upload = if sent_plain {
                    db.begin_attachment_of(&out.name, &out.content_type)
                } else {
                    db.begin_attachment(&out.name)
                };
                while let Some(chunk) = parts.next_chunk().await? {
                    upload.write(&chunk).await?;
                }
                let staged = upload.finish().await?;
                check_length(target, out, staged.length)?;
                if let Some((_, att)) = input.attachments.iter_mut().find(|(n, _)| n == &out.name) {
                    *att = att.clone().staged(staged);
                }
            }
            let results = db.bulk_docs(vec![input], false).await?;
            Ok(results.into_iter().find_map(|row| {
                row.result.err().map(|f| WriteFailure {
                    id: row.id,
                    error: f.error.into(),
                    reason: f.reason,
                })
            }))
        }
        Endpoint::Remote { .. } => {
            let boundary = wire::multipart::new_boundary();
            let mut doc = doc;
            let mut outgoing = outgoing;
            if !target.takes_encoded_attachments().await {
                send_as_content(&mut doc, &mut outgoing);
            }
            let json = ejson::to_vec(&doc);
            let heads: Vec<Vec<u8>> = std::iter::once(
                format!("--{boundary}\r\nContent-Type: application/json\r\n\r\n").into_bytes(),
            )
            .chain(outgoing.iter().map(|out| {
                // The encoding, when there is one, is in the JSON part.
                let head = wire::multipart::attachment_part_headers(
                    &out.name,
                    &out.content_type,
                    out.wire_length,
                    None,
                );
                format!("\r\n--{boundary}\r\n{head}\r\n\r\n").into_bytes()
            }))
            .collect();
            let tail = format!("\r\n--{boundary}--\r\n").into_bytes();
            let total = heads.iter().map(|h| h.len() as u64).sum::<u64>()
                + json.len() as u64
                + outgoing.iter().map(|o| o.wire_length).sum::<u64>()
                + tail.len() as u64;
            // A small channel: the source is read only as fast as the target takes it.
            let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
            let body =
                reqwest::Body::wrap_stream(futures_util::stream::unfold(rx, |mut rx| async {
                    rx.recv().await.map(|item| (item, rx))
                }));
            let produce = async {
                let mut heads = heads.into_iter();
                let send = |b: Bytes| {
                    let tx = tx.clone();
                    async move { tx.send(Ok(b)).await.is_ok() }
                };
                if let Some(h) = heads.next() {
                    send(Bytes::from(h)).await;
                }
                send(Bytes::from(json)).await;
                for out in &outgoing {
                    if let Some(h) = heads.next() {
                        send(Bytes::from(h)).await;
                    }
                    let mut sent = 0u64;
                    let mut inflater = out.inflate.then(|| Inflater::new(target));
                    loop {
                        let (pieces, end) = match parts.next_chunk().await {
                            Ok(Some(chunk)) => match inflater.as_mut() {
                                Some(inflater) => (inflater.feed(&chunk), false),
                                None => (Ok(vec![chunk]), false),
                            },
                            // The decoder's last bytes close the attachment.
                            Ok(None) => match inflater.take() {
                                Some(inflater) => (inflater.finish().map(|rest| vec![rest]), true),
                                None => (Ok(Vec::new()), true),
                            },
                            Err(e) => (Err(e), true),
                        };
                        let pieces = match pieces {
                            Ok(pieces) => pieces,
                            Err(e) => {
                                let _ = tx.send(Err(std::io::Error::other(e.to_string()))).await;
                                return Err(e);
                            }
                        };
                        for piece in pieces.into_iter().filter(|p| !p.is_empty()) {
                            sent += piece.len() as u64;
                            if !send(piece).await {
                                return Ok(());
                            }
                        }
                        if end {
                            break;
                        }
                    }
                    if let Err(e) = check_length(target, out, sent) {
                        let _ = tx.send(Err(std::io::Error::other(e.to_string()))).await;
                        return Err(e);
                    }
                }
                send(Bytes::from(tail)).await;
                drop(tx);
                Ok(())
            };
            let path = format!("{}?new_edits=false", encode_doc_id(&id));
            let content_type = format!("multipart/related; boundary=\"{boundary}\"");
            let upload = target.send_streaming(Method::PUT, &path, &content_type, body, total);
            let (produced, answer) = tokio::join!(produce, upload);
            produced?;
            match answer {
                Ok(_) => Ok(None),
                Err(EndpointError::Http {
                    error,
                    reason,
                    status,
                    ..
                }) if (400..500).contains(&status) && status != 408 && status != 429 => {
                    Ok(Some(WriteFailure { id, error, reason }))
                }
                Err(e) => Err(e),
            }
        }
    }
}

/// Attachments stored gzip-encoded go to a target that does not take
/// encoded ones as their content: the JSON part loses `encoding`,
/// `encoded_length` and the digest of the encoded bytes (the target
/// computes its own), and the bytes are inflated on the way.
fn send_as_content(doc: &mut Value, outgoing: &mut [Outgoing]) {
    let Some(Value::Object(atts)) = doc.get_mut("_attachments") else {
        return;
    };
    for out in outgoing.iter_mut() {
        let Some(Value::Object(att)) = atts.get_mut(&out.name) else {
            continue;
        };
        if att.get("encoding").and_then(Value::as_str) != Some("gzip") {
            continue;
        }
        let Some(length) = att.get("length").and_then(Value::as_u64) else {
            continue;
        };
        att.remove("encoding");
        att.remove("encoded_length");
        att.remove("digest");
        out.wire_length = length;
        out.inflate = true;
    }
}

/// Inflates gzip bytes arriving in pieces, a few KiB of input at a time so
/// that no output piece grows large (deflate inflates ~1000:1 at most).
struct Inflater {
    decoder: flate2::write::GzDecoder<Vec<u8>>,
    url: String,
}

/// Encoded bytes fed to the decoder at a time.
const INFLATE_FEED: usize = 4096;

impl Inflater {
    fn new(target: &Endpoint) -> Inflater {
        Inflater {
            decoder: flate2::write::GzDecoder::new(Vec::new()),
            url: target.display(),
        }
    }

    fn error(&self, e: std::io::Error) -> EndpointError {
        EndpointError::Protocol {
            url: self.url.clone(),
            detail: format!("a gzip attachment does not inflate: {e}"),
        }
    }

    /// The content of the next encoded piece, in bounded pieces.
    fn feed(&mut self, encoded: &[u8]) -> Result<Vec<Bytes>, EndpointError> {
        use std::io::Write;
        let mut out = Vec::new();
        for slice in encoded.chunks(INFLATE_FEED) {
            if let Err(e) = self.decoder.write_all(slice) {
                return Err(self.error(e));
            }
            out.push(Bytes::from(std::mem::take(self.decoder.get_mut())));
        }
        Ok(out)
    }

    /// The rest of the content, once the encoded bytes have ended.
    fn finish(self) -> Result<Bytes, EndpointError> {
        let url = self.url.clone();
        self.decoder
            .finish()
            .map(Bytes::from)
            .map_err(|e| EndpointError::Protocol {
                url,
                detail: format!("a gzip attachment does not inflate: {e}"),
            })
    }
}

fn check_length(target: &Endpoint, out: &Outgoing, got: u64) -> Result<(), EndpointError> {
    if got == out.wire_length {
        return Ok(());
    }
    Err(EndpointError::Transport {
        url: target.display(),
        detail: format!(
            "attachment {} announced {} bytes but {got} arrived",
            out.name, out.wire_length
        ),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A remote peer nobody listens at (no request is made).
    fn peer() -> Endpoint {
        let db = crate::spec::RemoteDb {
            url: "http://127.0.0.1:1/db/".parse().unwrap(),
            headers: Vec::new(),
            auth: None,
        };
        let options = crate::endpoint::HttpOptions {
            max_answer: crate::spec::defaults::MAX_ANSWER_BYTES as usize,
            timeout: std::time::Duration::from_secs(1),
            retries: 0,
            http_connections: 1,
        };
        Endpoint::remote(&db, options).unwrap()
    }

    fn doc() -> Value {
        json!({
            "_id": "d", "_rev": "4-d",
            "_revisions": {"start": 4, "ids": ["d", "c", "b", "a"]},
            "_attachments": {
                "old": {"stub": true, "revpos": 1, "length": 3, "digest": "md5-x"},
                "mid": {"stub": true, "revpos": 3, "length": 3, "digest": "md5-y"},
                "new": {"stub": true, "revpos": 4, "length": 3, "digest": "md5-z"},
            }
        })
    }

    #[test]
    fn attachments_newer_than_the_common_ancestor_travel() {
        let doc = doc();
        let meta = DocMeta::of(&doc).unwrap();
        let names = |ancestors: &[&str]| {
            let a: Vec<RevId> = ancestors.iter().map(|s| RevId::parse(s).unwrap()).collect();
            let mut n = attachments_to_send(&meta, &a);
            n.sort();
            n
        };
        assert_eq!(names(&[]), ["mid", "new", "old"]);
        assert_eq!(names(&["2-b"]), ["mid", "new"]);
        assert_eq!(names(&["3-c", "1-a"]), ["new"]);
        // Not in this revision's history: no help.
        assert_eq!(names(&["3-zz"]), ["mid", "new", "old"]);
        let bare = json!({"_id": "x", "_rev": "1-a"});
        assert!(attachments_to_send(&DocMeta::of(&bare).unwrap(), &[]).is_empty());
    }

    #[test]
    fn attachments_that_follow_announce_their_length_or_the_document_is_refused() {
        let peer = peer();
        let doc = json!({"_id": "d", "_rev": "1-a", "_attachments": {
            "b": {"follows": true, "length": 9, "encoding": "gzip", "encoded_length": 4},
            "a": {"follows": true, "length": 3, "content_type": "text/plain"},
            "s": {"stub": true, "length": 3},
        }});
        let out = outgoing_of(&doc, &peer).unwrap();
        let shown: Vec<(&str, &str, u64)> = out
            .iter()
            .map(|o| (o.name.as_str(), o.content_type.as_str(), o.wire_length))
            .collect();
        assert_eq!(
            shown,
            [("b", "application/octet-stream", 4), ("a", "text/plain", 3)]
        );
        let doc = json!({"_id": "d", "_rev": "1-a", "_attachments": {"a": {"follows": true}}});
        let err = outgoing_of(&doc, &peer).unwrap_err().to_string();
        assert!(
            err.contains("attachment a follows without a length"),
            "{err}"
        );
        let err = outgoing_of(&json!({"_id": "d"}), &peer)
            .unwrap_err()
            .to_string();
        assert!(err.contains("_rev"), "{err}");
    }

    #[test]
    fn encoded_attachments_go_as_their_content_to_peers_that_want_it() {
        let mut doc = json!({"_id": "g", "_rev": "1-a", "_attachments": {
            "z.txt": {"follows": true, "content_type": "text/plain", "length": 17,
                      "encoding": "gzip", "encoded_length": 28, "digest": "md5-gz"},
            "p.bin": {"follows": true, "content_type": "image/png", "length": 5, "digest": "md5-p"}
        }});
        let mut outgoing = outgoing_of(&doc, &peer()).unwrap();
        assert_eq!(
            outgoing.iter().map(|o| o.wire_length).collect::<Vec<_>>(),
            [28, 5]
        );
        send_as_content(&mut doc, &mut outgoing);
        assert_eq!(
            doc["_attachments"]["z.txt"],
            json!({"follows": true, "content_type": "text/plain", "length": 17})
        );
        assert_eq!(doc["_attachments"]["p.bin"]["digest"], "md5-p");
        assert_eq!(
            outgoing
                .iter()
                .map(|o| (o.wire_length, o.inflate))
                .collect::<Vec<_>>(),
            [(17, true), (5, false)]
        );
    }

    #[test]
    fn the_inflater_gives_the_content_back_in_bounded_pieces() {
        use std::io::Write;
        let content = vec![b'a'; 3_000_000];
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(&content).unwrap();
        let gz = encoder.finish().unwrap();
        let mut inflater = Inflater::new(&peer());
        let mut out = Vec::new();
        for chunk in gz.chunks(1000) {
            for piece in inflater.feed(chunk).unwrap() {
                // 4 KiB of input inflates to a few MiB at most.
                assert!(piece.len() <= 5_000_000);
                out.extend_from_slice(&piece);
            }
        }
        out.extend_from_slice(&inflater.finish().unwrap());
        assert_eq!(out, content);
        let mut broken = Inflater::new(&peer());
        assert!(broken.feed(b"not gzip at all").is_err() || broken.finish().is_err());
    }
}
