//! Revisions whose attachment bytes must travel. They do not go through
//! `_bulk_docs` as base64: each is copied on its own, its attachments
//! streamed part by part from the source (the store's chunks, or a
//! `multipart/related` answer) into the target (the store's chunked upload,
//! or a `multipart/related` `PUT ?new_edits=false`), so an attachment of any
//! size never sits whole in memory.

use std::collections::VecDeque;

use bytes::Bytes;
use reqwest::Method;
use serde_json::{Map, Value};
use store::{AttachmentReader, DocInput};

use crate::endpoint::{
    Endpoint, EndpointError, WriteFailure, encode_doc_id, form_encode, transport, with_retries,
};

/// Which attachments of a fetched revision the target lacks: those attached
/// after the newest of the target's possible ancestors that lies in the
/// revision's history (CouchDB's `atts_since` rule). With no such ancestor,
/// all of them.
pub fn attachments_to_send(doc: &Value, possible_ancestors: &[String]) -> Vec<String> {
    let Some(Value::Object(atts)) = doc.get("_attachments") else {
        return Vec::new();
    };
    let since = common_ancestor_pos(doc, possible_ancestors);
    atts.iter()
        .filter(|(_, att)| {
            let revpos = att.get("revpos").and_then(Value::as_u64);
            revpos.is_none_or(|pos| pos > since)
        })
        .map(|(name, _)| name.clone())
        .collect()
}

/// The position of the newest possible ancestor found in the revision's
/// `_revisions` history; 0 when none is.
fn common_ancestor_pos(doc: &Value, possible_ancestors: &[String]) -> u64 {
    let Some(revisions) = doc.get("_revisions") else {
        return 0;
    };
    let start = revisions.get("start").and_then(Value::as_u64).unwrap_or(0);
    let ids: Vec<&str> = revisions
        .get("ids")
        .and_then(Value::as_array)
        .map(|ids| ids.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    possible_ancestors
        .iter()
        .filter_map(|rev| {
            let (pos, hash) = rev.split_once('-')?;
            let pos: u64 = pos.parse().ok()?;
            let back = start.checked_sub(pos)? as usize;
            (ids.get(back) == Some(&hash)).then_some(pos)
        })
        .max()
        .unwrap_or(0)
}

/// One attachment about to travel: its name and the bytes on the wire
/// (stored bytes: encoded when `encoding` is set).
#[derive(Debug, Clone)]
struct Outgoing {
    name: String,
    content_type: String,
    wire_length: u64,
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
    /// The document with `follows: true` on the attachments that travel.
    doc: Value,
    outgoing: Vec<Outgoing>,
    parts: Parts,
}

/// The wire length of an attachment as its metadata announces it.
fn wire_length(att: &Map<String, Value>) -> u64 {
    let field = if att.get("encoding").is_some() {
        "encoded_length"
    } else {
        "length"
    };
    att.get(field).and_then(Value::as_u64).unwrap_or(0)
}

fn outgoing_of(doc: &Value) -> Vec<Outgoing> {
    let Some(Value::Object(atts)) = doc.get("_attachments") else {
        return Vec::new();
    };
    atts.iter()
        .filter(|(_, att)| att.get("follows").and_then(Value::as_bool) == Some(true))
        .filter_map(|(name, att)| {
            let att = att.as_object()?;
            Some(Outgoing {
                name: name.clone(),
                content_type: att
                    .get("content_type")
                    .and_then(Value::as_str)
                    .unwrap_or("application/octet-stream")
                    .to_string(),
                wire_length: wire_length(att),
            })
        })
        .collect()
}

/// Reads a revision and readies its attachments `names` to be streamed.
async fn prepare(
    source: &Endpoint,
    doc: Value,
    names: &[String],
    possible_ancestors: &[String],
) -> Result<Prepared, EndpointError> {
    let id = doc
        .get("_id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let rev = doc
        .get("_rev")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    match source {
        Endpoint::Local { .. } => {
            let db = source.local().await?;
            let parsed_rev = revtree::RevId::parse(&rev).map_err(|e| EndpointError::Protocol {
                url: source.display(),
                detail: e.to_string(),
            })?;
            let mut doc = doc;
            let mut readers = VecDeque::new();
            if let Some(Value::Object(atts)) = doc.get_mut("_attachments") {
                // In the document's order: the order the parts are sent in.
                for (name, att) in atts.iter_mut() {
                    let Value::Object(att) = att else { continue };
                    if !names.contains(name) {
                        continue;
                    }
                    let (_, reader) = db.attachment(&id, name, Some(parsed_rev.clone())).await?;
                    att.remove("stub");
                    att.remove("data");
                    att.insert("follows".into(), Value::Bool(true));
                    readers.push_back(reader);
                }
            }
            let outgoing = outgoing_of(&doc);
            Ok(Prepared {
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
                form_encode(&rev)
            );
            if !possible_ancestors.is_empty() {
                let since = serde_json::to_string(possible_ancestors).unwrap_or_default();
                path.push_str(&format!("&atts_since={}", form_encode(&since)));
            }
            let response = source
                .send_with_retries(
                    Method::GET,
                    &path,
                    "multipart/related, application/json",
                    None,
                )
                .await?;
            let url = source.display();
            let content_type = response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            if let Some(boundary) = boundary_of(&content_type) {
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
                let json = first.bytes().await.map_err(transport)?;
                let doc: Value =
                    serde_json::from_slice(&json).map_err(|e| EndpointError::Transport {
                        url: url.clone(),
                        detail: format!("truncated or invalid JSON: {e}"),
                    })?;
                let outgoing = outgoing_of(&doc);
                Ok(Prepared {
                    doc,
                    outgoing,
                    parts: Parts::Remote {
                        multipart: Box::new(multipart),
                        current: None,
                        url,
                    },
                })
            } else {
                // JSON with the bytes inline (peers without multipart answers).
                let bytes = response.bytes().await.map_err(transport(&url))?;
                let mut doc: Value =
                    serde_json::from_slice(&bytes).map_err(|e| EndpointError::Transport {
                        url: url.clone(),
                        detail: format!("truncated or invalid JSON: {e}"),
                    })?;
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
                let outgoing = outgoing_of(&doc);
                Ok(Prepared {
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

/// The `boundary` of a `multipart/related` content type.
fn boundary_of(content_type: &str) -> Option<String> {
    let (kind, params) = content_type.split_once(';')?;
    if !kind.trim().eq_ignore_ascii_case("multipart/related") {
        return None;
    }
    params.split(';').find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| v.trim().trim_matches('"').to_string())
    })
}

/// Copies one revision whose attachments `names` the target lacks, retrying
/// the whole copy after transient failures. A refusal by the target is
/// returned as a write failure, not an error.
pub async fn copy(
    source: &Endpoint,
    target: &Endpoint,
    doc: Value,
    names: &[String],
    possible_ancestors: &[String],
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
        doc,
        outgoing,
        mut parts,
    } = prepared;
    let id = doc
        .get("_id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    match target {
        Endpoint::Local { .. } => {
            let db = target.local().await?;
            let mut input = DocInput::from_json(doc)?;
            for out in &outgoing {
                let mut upload = db.begin_attachment(&out.name);
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
            let boundary = uuid::Uuid::new_v4().simple().to_string();
            let json = doc.to_string().into_bytes();
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
                    loop {
                        match parts.next_chunk().await {
                            Ok(Some(chunk)) => {
                                sent += chunk.len() as u64;
                                if !send(chunk).await {
                                    return Ok(());
                                }
                            }
                            Ok(None) => break,
                            Err(e) => {
                                let _ = tx.send(Err(std::io::Error::other(e.to_string()))).await;
                                return Err(e);
                            }
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
        let names = |ancestors: &[&str]| {
            let a: Vec<String> = ancestors.iter().map(|s| s.to_string()).collect();
            let mut n = attachments_to_send(&doc(), &a);
            n.sort();
            n
        };
        assert_eq!(names(&[]), ["mid", "new", "old"]);
        assert_eq!(names(&["2-b"]), ["mid", "new"]);
        assert_eq!(names(&["3-c", "1-a"]), ["new"]);
        // Not in this revision's history: no help.
        assert_eq!(names(&["3-zz"]), ["mid", "new", "old"]);
        assert!(attachments_to_send(&json!({"_id": "x"}), &[]).is_empty());
    }

    #[test]
    fn the_boundary_is_read_from_a_related_content_type() {
        assert_eq!(
            boundary_of("multipart/related; boundary=\"abc\"").as_deref(),
            Some("abc")
        );
        assert_eq!(boundary_of("application/json"), None);
        assert_eq!(boundary_of("multipart/mixed; boundary=x"), None);
    }
}
